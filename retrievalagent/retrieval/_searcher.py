"""Hybrid search over one index: dense and BM25 searches, and their fusion.

The graph calls the two searches as separate nodes (dense runs in parallel with memory
recall; BM25 waits for it), and :meth:`HybridSearcher.search` chains them for callers who
just want passages (``as_retriever``, benchmarks).
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from concurrent.futures import Future
from typing import Any

from langchain_core.embeddings import Embeddings

from retrievalagent.retrieval._fusion import FusedHit, Fuser
from retrievalagent.retrieval._index import VectorIndex
from retrievalagent.retrieval._lexical import LexicalEncoder
from retrievalagent.retrieval._types import Condition, Hit, parse_filter

__all__ = ["HybridSearcher", "QueryEmbedder", "to_source"]


class QueryEmbedder(Embeddings):
    """Query vectors with a small LRU cache and single-flight de-duplication.

    Memory recall and dense search may embed the same question at the same moment (in
    parallel graph branches, or mem0 embedding it through the agent's embeddings); the
    second caller waits for the first instead of running the model twice.
    """

    def __init__(self, embeddings: Embeddings, size: int = 256) -> None:
        self.embeddings = embeddings
        self._size = size
        self._cache: OrderedDict[str, list[float]] = OrderedDict()
        self._inflight: dict[str, Future[list[float]]] = {}
        self._lock = threading.Lock()

    def _lookup(self, text: str) -> tuple[list[float] | None, Future[list[float]] | None, bool]:
        with self._lock:
            if text in self._cache:
                self._cache.move_to_end(text)
                return self._cache[text], None, False
            if text in self._inflight:
                return None, self._inflight[text], False
            future: Future[list[float]] = Future()
            self._inflight[text] = future
            return None, future, True

    def _store(
        self,
        text: str,
        future: Future[list[float]],
        vector: list[float] | None,
        error: BaseException | None,
    ) -> None:
        with self._lock:
            self._inflight.pop(text, None)
            if vector is not None:
                self._cache[text] = vector
                while len(self._cache) > self._size:
                    self._cache.popitem(last=False)
        if error is not None:
            future.set_exception(error)
        else:
            future.set_result(vector)  # type: ignore[arg-type]

    def embed(self, text: str) -> list[float]:
        vector, future, owner = self._lookup(text)
        if vector is not None:
            return vector
        assert future is not None
        if not owner:
            return future.result()
        try:
            vector = list(self.embeddings.embed_query(text))
        except BaseException as exc:
            self._store(text, future, None, exc)
            raise
        self._store(text, future, vector, None)
        return vector

    async def aembed(self, text: str) -> list[float]:
        vector, future, owner = self._lookup(text)
        if vector is not None:
            return vector
        assert future is not None
        if not owner:
            return await asyncio.wrap_future(future)
        try:
            vector = list(await self.embeddings.aembed_query(text))
        except BaseException as exc:
            self._store(text, future, None, exc)
            raise
        self._store(text, future, vector, None)
        return vector

    # The Embeddings interface, so mem0 and the memory store share the cache.
    def embed_query(self, text: str) -> list[float]:
        return self.embed(text)

    async def aembed_query(self, text: str) -> list[float]:
        return await self.aembed(text)

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        return self.embeddings.embed_documents(texts)

    async def aembed_documents(self, texts: list[str]) -> list[list[float]]:
        return await self.embeddings.aembed_documents(texts)


def to_source(hit: FusedHit | Hit) -> dict[str, Any]:
    """The public shape of one retrieved passage."""
    payload = hit.payload
    source: dict[str, Any] = {
        "id": hit.id,
        "source": payload.get("source", ""),
        "text": payload.get("text", ""),
        "score": round(float(hit.score), 6),
        "metadata": dict(payload.get("metadata") or {}),
        "position": payload.get("position"),
        "headings": list(payload.get("headings") or []),
    }
    if isinstance(hit, FusedHit):
        source["dense_rank"] = hit.dense_rank
        source["lexical_rank"] = hit.lexical_rank
    return source


class HybridSearcher:
    """Dense + BM25 search over ``index`` and fusion of the two lists."""

    def __init__(
        self,
        index: VectorIndex,
        embedder: QueryEmbedder,
        encoder: LexicalEncoder,
        fuser: Fuser,
        fetch_k: int,
    ) -> None:
        self.index = index
        self.embedder = embedder
        self.encoder = encoder
        self.fuser = fuser
        self.fetch_k = fetch_k

    def conditions(self, filter: Mapping[str, Any] | None) -> list[Condition]:
        return parse_filter(filter)

    def dense_hits(
        self,
        vector: Sequence[float],
        conditions: Sequence[Condition] = (),
        limit: int | None = None,
    ) -> list[Hit]:
        return self.index.dense_search(vector, limit or self.fetch_k, conditions)

    def lexical_hits(
        self,
        query: str,
        memory_terms: str = "",
        conditions: Sequence[Condition] = (),
        memory_weight: float = 1.0,
        limit: int | None = None,
    ) -> list[Hit]:
        groups = [(memory_terms, memory_weight)] if memory_terms else []
        vector = self.encoder.encode_query(query, groups)
        return self.index.sparse_search(vector, limit or self.fetch_k, conditions)

    def fuse(self, dense: Sequence[Hit], lexical: Sequence[Hit], top_k: int) -> list[FusedHit]:
        return self.fuser(dense, lexical)[:top_k]

    def search(
        self,
        query: str,
        top_k: int,
        filter: Mapping[str, Any] | None = None,
        memory_terms: str = "",
    ) -> tuple[list[FusedHit], dict[str, float]]:
        """Fused passages for ``query`` and the time each step took (ms)."""
        conditions = self.conditions(filter)
        t0 = time.perf_counter()
        vector = self.embedder.embed(query)
        t1 = time.perf_counter()
        dense = self.dense_hits(vector, conditions)
        t2 = time.perf_counter()
        lexical = self.lexical_hits(query, memory_terms, conditions)
        t3 = time.perf_counter()
        fused = self.fuse(dense, lexical, top_k)
        t4 = time.perf_counter()
        return fused, {
            "embed_ms": (t1 - t0) * 1e3,
            "dense_ms": (t2 - t1) * 1e3,
            "lexical_ms": (t3 - t2) * 1e3,
            "fuse_ms": (t4 - t3) * 1e3,
        }

    async def asearch(
        self,
        query: str,
        top_k: int,
        filter: Mapping[str, Any] | None = None,
        memory_terms: str = "",
    ) -> list[FusedHit]:
        conditions = self.conditions(filter)
        vector = await self.embedder.aembed(query)
        dense, lexical = await asyncio.gather(
            asyncio.to_thread(self.dense_hits, vector, conditions),
            asyncio.to_thread(self.lexical_hits, query, memory_terms, conditions),
        )
        return self.fuse(dense, lexical, top_k)

"""Hybrid search over one index: dense and BM25 searches, and the ranking after them.

The graph calls the two searches as separate nodes (dense runs in parallel with memory
recall; BM25 waits for it), and :meth:`HybridSearcher.search` chains them for callers who
just want passages (``search``, ``as_retriever``, benchmarks). Both then hand the two
lists to :meth:`HybridSearcher.rank` (fusion, payloads, rerank, the cut to ``top_k``), and
both size a search with one :class:`SearchPlan`, so the two paths cannot rank differently.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Future
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypedDict

from langchain_core.embeddings import Embeddings

from retrievalagent.embeddings import Span, SpanVectors, aembed_with_spans, embed_with_spans
from retrievalagent.index import Condition, Hit, LexicalEncoder, Sparse, VectorIndex, parse_filter
from retrievalagent.retrieval._fusion import FusedHit, Fuser
from retrievalagent.retrieval._rerank import Reranker, complete_ranking
from retrievalagent.trace import RerankEvent

if TYPE_CHECKING:
    from typing_extensions import Unpack

__all__ = ["HybridSearcher", "QueryEmbedder", "Ranked", "SearchPlan", "Sizes", "to_source"]

logger = logging.getLogger("retrievalagent")


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

    # Parts of texts (``embeddings.SpanEmbeddings``), as the wrapped embedder makes them.
    def embed_spans(self, texts: list[str], spans: Sequence[Sequence[Span]]) -> SpanVectors:
        return embed_with_spans(self.embeddings, texts, spans)

    async def aembed_spans(self, texts: list[str], spans: Sequence[Sequence[Span]]) -> SpanVectors:
        return await aembed_with_spans(self.embeddings, texts, spans)


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
    if payload.get("also_in"):  # the same text indexed under other names
        source["also_in"] = list(payload["also_in"])
    if isinstance(hit, FusedHit):
        source["dense_rank"] = hit.dense_rank
        source["lexical_rank"] = hit.lexical_rank
        for key in ("fused_rank", "rerank_score"):  # set when a reranker reordered it
            if key in hit.extra:
                source[key] = hit.extra[key]
    return source


def _best(search: Callable[[int], list[Hit]], limit: int) -> list[Hit]:
    """The ``limit`` best hits of ``search`` (which returns the n best), equal scores in id
    order, whatever the engine's order among them.

    An engine cuts a run of equal scores at an arbitrary place (another build of the same
    documents keeps other hits), so when the scores still tie past the cut, it is asked for
    more until they stop tying; the cut is then made in (score, id) order.
    """
    asked = limit + 1
    while True:
        hits = sorted(search(asked), key=lambda h: (-h.score, h.id))
        if len(hits) < asked or hits[-1].score < hits[limit - 1].score:
            return hits[:limit]
        asked *= 2


class Sizes(TypedDict, total=False):
    """What one search may set instead of the searcher's own (``None``: the searcher's)."""

    fetch_k: int | None
    rerank_k: int | None
    memory_weight: float | None


@dataclass(frozen=True)
class SearchPlan:
    """The sizes of one search and the recalled terms it adds to BM25: what a call sets,
    the rest from the searcher (:meth:`HybridSearcher.plan`)."""

    query: str
    top_k: int
    fetch_k: int
    rerank_k: int
    memory_terms: str = ""
    memory_weight: float = 1.0

    @property
    def depth(self) -> int:
        """Candidates each search returns: ``fetch_k``, or ``top_k`` when that is more
        (fewer could not fill it)."""
        return max(self.fetch_k, self.top_k)


@dataclass
class Ranked:
    """The passages of one search, best first, and how the ranking went."""

    hits: list[FusedHit]
    #: the ``rerank`` trace event (None without a reranker)
    rerank: RerankEvent | None
    fuse_ms: float
    payload_ms: float


@dataclass(eq=False)
class HybridSearcher:
    """Dense + BM25 search over ``index`` and the ranking of the two lists.

    The two searches ask the index for ids and scores only when it says that pays
    (``VectorIndex.search_without_payloads``: the embedded index, where loading ``fetch_k``
    payloads per list costs more than the search itself); the payloads of the few fused
    winners are then fetched in one call.
    """

    index: VectorIndex
    embedder: QueryEmbedder
    encoder: LexicalEncoder
    fuser: Fuser
    fetch_k: int
    reranker: Reranker | None = None
    rerank_k: int = 20
    #: weight of recalled memory terms in the BM25 query (``Settings.memory_term_weight``)
    memory_weight: float = 1.0

    @classmethod
    def __get_pydantic_core_schema__(cls, source: Any, handler: Any) -> Any:
        """Checked by type alone where a pydantic model holds one (the LangChain retriever):
        its parts are engines and protocols, not data."""
        from pydantic_core import core_schema

        return core_schema.is_instance_schema(cls)

    def plan(
        self, query: str, top_k: int, memory_terms: str = "", **given: Unpack[Sizes]
    ) -> SearchPlan:
        """One search of ``query`` for ``top_k`` passages: the sizes and weight ``given``
        (a call's own), else this searcher's."""
        fetch_k, rerank_k = given.get("fetch_k"), given.get("rerank_k")
        weight = given.get("memory_weight")
        return SearchPlan(
            query,
            top_k,
            self.fetch_k if fetch_k is None else fetch_k,
            self.rerank_k if rerank_k is None else rerank_k,
            memory_terms,
            self.memory_weight if weight is None else weight,
        )

    def candidates_for(self, top_k: int, rerank_k: int | None = None) -> int:
        """How many fused passages to take before the final cut to ``top_k``."""
        if self.reranker is None:
            return top_k
        return max(top_k, self.rerank_k if rerank_k is None else rerank_k)

    def rerank(
        self, query: str, hits: Sequence[FusedHit], rerank_k: int | None = None
    ) -> tuple[list[FusedHit], RerankEvent | None]:
        """``hits`` (with payloads) with their first ``rerank_k`` (default: the searcher's)
        reordered by the reranker, and the trace event of that step (None without a
        reranker). A reranker that raises leaves the fused order; the event then carries
        the ``error``."""
        if self.reranker is None:
            return list(hits), None
        start, k = time.perf_counter(), self.rerank_k if rerank_k is None else rerank_k
        head, rest = list(hits[:k]), list(hits[k:])
        event: RerankEvent = {
            "node": "rerank",
            "reranker": self.reranker.name,
            "candidates": len(head),
        }
        try:
            ranked = self.reranker.rerank(query, head) if len(head) > 1 else head
            known = {h.id: h for h in head}
            # a bug of the reranker (a hit dropped, repeated or made up): keep each once
            once = {h.id: known[h.id] for h in ranked if h.id in known}
            ranked = complete_ranking(list(once.values()), head)
        except Exception as exc:
            logger.warning("reranker %s failed, fused order kept: %s", self.reranker.name, exc)
            event["error"] = " ".join(str(exc).split())[:500] or type(exc).__name__
            event["error_type"] = type(exc).__name__
            event["fallback"] = "fused_order"
            event["ms"] = round((time.perf_counter() - start) * 1e3, 3)
            return list(hits), event
        for fused_rank, hit in enumerate(head, 1):
            hit.extra["fused_rank"] = fused_rank
        event["moved"] = sum(a.id != b.id for a, b in zip(ranked, head, strict=True))
        event["ms"] = round((time.perf_counter() - start) * 1e3, 3)
        return [*ranked, *rest], event

    def conditions(self, filter: Mapping[str, Any] | None) -> list[Condition]:
        return parse_filter(filter)

    def dense_hits(
        self,
        vector: Sequence[float],
        conditions: Sequence[Condition] = (),
        limit: int | None = None,
    ) -> list[Hit]:
        """Nearest chunks (payloads only if the index cannot leave them out)."""
        return _best(
            lambda n: self.index.dense_search(vector, n, conditions, **self._payloads),
            limit or self.fetch_k,
        )

    @property
    def _payloads(self) -> dict[str, bool]:
        """Ask for ids and scores only where the index says that pays; an index written
        before the flag existed is called as before (payloads included)."""
        skip = getattr(self.index, "search_without_payloads", False)
        return {"with_payload": False} if skip else {}

    def lexical_query(
        self, query: str, memory_terms: str = "", memory_weight: float = 1.0
    ) -> Sparse:
        groups = [(memory_terms, memory_weight)] if memory_terms else []
        return self.encoder.encode_query(query, groups)

    def lexical_hits(
        self,
        query: str,
        memory_terms: str = "",
        conditions: Sequence[Condition] = (),
        memory_weight: float = 1.0,
        limit: int | None = None,
    ) -> list[Hit]:
        """Best BM25 matches for the question (plus recalled memory terms)."""
        vector = self.lexical_query(query, memory_terms, memory_weight)
        return _best(
            lambda n: self.index.sparse_search(vector, n, conditions, **self._payloads),
            limit or self.fetch_k,
        )

    def coverage(self, query: str, memory_terms: str = "", memory_weight: float = 1.0) -> float:
        """Share (by weight) of the BM25 query's terms that occur somewhere in the corpus."""
        vector = self.lexical_query(query, memory_terms, memory_weight)
        total = sum(vector.values)
        if total <= 0:
            return 1.0
        absent = self.index.absent_terms(vector.indices)
        present = sum(
            w for t, w in zip(vector.indices, vector.values, strict=True) if t not in absent
        )
        return present / total

    # -- ranking ---------------------------------------------------------------------------
    def fuse(
        self,
        dense: Sequence[Hit],
        lexical: Sequence[Hit],
        top_k: int,
        query: str | None = None,
        memory_terms: str = "",
        memory_weight: float = 1.0,
    ) -> list[FusedHit]:
        """The best of both lists (``query`` lets an adaptive fuser weigh them): ``top_k``
        and as many spares, since :meth:`with_payloads` folds identical passages."""
        coverage = 1.0
        if query is not None and self.fuser.uses_coverage and lexical:
            coverage = self.coverage(query, memory_terms, memory_weight)
        return self.fuser(dense, lexical, coverage)[: 2 * top_k]

    def with_payloads(self, fused: Sequence[FusedHit], top_k: int) -> list[FusedHit]:
        """The ``top_k`` best of ``fused`` with their payloads; a passage deleted meanwhile
        is left out, and the same text under several names (identical files) is kept once,
        at its best rank, with the other names in ``also_in``."""
        missing = [h.id for h in fused if not h.payload]
        payloads = self.index.retrieve(missing) if missing else {}
        out: list[FusedHit] = []
        seen: dict[tuple[Any, Any], FusedHit] = {}
        for hit in fused:
            if not hit.payload:
                if hit.id not in payloads:
                    continue
                hit.payload = payloads[hit.id]
            key = (hit.payload.get("doc_hash"), hit.payload.get("position"))
            first = seen.get(key) if key[0] is not None else None
            if first is not None:
                if hit.payload.get("source") != first.payload.get("source"):
                    also = first.payload.setdefault("also_in", [])
                    if hit.payload.get("source") not in also:
                        also.append(hit.payload.get("source"))
                continue
            seen[key] = hit
            out.append(hit)
        return out[:top_k]

    def rank(
        self,
        plan: SearchPlan,
        dense: Sequence[Hit],
        lexical: Sequence[Hit],
        question: str | None = None,
    ) -> Ranked:
        """The ranking of one search's two lists, the one that :meth:`search`,
        :meth:`asearch` and the graph's ``fuse`` node all use: fusion (weighing the
        recalled terms as the BM25 query did), the winners' payloads, the reranker's order
        of the first ``rerank_k`` (judged against ``question``, default the query), then
        the first ``top_k``.

        The fusion is that of the first ``fetch_k`` of each list, whatever ``top_k`` is,
        so asking for more passages never reorders the ones a smaller ``top_k`` gives;
        lists deeper than that (a ``top_k`` beyond ``fetch_k``) continue it with the
        fusion of the whole lists."""
        start = time.perf_counter()
        wanted, k = self.candidates_for(plan.top_k, plan.rerank_k), plan.fetch_k
        terms = (plan.query, plan.memory_terms, plan.memory_weight)
        fused = self.fuse(dense[:k], lexical[:k], wanted, *terms)
        if len(dense) > k or len(lexical) > k:
            known = {h.id for h in fused}
            deeper = self.fuse(dense, lexical, wanted, *terms)
            fused = [*fused, *(h for h in deeper if h.id not in known)][: 2 * wanted]
        fused_at = time.perf_counter()
        hits = self.with_payloads(fused, wanted)
        loaded_at = time.perf_counter()
        hits, event = self.rerank(question or plan.query, hits, plan.rerank_k)
        return Ranked(
            hits[: plan.top_k],
            event,
            fuse_ms=(fused_at - start) * 1e3,
            payload_ms=(loaded_at - fused_at) * 1e3,
        )

    def search(
        self,
        query: str,
        top_k: int,
        filter: Mapping[str, Any] | None = None,
        memory_terms: str = "",
        **given: Unpack[Sizes],
    ) -> tuple[list[FusedHit], dict[str, float]]:
        """The ``top_k`` passages for ``query`` and the time each step took (ms); the
        sizes and the memory terms' weight are the searcher's unless ``given``."""
        plan = self.plan(query, top_k, memory_terms, **given)
        conditions = self.conditions(filter)
        t0 = time.perf_counter()
        vector = self.embedder.embed(query)
        t1 = time.perf_counter()
        dense = self.dense_hits(vector, conditions, plan.depth)
        t2 = time.perf_counter()
        lexical = self.lexical_hits(query, memory_terms, conditions, plan.memory_weight, plan.depth)
        t3 = time.perf_counter()
        ranked = self.rank(plan, dense, lexical)
        timings = {
            "embed_ms": (t1 - t0) * 1e3,
            "dense_ms": (t2 - t1) * 1e3,
            "lexical_ms": (t3 - t2) * 1e3,
            "fuse_ms": ranked.fuse_ms,
            "payload_ms": ranked.payload_ms,
        }
        if ranked.rerank:
            timings["rerank_ms"] = ranked.rerank["ms"]
        return ranked.hits, timings

    async def asearch(
        self,
        query: str,
        top_k: int,
        filter: Mapping[str, Any] | None = None,
        memory_terms: str = "",
        **given: Unpack[Sizes],
    ) -> list[FusedHit]:
        """Async :meth:`search` (the passages only): the two searches run side by side."""
        plan = self.plan(query, top_k, memory_terms, **given)
        conditions = self.conditions(filter)
        vector = await self.embedder.aembed(query)
        dense, lexical = await asyncio.gather(
            asyncio.to_thread(self.dense_hits, vector, conditions, plan.depth),
            asyncio.to_thread(
                self.lexical_hits, query, memory_terms, conditions, plan.memory_weight, plan.depth
            ),
        )
        ranked = await asyncio.to_thread(self.rank, plan, dense, lexical)
        return ranked.hits

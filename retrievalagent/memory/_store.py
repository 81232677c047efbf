"""A LangGraph ``BaseStore`` as the memory backend (InMemoryStore, PostgresStore, ...).

Memories of user ``u`` live under the namespace ``("memories", u)``, with ``.``, ``*`` and
``%`` in ``u`` percent-encoded (see :meth:`StoreBackend.namespace`); a search keeps only
items of exactly that namespace, whatever the store's prefix matching returns. A store configured
with a vector index answers semantic search itself. A store without one (a plain
``InMemoryStore()``, or ``PostgresStore`` without pgvector) is scored here: the user's
``scan_limit`` most recent memories are compared with the question by cosine similarity,
using vectors saved with each memory when it was written (memories written by other code
are embedded once and cached).
"""

from __future__ import annotations

import math
import re
import threading
import uuid
from collections import OrderedDict
from collections.abc import Sequence
from datetime import datetime, timezone
from typing import Any

from langchain_core.embeddings import Embeddings
from langgraph.store.base import BaseStore, SearchItem

from retrievalagent._aio import in_thread
from retrievalagent.memory._base import MemoryHit, MemoryRecord, recall_text

__all__ = ["NAMESPACE", "StoreBackend"]

NAMESPACE = "memories"
_LABEL_UNSAFE = re.compile(r"[.%*]")


def _cosine(a: Sequence[float], b: Sequence[float]) -> float:
    dot = sum(x * y for x, y in zip(a, b, strict=False))
    na = math.sqrt(sum(x * x for x in a))
    nb = math.sqrt(sum(y * y for y in b))
    return dot / (na * nb) if na and nb else 0.0


class StoreBackend:
    """Adapter over a LangGraph store.

    Args:
        store: Any ``BaseStore``.
        embeddings: Used to score memories when the store has no vector index.
        embedding_name: Saved beside stored vectors so vectors of another model are not
            compared with this one's.
        scan_limit: Most recent memories scored client-side per recall.
    """

    name = "store"

    def __init__(
        self, store: BaseStore, embeddings: Embeddings, embedding_name: str, scan_limit: int = 500
    ) -> None:
        if not isinstance(store, BaseStore):
            raise TypeError(
                f"memory_store must be a LangGraph BaseStore, got {type(store).__name__}"
            )
        self.store = store
        self.embeddings = embeddings
        self.embedding_name = embedding_name
        self.scan_limit = scan_limit
        self.indexed = getattr(store, "index_config", None) is not None
        self.async_native = type(store).__name__.startswith("Async")
        from langgraph.store.memory import InMemoryStore

        # A sync store's async methods run on the loop's default executor (PostgresStore);
        # its calls go to their own threads instead, so a hung database cannot starve it.
        self._loop_safe = self.async_native or isinstance(store, InMemoryStore)
        self._cache: OrderedDict[tuple[str, str], list[float]] = OrderedDict()
        self._cache_lock = threading.Lock()

    @staticmethod
    def namespace(user_id: str) -> tuple[str, str]:
        """The namespace of a user's memories: one label per user, whatever the id holds.

        LangGraph stores refuse ``.`` in a label (PostgresStore joins labels with it) and
        read ``*`` as a wildcard, so those and ``%`` (the escape character itself) are
        percent-encoded: ``"ann.lee@x.org"`` -> ``"ann%2Elee@x%2Eorg"``. The mapping is
        one-to-one and leaves every other id as it is.
        """
        return (NAMESPACE, _LABEL_UNSAFE.sub(lambda m: f"%{ord(m.group()):02X}", user_id))

    @staticmethod
    def _own(items: list[SearchItem], ns: tuple[str, str]) -> list[SearchItem]:
        """Only items of exactly ``ns``: a store's prefix search may also return deeper
        namespaces, and no other user's item may ever be scored for this one."""
        return [it for it in items if tuple(it.namespace) == ns]

    # -- shared logic -----------------------------------------------------------------
    def _from_indexed(self, items: list[SearchItem]) -> tuple[list[MemoryHit], int]:
        hits = [
            MemoryHit(
                it.key,
                str(it.value.get("text", "")),
                float(it.score or 0.0),
                {
                    k: v
                    for k, v in it.value.items()
                    if k not in ("text", "embedding", "recall", "question_embedding")
                },
            )
            for it in items
        ]
        return sorted(hits, key=lambda h: -h.score), len(items)

    def _recent(self, items: list[SearchItem]) -> list[SearchItem]:
        items = sorted(items, key=lambda it: it.updated_at, reverse=True)
        return items[: self.scan_limit]

    def _vectors_needed(self, items: list[SearchItem]) -> list[SearchItem]:
        missing = []
        for it in items:
            value = it.value
            saved = value.get("embedding")
            if saved and value.get("embedding_model") == self.embedding_name:
                continue
            with self._cache_lock:
                if (it.key, str(it.updated_at)) not in self._cache:
                    missing.append(it)
        return missing

    def _vector(self, it: SearchItem) -> list[float] | None:
        value = it.value
        if value.get("embedding") and value.get("embedding_model") == self.embedding_name:
            return list(value["embedding"])
        with self._cache_lock:
            return self._cache.get((it.key, str(it.updated_at)))

    def _remember(self, items: list[SearchItem], vectors: list[list[float]]) -> None:
        with self._cache_lock:
            for it, vec in zip(items, vectors, strict=True):
                self._cache[(it.key, str(it.updated_at))] = vec
            while len(self._cache) > 20000:
                self._cache.popitem(last=False)

    def _score(
        self, query_vector: list[float], items: list[SearchItem], limit: int
    ) -> tuple[list[MemoryHit], int]:
        hits = []
        for it in items:
            vector = self._vector(it)
            if vector is None:
                continue
            score = _cosine(query_vector, vector)
            asked = it.value.get("question_embedding")
            if asked and it.value.get("embedding_model") == self.embedding_name:
                score = max(score, _cosine(query_vector, asked))  # as the store's max pooling
            hits.append(
                MemoryHit(
                    it.key,
                    str(it.value.get("text", "")),
                    score,
                    {
                        k: v
                        for k, v in it.value.items()
                        if k not in ("text", "embedding", "recall", "question_embedding")
                    },
                )
            )
        hits.sort(key=lambda h: -h.score)
        return hits[:limit], len(items)

    def _texts(self, record: MemoryRecord) -> list[str]:
        """What a memory is found by: the question that taught it (see ``memory._base``), or
        the fact when there is none. The question's vector is still in the agent's query
        cache from this turn's dense search, so a write costs no embedding work."""
        return [record.question] if record.question else [record.fact]

    def _value(self, record: MemoryRecord, vector: list[list[float]] | None) -> dict[str, Any]:
        value: dict[str, Any] = {
            "text": record.fact,
            "question": record.question,
            "answer": record.answer,
            "created_at": datetime.now(timezone.utc).isoformat(),
            "kind": "search_hint",
            "recall": recall_text(record),  # what search compares with the next question
            **record.metadata,
        }
        if vector is not None:
            value["embedding"] = vector[0]
            value["embedding_model"] = self.embedding_name
            if len(vector) > 1:
                value["question_embedding"] = vector[1]
        return value

    # -- sync ------------------------------------------------------------------------
    def search(self, query: str, user_id: str, limit: int) -> tuple[list[MemoryHit], int]:
        ns = self.namespace(user_id)
        if self.indexed:
            return self._from_indexed(
                self._own(self.store.search(ns, query=query, limit=limit), ns)
            )
        items = self._recent(self._own(self.store.search(ns, limit=self._fetch_limit()), ns))
        if not items:
            return [], 0
        missing = self._vectors_needed(items)
        if missing:
            self._remember(
                missing,
                self.embeddings.embed_documents([self._search_text(it) for it in missing]),
            )
        return self._score(self.embeddings.embed_query(query), items, limit)

    def add(self, record: MemoryRecord) -> None:
        # embed_query: the question's vector is usually still in the agent's query cache
        vector = (
            None if self.indexed else [self.embeddings.embed_query(t) for t in self._texts(record)]
        )
        self.store.put(
            self.namespace(record.user_id),
            uuid.uuid4().hex,
            self._value(record, vector),
            index=["recall", "question"] if self.indexed else False,
        )

    # -- async -----------------------------------------------------------------------
    async def asearch(self, query: str, user_id: str, limit: int) -> tuple[list[MemoryHit], int]:
        if not self._loop_safe:
            return await in_thread(lambda: self.search(query, user_id, limit))
        ns = self.namespace(user_id)
        if self.indexed:
            return self._from_indexed(
                self._own(await self.store.asearch(ns, query=query, limit=limit), ns)
            )
        items = self._recent(self._own(await self.store.asearch(ns, limit=self._fetch_limit()), ns))
        if not items:
            return [], 0
        missing = self._vectors_needed(items)
        if missing:
            self._remember(
                missing,
                await self.embeddings.aembed_documents([self._search_text(it) for it in missing]),
            )
        return self._score(await self.embeddings.aembed_query(query), items, limit)

    async def aadd(self, record: MemoryRecord) -> None:
        texts = self._texts(record)
        vector = None if self.indexed else [await self.embeddings.aembed_query(t) for t in texts]
        await self.store.aput(
            self.namespace(record.user_id),
            uuid.uuid4().hex,
            self._value(record, vector),
            index=["recall", "question"] if self.indexed else False,
        )

    @staticmethod
    def _search_text(it: SearchItem) -> str:
        return str(it.value.get("recall") or it.value.get("text", ""))

    def _fetch_limit(self) -> int:
        # InMemoryStore lists oldest first, so read all of the user's items and keep the
        # newest; PostgresStore already returns the most recent first.
        from langgraph.store.memory import InMemoryStore

        return 1_000_000 if isinstance(self.store, InMemoryStore) else self.scan_limit

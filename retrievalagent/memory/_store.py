"""A LangGraph ``BaseStore`` as the memory backend (InMemoryStore, PostgresStore, ...).

Memories of user ``u`` live under the namespace ``("memories", u)``, with ``.``, ``*`` and
``%`` in ``u`` percent-encoded (see :meth:`StoreBackend.namespace`); a search keeps only
items of exactly that namespace, whatever the store's prefix matching returns. Item keys
make "the same memory" one item: ``alias:<key>`` for a keyed search fact,
``preference:<subject>`` for a preference (a newer one overwrites it), a random id else.

One recall is one ``batch`` call: the user's listing (or the store's own semantic search
when it has a vector index), the preferences, and a ``GetOp`` per alias key of the
question. A store without a vector index (a plain ``InMemoryStore()``, ``PostgresStore``
without pgvector) is scored here: the user's ``scan_limit`` most recent facts are compared
with the question by cosine similarity. Their vectors live apart, under
``("memory_vectors", u)``, so listing memories does not decode them (with PostgresStore
that made a 1k-memory recall 245 ms instead of ~35), and are cached in-process.
"""

from __future__ import annotations

import math
import re
import threading
import uuid
from collections import OrderedDict
from collections.abc import Sequence
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any, TypeGuard, TypeVar

import numpy as np
from langchain_core.embeddings import Embeddings
from langgraph.store.base import BaseStore, GetOp, Item, PutOp, SearchItem, SearchOp

from retrievalagent._threads import in_thread
from retrievalagent.memory._base import (
    PREFERENCE,
    MemoryHit,
    PlannedBackend,
    kind_of,
    recall_of,
    recall_text,
)
from retrievalagent.memory._plan import IO, Plan

if TYPE_CHECKING:  # annotations only
    from retrievalagent.memory._base import MemoryRecord, Recall, RecallRequest

__all__ = ["NAMESPACE", "StoreBackend"]

NAMESPACE = "memories"
VECTORS = "memory_vectors"
_LABEL_UNSAFE = re.compile(r"[.%*]")


def _unit(vector: Sequence[float]) -> np.ndarray:
    """A vector as unit-length float32 (all zeros stays zeros), for cosine by one dot."""
    arr = np.asarray(vector, dtype=np.float32).ravel()
    norm = float(np.linalg.norm(arr))
    return arr / norm if norm and math.isfinite(norm) else np.zeros_like(arr)


_ItemT = TypeVar("_ItemT", bound=Item)
_HIDDEN = frozenset({"text", "embedding", "recall", "question_embedding"})


def _hit(item: Item, score: float, matched: str, similarity: float | None = None) -> MemoryHit:
    value = item.value
    return MemoryHit(
        id=item.key,
        text=str(value.get("text", "")),
        score=score,
        metadata={k: v for k, v in value.items() if k not in _HIDDEN},
        kind=kind_of(value.get("kind")),
        key=str(value.get("key") or ""),
        matched=matched,
        similarity=similarity,
        updated_at=item.updated_at.isoformat() if item.updated_at else "",
    )


def _in_namespace(item: _ItemT | None, ns: tuple[str, str]) -> TypeGuard[_ItemT]:
    return isinstance(item, Item) and tuple(item.namespace) == ns


def _is_fact(item: Item) -> bool:
    return kind_of(item.value.get("kind")) != PREFERENCE


def item_key(record: MemoryRecord) -> str:
    """The store key of a memory: one item per alias key / preference subject."""
    if record.key:
        return f"{'preference' if record.kind == PREFERENCE else 'alias'}:{record.key}"
    return uuid.uuid4().hex


class StoreBackend(PlannedBackend):
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
        # InMemoryStore lists oldest first, so all of a user's items are read and the
        # newest kept; PostgresStore already returns the most recent first.
        self._listing_limit = 1_000_000 if isinstance(store, InMemoryStore) else scan_limit
        # unit-length vectors of recently scored facts, by (user, key, updated_at)
        self._cache: OrderedDict[tuple[str, str, str], np.ndarray] = OrderedDict()
        self._cache_lock = threading.Lock()

    @staticmethod
    def namespace(user_id: str, kind: str = NAMESPACE) -> tuple[str, str]:
        """The namespace of a user's memories: one label per user, whatever the id holds.

        LangGraph stores refuse ``.`` in a label (PostgresStore joins labels with it) and
        read ``*`` as a wildcard, so those and ``%`` (the escape character itself) are
        percent-encoded: ``"ann.lee@x.org"`` -> ``"ann%2Elee@x%2Eorg"``. The mapping is
        one-to-one and leaves every other id as it is.
        """
        return (kind, _LABEL_UNSAFE.sub(lambda m: f"%{ord(m.group()):02X}", user_id))

    # -- I/O steps -----------------------------------------------------------------------
    def _batch(self, ops: list[Any]) -> IO:
        async def abatch() -> Any:
            if self._loop_safe:
                return await self.store.abatch(ops)
            return await in_thread(lambda: self.store.batch(ops))

        return IO(lambda: self.store.batch(ops), abatch)

    def _embed_documents(self, texts: list[str]) -> IO:
        return IO(
            lambda: self.embeddings.embed_documents(texts),
            lambda: self.embeddings.aembed_documents(texts),
        )

    def _embed_query(self, text: str) -> IO:
        return IO(
            lambda: self.embeddings.embed_query(text),
            lambda: self.embeddings.aembed_query(text),
        )

    @staticmethod
    def _own(items: Sequence[_ItemT | None] | None, ns: tuple[str, str]) -> list[_ItemT]:
        """Only items of exactly ``ns``: a store's prefix search may also return deeper
        namespaces, and no other user's item may ever be scored for this one."""
        if not isinstance(items, list | tuple):
            return []
        return [it for it in items if _in_namespace(it, ns)]

    # -- recall ------------------------------------------------------------------------
    def _recall(self, request: RecallRequest) -> Plan[Recall]:
        ns = self.namespace(request.user_id)
        alias_keys = [f"alias:{k}" for k in request.keys]
        listing = (
            SearchOp(ns, query=request.query, limit=request.limit)
            if self.indexed
            else SearchOp(ns, limit=self._listing_limit)
        )
        preferences = SearchOp(
            ns, filter={"kind": PREFERENCE}, limit=max(1, request.max_preferences) * 4
        )
        results = yield self._batch([listing, preferences, *(GetOp(ns, key) for key in alias_keys)])
        listed: list[SearchItem] = self._own(results[0], ns)
        prefs: list[SearchItem] = self._own(results[1], ns)
        by_key: list[Item] = self._own(results[2:], ns)
        keyed = [_hit(it, 1.0, "alias") for it in by_key if _is_fact(it)]
        facts = [it for it in listed if _is_fact(it)]
        if self.indexed:
            similar = [
                _hit(it, float(it.score or 0.0), "similarity", float(it.score or 0.0))
                for it in facts
            ]
        else:
            facts = sorted(facts, key=lambda it: it.updated_at, reverse=True)[: self.scan_limit]
            similar = yield from self._similar(request, ns, facts)
        applied = [_hit(it, 1.0, "preference") for it in prefs]
        return recall_of(request, keyed, similar, applied, scanned=len(facts))

    def _similar(
        self, request: RecallRequest, ns: tuple[str, str], facts: list[SearchItem]
    ) -> Plan[list[MemoryHit]]:
        """Cosine similarity of the question to each fact's vector."""
        if not facts:
            return []
        vectors: dict[str, np.ndarray | None] = {it.key: self._cached(ns, it) for it in facts}
        missing = [it for it in facts if vectors[it.key] is None]
        if missing:
            vector_ns = self.namespace(request.user_id, VECTORS)
            stored = yield self._batch([GetOp(vector_ns, it.key) for it in missing])
            for it, found in zip(missing, stored, strict=True):
                value = found.value if found is not None else it.value  # older releases
                if value.get("embedding") and value.get("embedding_model") == self.embedding_name:
                    vectors[it.key] = _unit(value["embedding"])
            unembedded = [it for it in missing if vectors[it.key] is None]
            if unembedded:  # written by other code: embed once, then cached
                texts = [
                    str(it.value.get("recall") or it.value.get("text", "")) for it in unembedded
                ]
                fresh = yield self._embed_documents(texts)
                for it, vector in zip(unembedded, fresh, strict=True):
                    vectors[it.key] = _unit(vector)
            self._remember(ns, missing, vectors)
        query = _unit((yield self._embed_query(request.query)))
        # one matrix product, not a Python loop: 500 facts x 384 dims took ~60 ms that way
        scored = [(it, v) for it in facts if (v := vectors[it.key]) is not None]
        scored = [(it, v) for it, v in scored if v.shape == query.shape]
        if not scored:
            return []
        scores = np.stack([v for _, v in scored]) @ query
        best = np.argsort(-scores, kind="stable")[: request.limit]
        return [_hit(scored[i][0], float(scores[i]), "similarity", float(scores[i])) for i in best]

    def _cached(self, ns: tuple[str, str], it: SearchItem) -> np.ndarray | None:
        with self._cache_lock:
            return self._cache.get((ns[1], it.key, str(it.updated_at)))

    def _remember(
        self, ns: tuple[str, str], items: list[SearchItem], vectors: dict[str, Any]
    ) -> None:
        with self._cache_lock:
            for it in items:
                if vectors.get(it.key) is not None:
                    self._cache[(ns[1], it.key, str(it.updated_at))] = vectors[it.key]
            while len(self._cache) > 20000:
                self._cache.popitem(last=False)

    # -- add -------------------------------------------------------------------------
    def _add(self, record: MemoryRecord) -> Plan[None]:
        ns = self.namespace(record.user_id)
        key = item_key(record)
        value: dict[str, Any] = {
            **record.metadata,
            "text": record.fact,
            "question": record.question,
            "answer": record.answer,
            "created_at": datetime.now(timezone.utc).isoformat(),
            "kind": record.kind,
            "key": record.key,
            "alias": record.alias,
            "recall": recall_text(record),  # what the similarity channel compares
        }
        ops: list[Any] = []
        if self.indexed:
            ops.append(PutOp(ns, key, value, index=["recall", "question"]))
        else:
            ops.append(PutOp(ns, key, value, index=False))
            if record.kind != PREFERENCE:  # preferences are never scored against a question
                # the question's vector is still in the agent's query cache from this turn
                vector = yield self._embed_query(record.question or record.fact)
                embedding = {"embedding": vector, "embedding_model": self.embedding_name}
                ops.append(
                    PutOp(self.namespace(record.user_id, VECTORS), key, embedding, index=False)
                )
        yield self._batch(ops)

    # -- list / forget -------------------------------------------------------------------
    def _list(self, user_id: str) -> Plan[list[MemoryHit]]:
        ns = self.namespace(user_id)
        [items] = yield self._batch([SearchOp(ns, limit=1_000_000)])
        hits = [_hit(it, 1.0, "listed") for it in self._own(items, ns)]
        return sorted(hits, key=lambda h: h.updated_at, reverse=True)

    def _delete(self, user_id: str, ids: list[str]) -> IO:
        ns, vector_ns = self.namespace(user_id), self.namespace(user_id, VECTORS)
        return self._batch(
            [op for key in ids for op in (PutOp(ns, key, None), PutOp(vector_ns, key, None))]
        )

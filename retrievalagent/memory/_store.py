"""A LangGraph ``BaseStore`` as the memory backend (InMemoryStore, PostgresStore, ...).

Memories of user ``u`` live under the namespace ``("memories", u)``, with ``.``, ``*`` and
``%`` in ``u`` percent-encoded (see :meth:`StoreBackend.namespace`); a search keeps only
items of exactly that namespace, whatever the store's prefix matching returns. Item keys
make "the same memory" one item: ``alias:<key>`` for a keyed search fact,
``preference:<subject>`` for a preference (a newer one overwrites it), a random id else.

Conversation memories live apart, under ``("conversations", u)``, each with its vector
(base64 float32) in its value. They are ranked in process (``memory._hybrid``): a user's
memories are loaded once, then kept current through two stamps under
``("memory_stamps", u)`` that every writer changes: ``added`` (new memories: the next
recall fetches only those written since) and ``erased`` (a deletion: the next recall
reloads the user). A process also fetches what is new at least every
``_RECHECK_SECONDS``, which bounds how long a write racing another process's can stay
unseen. What is new is read by ``written_us``, which each write takes one past the last
write's (the ``added`` stamp keeps it), so a writer's slow clock cannot hide its writes.

One recall is one ``batch`` call: the user's listing (or the store's own semantic search
when it has a vector index), the preferences, a ``GetOp`` per alias key of the question
and the two stamps. A store without a vector index (a plain ``InMemoryStore()``, ``PostgresStore``
without pgvector) is scored here: the user's ``scan_limit`` most recent facts are compared
with the question by cosine similarity. Their vectors live apart, under
``("memory_vectors", u)``, so listing memories does not decode them (with PostgresStore
that made a 1k-memory recall 245 ms instead of ~35), and are cached in-process.
"""

from __future__ import annotations

import asyncio
import base64
import math
import re
import threading
import time
import uuid
from collections import Counter, OrderedDict
from collections.abc import Sequence
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any, TypeGuard, TypeVar
from weakref import WeakKeyDictionary

import numpy as np
from langchain_core.embeddings import Embeddings
from langgraph.store.base import BaseStore, GetOp, Item, PutOp, SearchItem, SearchOp

from retrievalagent._threads import in_thread
from retrievalagent.embeddings import aembed_with_spans, embed_with_spans
from retrievalagent.index import LexicalEncoder
from retrievalagent.memory._base import (
    JOINED,
    PREFERENCE,
    MemoryHit,
    PlannedBackend,
    PreferencePutBack,
    history_after,
    history_with,
    kind_of,
    newest_said_first,
    preference_written,
    recall_of,
    recall_text,
    said_earlier,
    said_until,
    statements_after,
)
from retrievalagent.memory._conversations import found_by, latest_forms
from retrievalagent.memory._hybrid import (
    Candidate,
    IndexCache,
    UserIndex,
    memory_fuser,
    said_spans,
)
from retrievalagent.memory._hybrid import unit as _unit
from retrievalagent.memory._plan import IO, Plan
from retrievalagent.memory._temporal import iso, timestamp
from retrievalagent.retrieval import Fuser

if TYPE_CHECKING:  # annotations only
    from retrievalagent.memory._base import MemoryRecord, Recall, RecallRequest
    from retrievalagent.memory._conversations import ConversationRecord

__all__ = ["CONVERSATIONS", "NAMESPACE", "StoreBackend"]

NAMESPACE = "memories"
VECTORS = "memory_vectors"
CONVERSATIONS = "conversations"
STAMPS = "memory_stamps"
_LABEL_UNSAFE = re.compile(r"[.%*]")
_EVERYTHING = 1_000_000
#: Seconds after which a recall looks for new conversation memories even if no stamp moved.
_RECHECK_SECONDS = 30.0
#: How far before the newest memory it has a process looks when fetching what is new
#: (writes of other processes whose clocks or commits lag), in microseconds.
_LAG_US = 120_000_000

_ItemT = TypeVar("_ItemT", bound=Item)
_HIDDEN = frozenset({"text", "recall", "vector", "part_vectors", "embedding_model"})


def _pack(vector: Sequence[float]) -> str:
    return base64.b64encode(np.asarray(vector, dtype="<f4").tobytes()).decode("ascii")


def _unpack(value: Any) -> np.ndarray | None:
    """A stored vector as a unit vector; None (embed it again) when it does not read back
    as one: empty, cut, or holding a NaN or an infinity."""
    try:
        vector = np.frombuffer(base64.b64decode(str(value)), dtype="<f4")
    except (ValueError, TypeError):
        return None
    return _unit(vector) if vector.size and np.isfinite(vector).all() else None


def _pack_parts(vectors: Sequence[Sequence[float]]) -> str:
    """A memory's part vectors (``said_spans``), in half precision: they only rank, and a
    memory has a few of them."""
    return base64.b64encode(np.asarray(vectors, dtype="<f2").tobytes()).decode("ascii")


def _unpack_parts(value: Any, dimension: int) -> np.ndarray | None:
    """Part vectors as unit rows; None when there are none or they do not read back."""
    if not value or dimension <= 0:
        return None
    try:
        flat = np.frombuffer(base64.b64decode(str(value)), dtype="<f2").astype(np.float32)
    except (ValueError, TypeError):
        return None
    if not flat.size or flat.size % dimension:
        return None
    return _unit_rows(flat.reshape(-1, dimension))


def _unit_rows(vectors: Any) -> np.ndarray | None:
    """Vectors as unit rows; None when there are none, or one holds a NaN or an infinity
    (one such part would make its memory's similarity NaN, and the next one's by context)."""
    rows = np.asarray(vectors, dtype=np.float32)
    if rows.ndim != 2 or not rows.size or not np.isfinite(rows).all():
        return None
    norms = np.linalg.norm(rows, axis=1, keepdims=True)
    return rows / np.where(norms > 0, norms, 1.0)


def _token(item: Any, ns: tuple[str, str] | None = None, key: str = "") -> str | None:
    """A stamp's token ("" when there is no stamp yet); None when what the store returned
    is not that stamp (a broken or foreign answer), which says nothing."""
    if item is None:
        return ""
    if not isinstance(item, Item) or not isinstance(item.value, dict):
        return None
    if ns is not None and (tuple(item.namespace) != ns or item.key != key):
        return None
    return str(item.value.get("token") or "")


def _stamp(us: int | None = None) -> dict[str, Any]:
    stamp: dict[str, Any] = {"token": uuid.uuid4().hex, "at": iso(datetime.now(timezone.utc))}
    if us is not None:
        stamp["us"] = us
    return stamp


def _write_us(now: datetime, added: Any, ns: tuple[str, str]) -> int:
    """The ``written_us`` of a write: its time, or one more than the last write's (the
    ``added`` stamp it read under the user's lock) where that is later. Another process
    reads what is new by ``written_us`` (``_since``, with ``_LAG_US`` to spare): by a
    writer's clock alone, one running minutes behind the others wrote memories their
    recall never read, though ``list_memories`` showed them."""
    mine = int(now.timestamp() * 1_000_000)
    if not _token(added, ns, "added"):
        return mine
    last = added.value.get("us")
    if not isinstance(last, int) or isinstance(last, bool):
        # a stamp from before writes were numbered: its writer's time, which is no earlier
        # than what that write numbered its memories by
        at = timestamp(str(added.value.get("at") or ""))
        last = int(at * 1_000_000) if math.isfinite(at) else 0
    return max(mine, last + 1)


def _hit(item: Item, score: float, matched: str, similarity: float | None = None) -> MemoryHit:
    value = item.value
    updated = item.updated_at.isoformat() if item.updated_at else ""
    return _value_hit(item.key, value, score, matched, similarity, updated)


def _value_hit(
    key: str,
    value: dict[str, Any],
    score: float,
    matched: str,
    similarity: float | None = None,
    updated_at: str = "",
) -> MemoryHit:
    sources = value.get("sources")
    return MemoryHit(
        id=key,
        text=str(value.get("text", "")),
        score=score,
        metadata={k: v for k, v in value.items() if k not in _HIDDEN},
        kind=kind_of(value.get("kind")),
        key=str(value.get("key") or value.get("subject") or ""),
        matched=matched,
        similarity=similarity,
        updated_at=updated_at or str(value.get("written") or value.get("created_at") or ""),
        thread_id=str(value.get("thread_id") or ""),
        at=str(value.get("at") or value.get("created_at") or updated_at),
        sources=[dict(s) for s in sources if isinstance(s, dict)]
        if isinstance(sources, list)
        else [],
    )


def _candidate_hit(found: Candidate) -> MemoryHit:
    hit = _value_hit(
        found.key,
        found.value,
        found.score,
        "window" if found.in_window else "conversation",
        found.similarity,
    )
    hit.lexical, hit.in_window, hit.alone = found.lexical, found.in_window, found.alone
    hit.metadata["fused"] = found.fused
    return hit


def _in_namespace(item: _ItemT | None, ns: tuple[str, str]) -> TypeGuard[_ItemT]:
    return isinstance(item, Item) and tuple(item.namespace) == ns


def _is_fact(item: Item) -> bool:
    return kind_of(item.value.get("kind")) != PREFERENCE


def item_key(record: MemoryRecord) -> str:
    """The store key of a memory: one item per alias key / preference subject."""
    if record.key:
        return f"{'preference' if record.kind == PREFERENCE else 'alias'}:{record.key}"
    return uuid.uuid4().hex


_LOCKS: WeakKeyDictionary[BaseStore, threading.Lock] = WeakKeyDictionary()
_LOCKS_GUARD = threading.Lock()


def _lock_of(store: BaseStore) -> threading.Lock:
    """One lock per store object, shared by every agent that uses it."""
    with _LOCKS_GUARD:
        lock = _LOCKS.get(store)
        if lock is None:
            lock = _LOCKS[store] = threading.Lock()
        return lock


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
    #: Facts about the user come from the agent's extractor, not from the store.
    extracts_facts = False

    def __init__(
        self,
        store: BaseStore,
        embeddings: Embeddings,
        embedding_name: str,
        scan_limit: int = 500,
        *,
        encoder: LexicalEncoder | None = None,
        fuser: Fuser | None = None,
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
        # LangGraph's InMemoryStore is not thread-safe (a background write adding a user's
        # namespace while a recall lists the store fails that recall), so every call to one
        # takes its lock. Without a vector index a call cannot block; with one, calls wait
        # for each other's embedding (docs/memory.md). A subclass may do I/O, where one hung
        # call holding the lock would stall every other: it keeps its own async methods.
        exact = type(store) is InMemoryStore
        self._guard = _lock_of(store) if exact else None
        self._loop_safe = self.async_native or (isinstance(store, InMemoryStore) and not exact)
        # InMemoryStore lists oldest first, so all of a user's items are read and the
        # newest kept; PostgresStore already returns the most recent first.
        self._listing_limit = 1_000_000 if isinstance(store, InMemoryStore) else scan_limit
        # unit-length vectors of recently scored facts, by (user, key, updated_at)
        self._cache: OrderedDict[tuple[str, str, str], np.ndarray] = OrderedDict()
        self._cache_lock = threading.Lock()
        # conversation memories of recently active users, ranked in process
        self.conversations = IndexCache(encoder or LexicalEncoder())
        self.fuser = fuser or memory_fuser()

    def _engine(self) -> Any:
        return self.store

    def answered_by_this_loop(self) -> bool:
        """Whether a sync call made here would wait for the event loop running on this
        thread: LangGraph's async stores (``AsyncPostgresStore``) run their sync methods
        on the loop they were opened on, which a blocking caller on it never lets run."""
        try:
            running = asyncio.get_running_loop()
        except RuntimeError:  # plain code or a worker thread: the store's loop runs on
            return False
        return any(getattr(self.store, name, None) is running for name in ("_loop", "loop"))

    @property
    def _memory_index(self) -> Any:
        """How a search fact or preference is put: embedded by a store with a vector index
        (its recall text and question), else not (scored here)."""
        return ["recall", "question"] if self.indexed else False

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
        guard = self._guard

        def batch() -> Any:
            if guard is None:
                return self.store.batch(ops)
            with guard:
                return self.store.batch(ops)

        def indexed_batch() -> Any:
            # the store's async methods on this thread's own loop: an index may embed with
            # an async function only, which the sync ``batch`` cannot call
            assert guard is not None  # only InMemoryStores come here
            with guard:
                return asyncio.run(self.store.abatch(ops))

        async def abatch() -> Any:
            if self._loop_safe:
                return await self.store.abatch(ops)
            if guard is None:
                return await in_thread(batch)
            # An InMemoryStore. The lock is only ever held by a thread running a call, never
            # by a suspended task: a loop blocked on it (a sync call inside async code, a
            # full write queue) would wait for ever for a task that cannot run.
            if not self.indexed and guard.acquire(blocking=False):
                try:  # microseconds, no suspension: on the loop, no thread hop
                    return self.store.batch(ops)
                finally:
                    guard.release()
            return await in_thread(indexed_batch if self.indexed else batch)

        return IO(batch, abatch)

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
        if request.limit <= 0:  # no facts wanted: nothing listed, no question embedded
            listing = SearchOp(ns, limit=0)
        elif self.indexed:
            listing = SearchOp(ns, query=request.query, limit=request.limit)
        else:
            listing = SearchOp(ns, limit=self._listing_limit)
        preferences = SearchOp(
            ns, filter={"kind": PREFERENCE}, limit=max(1, request.max_preferences) * 4
        )
        stamps_ns = self.namespace(request.user_id, STAMPS)
        stamps = [GetOp(stamps_ns, "added"), GetOp(stamps_ns, "erased")]
        # conversation memory: a user not loaded yet is loaded with this batch, and one due
        # a look at what is new gets it here too, so a recall is one round trip
        index, ahead = None, []
        if request.conversations > 0:
            index = self.conversations.get(request.user_id)
            ahead = self._fetch_ahead(request.user_id, index)
        results = yield self._batch(
            [listing, preferences, *stamps, *ahead, *(GetOp(ns, key) for key in alias_keys)]
        )
        listed: list[SearchItem] = self._own(results[0], ns)
        prefs: list[SearchItem] = self._own(results[1], ns)
        by_key: list[Item] = self._own(results[4 + len(ahead) :], ns)
        keyed = [_hit(it, 1.0, "alias") for it in by_key if _is_fact(it)]
        facts = [it for it in listed if _is_fact(it)]
        query: list[np.ndarray] = []  # the question's vector, once it is needed
        if self.indexed:
            similar = [
                _hit(it, float(it.score or 0.0), "similarity", float(it.score or 0.0))
                for it in facts
            ]
        else:
            facts = sorted(facts, key=lambda it: it.updated_at, reverse=True)[: self.scan_limit]
            similar = yield from self._similar(request, ns, facts, query)
        applied = [_hit(it, 1.0, "preference") for it in prefs]
        said: list[MemoryHit] = []
        if request.conversations > 0:
            marks = (
                _token(results[2], stamps_ns, "added"),
                _token(results[3], stamps_ns, "erased"),
            )
            fetched = results[4] if ahead else None
            index = yield from self._fresh_index(request.user_id, marks, index, fetched)
            if len(index):
                vector = yield from self._query_vector(request.query, query)
                said = self._said(index, request, vector)
        return recall_of(request, keyed, similar, applied, scanned=len(facts), conversations=said)

    def _query_vector(self, text: str, memo: list[np.ndarray]) -> Plan[np.ndarray]:
        if not memo:
            memo.append(_unit((yield self._embed_query(text))))
        return memo[0]

    def _said(
        self, index: UserIndex, request: RecallRequest, vector: np.ndarray
    ) -> list[MemoryHit]:
        """The user's conversation memories ranked for the question (``memory._hybrid``)."""
        window = request.time.window if request.time else None
        with self.conversations.lock:
            if request.time and request.time.sessions_back:
                window = index.session_window(request.time.sessions_back, request.thread_id)
            found = index.search(
                request.query,
                vector,
                self.fuser,
                request.conversations,
                window=window,
                thread_id=request.thread_id,
                seen=request.seen,
                present=bool(request.time and request.time.present),
                until=said_until(request),
            )
        return [_candidate_hit(c) for c in found]

    def _fetch_ahead(self, user_id: str, index: UserIndex | None) -> list[SearchOp]:
        """What to read of the user's conversation memory with the recall's batch: all of
        it when this process holds none, what is new when a look is due; else nothing."""
        ns = self.namespace(user_id, CONVERSATIONS)
        if index is None:
            return [SearchOp(ns, limit=_EVERYTHING)]
        if time.monotonic() - index.checked > _RECHECK_SECONDS:
            return [self._since(ns, index)]
        return []

    @staticmethod
    def _since(ns: tuple[str, str], index: UserIndex) -> SearchOp:
        # A whole number of microseconds (16 digits until the year 2286): InMemoryStore
        # compares filter values as numbers, PostgresStore as text, and both agree on it.
        since = max(0, index.high_water - _LAG_US)
        return SearchOp(ns, filter={"written_us": {"$gte": since}}, limit=_EVERYTHING)

    def _fresh_index(
        self,
        user_id: str,
        marks: tuple[str | None, str | None],
        index: UserIndex | None,
        fetched: Any,
    ) -> Plan[UserIndex]:
        """The user's conversation index, brought up to date with what the stamps say
        (``fetched``: what ``_fetch_ahead`` read with the recall's batch). A stamp that
        could not be read (None) says nothing: the index stays as it is."""
        ns = self.namespace(user_id, CONVERSATIONS)
        if index is not None and None not in marks:
            if index.stamps[1] != marks[1]:  # something was erased: read it all again
                index, fetched = None, (yield self._batch([SearchOp(ns, limit=_EVERYTHING)]))[0]
            elif index.stamps[0] != marks[0] and fetched is None:  # something was added
                fetched = (yield self._batch([self._since(ns, index)]))[0]
        if index is None:
            index = self.conversations.new()
            self.conversations.put(user_id, index)
        if fetched is not None:
            yield from self._load(index, self._own(fetched, ns))
        if None not in marks:
            index.stamps = (str(marks[0]), str(marks[1]))
        index.checked = time.monotonic()
        return index

    def _load(self, index: UserIndex, items: list[SearchItem]) -> Plan[None]:
        """Put stored conversation memories into ``index`` (re-embedding any whose vector
        is missing or from another model). What it holds already as stored is skipped: a
        look at what is new reads back the last ``_LAG_US`` of writes, all of a fresh
        import, each time."""
        items = [it for it in items if isinstance(it.value, dict) and it.value.get("text")]
        with self.conversations.lock:
            items = [it for it in items if not index.holds(it.key, it.value)]
        vectors = {
            it.key: _unpack(it.value.get("vector"))
            for it in items
            if it.value.get("embedding_model") == self.embedding_name
        }
        # a vector of another length than the user's others (cut, or hand-written) is
        # embedded again: the first row held sets the width every later one is scored at
        lengths = Counter(v.shape[0] for v in vectors.values() if v is not None)
        width = index.dimension or (lengths.most_common(1)[0][0] if lengths else 0)
        vectors = {k: v for k, v in vectors.items() if v is not None and v.shape[0] == width}
        parts: dict[str, np.ndarray | None] = {}
        for it in items:
            vector = vectors.get(it.key)
            if vector is not None:
                parts[it.key] = _unpack_parts(it.value.get("part_vectors"), vector.shape[0])
        stale = [it for it in items if vectors.get(it.key) is None]
        if stale:
            texts = [
                found_by(
                    str(it.value.get("said") or it.value.get("text", "")),
                    it.value.get("form"),
                    it.value.get("subject"),
                )
                for it in stale
            ]
            fresh, fresh_parts = yield from self._embed_said(texts)
            for it, vector, its_parts in zip(stale, fresh, fresh_parts, strict=True):
                vectors[it.key], parts[it.key] = _unit(vector), _unit_rows(its_parts)
        with self.conversations.lock:
            for it in items:
                vector = vectors.get(it.key)
                if vector is not None:
                    index.upsert(it.key, dict(it.value), vector, parts.get(it.key))

    def _embed_said(self, texts: list[str]) -> Plan[tuple[list[Any], list[list[Any]]]]:
        """What was said in each memory embedded whole, and its parts (``said_spans``), in
        one call: per text its vector and its parts' vectors (the parts pooled from the
        text's own run where the embedder can, see ``embeddings._spans``)."""
        spans = [said_spans(text) for text in texts]
        embeddings = self.embeddings
        wholes, parts = yield IO(
            lambda: embed_with_spans(embeddings, texts, spans),
            lambda: aembed_with_spans(embeddings, texts, spans),
        )
        return wholes, parts

    def _similar(
        self,
        request: RecallRequest,
        ns: tuple[str, str],
        facts: list[SearchItem],
        query_memo: list[np.ndarray],
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
                value = found.value if found is not None else {}
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
        query = yield from self._query_vector(request.query, query_memo)
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
        if record.kind == PREFERENCE:  # the one it replaces stays in its history
            [older] = yield self._batch([GetOp(ns, key)])
            held = older.value if _in_namespace(older, ns) else None
            joins, history = preference_written(held, value, record.fact)
            statements = statements_after(held, value)
            value = (
                {**held, "history": history} if joins and held else {**value, "history": history}
            )
            if statements:
                value["statements"] = statements
        ops: list[Any] = []
        if self.indexed:
            ops.append(PutOp(ns, key, value, index=self._memory_index))
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

    def _restore_preference(self, user_id: str, back: PreferencePutBack) -> Plan[bool]:
        value = {**back.entry, "history": back.history}
        ns = self.namespace(user_id)
        yield self._batch([PutOp(ns, back.replacing.id, value, index=self._memory_index)])
        return True

    # -- conversation memory --------------------------------------------------------------
    def _add_conversations(self, records: list[ConversationRecord]) -> Plan[list[MemoryHit]]:
        """One batch per user: the facts' older versions and the stamp are read, the texts
        embedded in one call, then everything written in one batch."""
        stored: list[MemoryHit] = []
        for user in dict.fromkeys(r.user_id for r in records):
            mine = latest_forms(list({r.key: r for r in records if r.user_id == user}.values()))
            stored += yield from self._add_user_conversations(user, mine)
        return stored

    def _add_user_conversations(
        self, user_id: str, records: list[ConversationRecord]
    ) -> Plan[list[MemoryHit]]:
        ns, stamps_ns = self.namespace(user_id, CONVERSATIONS), self.namespace(user_id, STAMPS)
        # a fact put back needs its conversation still kept (forgotten meanwhile, it stays so)
        threads = list(dict.fromkeys(r.thread_id for r in records if r.restores))
        unanswered = list(dict.fromkeys(key for r in records for key in r.earlier_keys))
        read = yield self._batch(
            [
                GetOp(stamps_ns, "added"),
                *(GetOp(ns, r.key) for r in records),
                *(GetOp(ns, key) for key in unanswered),
                *(SearchOp(ns, filter={"thread_id": t}, limit=1) for t in threads),
            ]
        )
        found = {
            r.key: it
            for r, it in zip(records, read[1 : 1 + len(records)], strict=True)
            if _in_namespace(it, ns)
        }
        at_threads = 1 + len(records) + len(unanswered)
        awaiting = {
            key
            for key, it in zip(unanswered, read[1 + len(records) : at_threads], strict=True)
            if _in_namespace(it, ns)
        }
        kept = {t for t, hits in zip(threads, read[at_threads:], strict=True) if hits}
        # an exchange already stored (a history imported again) is not stored twice; a live
        # turn asked again replaces its lost copy; a fact replaces the one on its subject,
        # which its history keeps; a fact put back, only where none is
        records = [
            r
            for r in records
            if (
                r.thread_id in kept
                and (
                    r.key not in found
                    or r.takes_place_of(r.key, found[r.key].value.get("written_us"))
                )
                if r.restores
                else r.key not in found or r.form == "fact" or r.replaces
            )
        ]
        if not records:
            return []
        older = {
            r.key: found[r.key]
            for r in records
            if r.key in found and r.form == "fact" and not r.restores
        }
        now = datetime.now(timezone.utc)
        # a fact said before the one now on its subject (an older conversation imported
        # after a newer one) joins that one's history, in time order, and does not replace it
        # (the fact stays what it was: its write time too, by which a take-back knows it)
        dated = {
            r.key: {
                **older[r.key].value,
                "history": history_with(older[r.key].value.get("history") or [], r),
            }
            for r in records
            if r.key in older and said_earlier(r.at, older[r.key].value)
        }
        records = [r for r in records if r.key not in dated]
        vectors, parts = yield from self._embed_said(
            [found_by(r.said or r.text, r.form, r.subject) for r in records]
        )
        written_us = _write_us(now, read[0], stamps_ns)
        values = {}
        for record, vector, its_parts in zip(records, vectors, parts, strict=True):
            value = record.value(iso(now))
            value["written_us"] = written_us
            value["history"] = _history(older.get(record.key), record)
            value["vector"], value["embedding_model"] = _pack(vector), self.embedding_name
            if its_parts:
                value["part_vectors"] = _pack_parts(its_parts)
            values[record.key] = value
        stamp = _stamp(written_us)
        ops: list[Any] = [
            PutOp(ns, key, value, index=False) for key, value in {**values, **dated}.items()
        ]
        # an exchange stored before its reply came is replaced by the one with the reply
        answered = [
            key for r in records if r.key in values for key in r.earlier_keys if key in awaiting
        ]
        ops += [PutOp(ns, key, None) for key in answered]
        ops.append(PutOp(stamps_ns, "added", stamp, index=False))
        if dated or answered:  # a history changed, or one went: every process reads again
            yield self._erasing(user_id, ops)
        else:
            yield self._batch(ops)
        read_token = _token(read[0], stamps_ns, "added")
        self._cache_written(user_id, values, vectors, parts, read_token, stamp["token"])
        # what joined a history is reported as such (``JOINED``): a take-back of the write
        # must find it there, and ``remember`` does not list the fact it joined as stored
        return [_value_hit(key, value, 1.0, "stored") for key, value in values.items()] + [
            _value_hit(key, value, 1.0, JOINED) for key, value in dated.items()
        ]

    def _cache_written(
        self,
        user_id: str,
        values: dict[str, dict[str, Any]],
        vectors: list[list[float]],
        parts: list[list[Any]],
        read_token: str | None,
        new_token: str,
    ) -> None:
        """Our own writes go straight into the user's loaded index; the stamp moves with
        them only when nobody else wrote since this process last looked."""
        with self.conversations.lock:
            index = self.conversations.get(user_id)
            if index is None:
                return
            written = zip(values.items(), vectors, parts, strict=True)
            for (key, value), vector, its_parts in written:
                index.upsert(key, value, _unit(vector), _unit_rows(np.asarray(its_parts, "<f2")))
            if index.stamps[0] == read_token:
                index.stamps = (new_token, index.stamps[1])

    def _facts_about(self, user_id: str) -> Plan[list[MemoryHit]]:
        ns = self.namespace(user_id, CONVERSATIONS)
        [items] = yield self._batch([SearchOp(ns, filter={"form": "fact"}, limit=_EVERYTHING)])
        return [_hit(it, 1.0, "listed") for it in self._own(items, ns)]

    # -- list / forget -------------------------------------------------------------------
    def _list(self, user_id: str) -> Plan[list[MemoryHit]]:
        ns, conv_ns = self.namespace(user_id), self.namespace(user_id, CONVERSATIONS)
        items, said = yield self._batch(
            [SearchOp(ns, limit=_EVERYTHING), SearchOp(conv_ns, limit=_EVERYTHING)]
        )
        hits = [_hit(it, 1.0, "listed") for it in self._own(items, ns)]
        hits += [_hit(it, 1.0, "listed") for it in self._own(said, conv_ns)]
        return newest_said_first(hits)

    def _delete(self, user_id: str, ids: list[str]) -> IO:
        spaces = [self.namespace(user_id, n) for n in (NAMESPACE, VECTORS, CONVERSATIONS)]
        return self._erasing(user_id, [PutOp(ns, key, None) for key in ids for ns in spaces])

    def _erasing(self, user_id: str, ops: list[Any]) -> IO:
        """``ops``, which erase, run after the stamp that has every process read the
        user's memories again; this one's are dropped however the batch ends. A store that
        applies a batch in part before it fails (not PostgreSQL, which runs it as one
        transaction) leaves no process recalling what it did erase."""
        stamp = PutOp(self.namespace(user_id, STAMPS), "erased", _stamp(), index=False)
        erased = self._batch([stamp, *ops])

        def blocking() -> Any:
            try:
                return erased.sync()
            finally:
                self.conversations.drop(user_id)  # reloaded at the next recall

        async def awaited() -> Any:
            try:
                return await erased.async_()
            finally:
                self.conversations.drop(user_id)

        return IO(blocking, awaited)

    def _rewrite_history(
        self, user_id: str, histories: dict[str, list[dict[str, Any]]]
    ) -> Plan[None]:
        # facts live with the conversations, preferences with the other memories
        spaces = [self.namespace(user_id, CONVERSATIONS), self.namespace(user_id)]
        found = yield self._batch([GetOp(ns, key) for ns in spaces for key in histories])
        rewritten = [
            PutOp(
                ns,
                it.key,
                {**it.value, "history": histories[it.key]},
                index=False if ns[0] == CONVERSATIONS else self._memory_index,
            )
            for ns in spaces
            for it in self._own(found, ns)
        ]
        yield self._erasing(user_id, rewritten)  # words leave the histories: an erasure


def _history(older: Item | None, record: ConversationRecord) -> list[dict[str, Any]]:
    """The history of the fact ``record`` writes over the item ``older`` holds."""
    if older is None:
        return history_after([], None, record)
    return history_after(older.value.get("history") or [], older.value, record)

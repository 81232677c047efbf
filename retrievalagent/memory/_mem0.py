"""mem0 as the memory backend: ``Memory``, ``AsyncMemory`` or the hosted ``MemoryClient``.

Every memory is added with metadata ``kind`` (``search_fact`` / ``preference``) and, when
it has one, ``memory_key`` (a fact's alias key, a preference's subject). A recall is three
reads, concurrent under ``AsyncMemory``: mem0's similarity ``search``, ``get_all`` of the
user's preferences, and ``get_all`` of the facts whose ``memory_key`` is ``in`` the
question's keys (mem0 2.x metadata filters). A keyed memory replaces the older ones with
the same key (added first, then the old ones deleted, so a failure never loses both).

mem0 2.x takes the user only inside ``filters`` and calls the result size ``top_k``; older
releases and some clients say ``limit``: the adapter asks the signature once. Coroutine
methods (``AsyncMemory``) are awaited; sync ones run in a worker thread under ``ainvoke``
so the event loop stays free. mem0 rejects user ids with whitespace, so ids are stored
percent-encoded (``mem0_user``): reversible, and every other id stays as it is.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import inspect
import math
import re
import sqlite3
import sys
import threading
import weakref
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from retrievalagent._threads import in_thread, run_sync
from retrievalagent.index import LexicalEncoder
from retrievalagent.memory._base import (
    CONVERSATION,
    PREFERENCE,
    MemoryHit,
    PlannedBackend,
    PreferencePutBack,
    fact_text,
    history_after,
    kind_of,
    newest_said_first,
    preference_written,
    recall_of,
    recall_text,
    statements_after,
)
from retrievalagent.memory._conversations import latest_forms
from retrievalagent.memory._hybrid import memory_fuser, rank_pool
from retrievalagent.memory._plan import IO, Plan
from retrievalagent.retrieval import Fuser

if TYPE_CHECKING:  # annotations only
    from retrievalagent.memory._base import MemoryRecord, Recall, RecallRequest
    from retrievalagent.memory._conversations import ConversationRecord

__all__ = ["Mem0Backend", "mem0_user"]

_MEM0_UNSAFE = re.compile(r"[\s%]")
#: Most items one ``get_all`` may return (a user's whole memory when listing).
_LIST_LIMIT = 10_000
#: Conversation memories mem0's search hands over to be ranked with BM25 (``rank_pool``).
_POOL = 50
#: Of those holding an id the question names (``_named_ids``), the most handed over.
_NAMED_POOL = 10
#: A word with a digit in it: a host, a ticket, a version ("srv0213", "INC-20931", "v2.4").
_ID_WORD = re.compile(r"\w[\w.\-/]*\w")
#: A year is a time, which recall reads from the question already, not an id.
_YEAR = re.compile(r"(?:19|20)\d\d")


def mem0_user(user_id: str) -> str:
    """The id mem0 stores a user under: whitespace and ``%`` percent-encoded (one-to-one)."""
    return _MEM0_UNSAFE.sub(lambda m: "".join(f"%{b:02X}" for b in m.group().encode()), user_id)


def _text_of(item: dict[str, Any], metadata: dict[str, Any]) -> str:
    """A memory's text: a search fact without its search wording; an exchange with the
    assistant's reply, which is kept beside what mem0 embeds."""
    text = fact_text(str(item.get("memory") or item.get("text") or ""))
    reply = metadata.get("reply") if metadata.get("kind") == CONVERSATION else None
    return f"{text}\n{reply}" if isinstance(reply, str) and reply else text


def _key_of(metadata: dict[str, Any]) -> str:
    """A memory's key as ``list_memories`` shows it: a fact's alias key, a preference's or a
    fact about the user's subject ("" for an exchange, whose stored key only dedupes)."""
    if metadata.get("kind") == CONVERSATION:
        return str(metadata.get("subject") or "")
    return str(metadata.get("memory_key") or "")


def _with_metadata(added: Any, metadata: dict[str, Any]) -> list[dict[str, Any]]:
    """What mem0's ``add`` stored (its result holds ids and texts, not the metadata given
    with them), each with that metadata; memories it deleted or left alone are not."""
    items = added.get("results", []) if isinstance(added, dict) else added
    return [
        {**item, "metadata": {**metadata, **(item.get("metadata") or {})}}
        for item in (items if isinstance(items, list) else [])
        if isinstance(item, dict) and item.get("event", "ADD") in ("ADD", "UPDATE")
    ]


def _sources(value: Any) -> list[dict[str, Any]]:
    return [dict(s) for s in value if isinstance(s, dict)] if isinstance(value, list) else []


def all_of(steps: list[IO]) -> IO:
    """Several I/O steps as one: in order when sync, concurrently when async."""

    async def together() -> list[Any]:
        # every outcome is collected, so a second failure is not left "never retrieved"
        results = await asyncio.gather(*(step.async_() for step in steps), return_exceptions=True)
        for result in results:
            if isinstance(result, BaseException):
                raise result
        return list(results)

    return IO(lambda: [step.sync() for step in steps], together)


# mem0 vector stores whose native score is a distance (smaller = closer), per mem0's docs.
_DISTANCE_PROVIDERS = frozenset({"faiss", "chroma"})


def _pick(obj: Any, name: str) -> tuple[Callable[..., Any] | None, Callable[..., Any] | None]:
    """The sync and the coroutine flavour of ``name`` (``search`` / ``asearch``), if present."""
    plain, prefixed = getattr(obj, name, None), getattr(obj, "a" + name, None)
    sync = plain if callable(plain) and not inspect.iscoroutinefunction(plain) else None
    if callable(prefixed) and inspect.iscoroutinefunction(prefixed):
        return sync, prefixed
    if callable(plain) and inspect.iscoroutinefunction(plain):
        return sync, plain
    return sync, None


def _named_ids(query: str) -> list[str]:
    """The ids a question names (words with a digit: "srv0213", "INC-20931", "v2.4"; not
    "13" alone, which many texts hold, nor a year), as typed and in either case, at most
    three."""
    words = [
        w
        for w in dict.fromkeys(_ID_WORD.findall(query))
        if any(c.isdigit() for c in w)
        and (not w.isdigit() or (len(w) >= 4 and not _YEAR.fullmatch(w)))
    ][:3]
    return list(dict.fromkeys(v for w in words for v in (w, w.lower(), w.upper())))


def _serialize_local_qdrant(memory: Any) -> None:
    """Give mem0's Qdrant *local mode* engine (``path=...``, what ``memory=True`` uses) one
    lock. That engine is not thread-safe: a search running while a write grows its arrays
    raises IndexError, and concurrent writes collide in its SQLite file. mem0 calls it
    from several threads (our write workers, ``AsyncMemory``'s to_thread), so each of its
    calls takes the lock; only the engine's calls, never mem0's LLM calls, are serialized.
    """
    client = getattr(getattr(memory, "vector_store", None), "client", None)
    local = getattr(client, "_client", None)
    if local is None or type(local).__name__ != "QdrantLocal":
        return
    if getattr(local, "_retrievalagent_lock", None):
        return
    lock = threading.RLock()
    # the engine is held weakly: a bound method kept on the instance would make a cycle, and
    # the engine would then be closed by the collector at interpreter exit, when its close
    # can no longer import what it needs ("Exception ignored in: QdrantClient.__del__")
    engine = weakref.ref(local)

    def locked(function: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(function)
        def call(*args: Any, **kwargs: Any) -> Any:
            target = engine()
            if target is None:  # collected: a late close has nothing left to do
                return None
            with lock:
                try:
                    return function(target, *args, **kwargs)
                except ImportError:
                    # closed by the collector as the interpreter exits, the engine's close
                    # can no longer import its file lock: the process is ending anyway
                    if sys.is_finalizing():
                        return None
                    raise

        return call

    for name in dir(type(local)):
        function = inspect.getattr_static(type(local), name, None)
        if not name.startswith("_") and inspect.isfunction(function):
            setattr(local, name, locked(function))
    local._retrievalagent_lock = lock


def _deletes_overwritten(memory: Any) -> None:
    """Have the SQLite files of a local mem0 overwrite what they delete.

    mem0's history and Qdrant local's collections each hold a memory's words, and a
    deleted row's bytes stay in the file's free pages until it is vacuumed unless
    ``secure_delete`` is on: Debian's SQLite build turns it on, the stock one (python.org's,
    macOS's) does not. A forgotten memory's words must leave the disk on either."""
    db = getattr(memory, "db", None)
    places = [(getattr(db, "connection", None), getattr(db, "_lock", None))]
    client = getattr(getattr(memory, "vector_store", None), "client", None)
    local = getattr(client, "_client", None)
    engine_lock = getattr(local, "_retrievalagent_lock", None)
    for collection in list((getattr(local, "collections", None) or {}).values()):
        places.append((getattr(getattr(collection, "storage", None), "storage", None), engine_lock))
    for connection, lock in places:
        if isinstance(connection, sqlite3.Connection):
            with lock or contextlib.nullcontext(), contextlib.suppress(sqlite3.Error):
                connection.execute("PRAGMA secure_delete = ON")


class Mem0Backend(PlannedBackend):
    """Adapter over a mem0 memory object.

    Args:
        memory: ``mem0.Memory``, ``mem0.AsyncMemory`` or anything with the same methods.
        infer: Let mem0's LLM extract facts on ``add`` (``False`` stores the fact as given).
        infer_conversations: The same for conversation memory (default: ``infer``): with
            it, mem0's extraction and conflict handling draw facts about the user from what
            they said, beside the exchange itself, which is always kept as said.
        encoder, fuser: The agent's BM25 encoder and fusion, to rank the conversation
            memories mem0's search returns by their words too.
        score_kind: ``"similarity"``, ``"distance"`` or ``"auto"`` (from mem0's vector store
            provider).
    """

    name = "mem0"

    def __init__(
        self,
        memory: Any,
        *,
        infer: bool = True,
        score_kind: str = "auto",
        infer_conversations: bool | None = None,
        encoder: LexicalEncoder | None = None,
        fuser: Fuser | None = None,
    ) -> None:
        self.memory = memory
        self.infer = infer
        self.infer_conversations = infer if infer_conversations is None else infer_conversations
        #: Facts about the user are drawn by mem0 itself (see ``_add_conversation``).
        self.extracts_facts = self.infer_conversations
        self.encoder = encoder or LexicalEncoder()
        self.fuser = fuser or memory_fuser()
        self._methods = {
            name: _pick(memory, name) for name in ("search", "add", "get_all", "delete", "update")
        }
        missing = [n for n in ("search", "add", "get_all") if not any(self._methods[n])]
        if missing:  # get_all lists preferences on every recall: without it each one failed
            raise TypeError(
                "mem0_memory must have search(), add() and get_all() methods (mem0 Memory or "
                f"AsyncMemory); {type(memory).__name__} has no "
                + " or ".join(f"{n}()" for n in missing)
            )
        self.async_native = self._methods["add"][1] is not None
        search_params = self._params("search")
        self._limit_key = "top_k" if "top_k" in search_params else "limit"
        self._threshold = "threshold" in search_params
        self._list_limit_key = "top_k" if "top_k" in self._params("get_all") else "limit"
        self._accepts_infer = "infer" in self._params("add")
        if score_kind == "auto":
            provider = getattr(
                getattr(getattr(memory, "config", None), "vector_store", None), "provider", None
            )
            score_kind = "distance" if provider in _DISTANCE_PROVIDERS else "similarity"
        if score_kind not in ("similarity", "distance"):
            raise ValueError(
                f"score_kind must be 'similarity', 'distance' or 'auto', not {score_kind!r}"
            )
        self.score_kind = score_kind
        _serialize_local_qdrant(memory)
        _deletes_overwritten(memory)  # a replaced memory's words go too
        #: mem0's Qdrant store filters on a memory's words (``contains``); others are not
        #: asked to (an operator a store does not know would fail every such recall)
        self._finds_words = type(getattr(memory, "vector_store", None)).__name__ == "Qdrant"

    def _params(self, name: str) -> Any:
        sync, coro = self._methods[name]
        method = sync or coro
        return inspect.signature(method).parameters if method is not None else {}

    def _call(self, name: str, *args: Any, **kwargs: Any) -> IO:
        """One mem0 call as an I/O step (a missing sync or async flavour is bridged)."""
        sync, coro = self._methods[name]
        if sync is None and coro is None:
            raise TypeError(f"this mem0 object has no {name}() method")

        def blocking() -> Any:
            if sync is not None:
                return sync(*args, **kwargs)
            assert coro is not None
            return run_sync(lambda: coro(*args, **kwargs))

        async def awaited() -> Any:
            if coro is not None:
                return await coro(*args, **kwargs)
            # its own thread, not the loop's executor: a hung call cannot starve the graph
            return await in_thread(blocking)

        return IO(blocking, awaited)

    def _get_all(self, user: str, limit: int = _LIST_LIMIT, **filters: Any) -> IO:
        return self._call(
            "get_all", filters={"user_id": user, **filters}, **{self._list_limit_key: limit}
        )

    def _everything(self, user: str) -> Plan[list[MemoryHit]]:
        """All of the user's memories: mem0's ``get_all`` takes a limit and no offset, so a
        full answer is asked again with a larger one (a list or ``forget`` that stopped at
        the limit would leave the rest unseen, and not erased)."""
        limit = _LIST_LIMIT
        while True:
            raw = yield self._get_all(user, limit)
            items = raw.get("results", []) if isinstance(raw, dict) else raw
            if not isinstance(items, list | tuple) or len(items) < limit:
                return self._hits(raw, user, "listed")
            limit *= 4

    # -- reading results -------------------------------------------------------------
    def _hits(self, raw: Any, user: str, matched: str) -> list[MemoryHit]:
        # A malformed item (not a dict, a score that is not a finite number) is skipped,
        # not allowed to fail the whole recall; so is an item of another user (mem0
        # filters by user already: this guards against a backend that does not).
        items = raw.get("results", []) if isinstance(raw, dict) else raw
        hits = []
        for item in items if isinstance(items, list | tuple) else []:
            if not isinstance(item, dict) or str(item.get("user_id", user)) != user:
                continue
            try:
                score = float(item.get("score") or 0.0) if matched == "similarity" else 1.0
            except (TypeError, ValueError, OverflowError):
                continue
            if not math.isfinite(score):
                continue
            if self.score_kind == "distance" and matched == "similarity":
                score = 1.0 / (1.0 + max(0.0, score))
            metadata = item.get("metadata")
            metadata = dict(metadata) if isinstance(metadata, dict) else {}
            hits.append(
                MemoryHit(
                    id=str(item.get("id", "")),
                    text=_text_of(item, metadata),
                    score=score,
                    metadata=metadata,
                    kind=kind_of(metadata.get("kind")),
                    key=_key_of(metadata),
                    matched=matched,
                    similarity=score if matched == "similarity" else None,
                    updated_at=str(item.get("updated_at") or item.get("created_at") or ""),
                    thread_id=str(metadata.get("thread_id") or ""),
                    at=str(metadata.get("at") or item.get("created_at") or ""),
                    sources=_sources(metadata.get("sources")),
                )
            )
        return sorted(hits, key=lambda h: -h.score)

    # -- recall ------------------------------------------------------------------------
    def _recall(self, request: RecallRequest) -> Plan[Recall]:
        user = mem0_user(request.user_id)
        # One similarity search serves facts and conversation memory alike (mem0 embeds
        # the question once); it reaches deep enough for the conversation pool.
        depth = max(request.limit, _POOL + request.limit if request.conversations > 0 else 0)
        # nothing to search for (only the preferences are wanted): mem0 embeds no question
        steps = [self._similar_to(request.query, {"user_id": user}, depth)] if depth else []
        if request.max_preferences > 0:
            steps.append(self._get_all(user, kind=PREFERENCE))
        if request.keys:
            steps.append(self._get_all(user, memory_key={"in": list(request.keys)}))
        window = request.time.window if request.time is not None else None
        if request.conversations > 0 and window is not None:
            # what was said in the question's time window, which the first may not reach
            dated = {
                "user_id": user,
                "kind": CONVERSATION,
                "at": {"gte": window[0], "lt": window[1]},
            }
            steps.append(self._similar_to(request.query, dated, _POOL))
        if request.conversations > 0 and self._finds_words and (named := _named_ids(request.query)):
            # what holds an id the question names, which mem0's nearest may not reach among
            # many alike: a search of its own, failing as the others do
            holding = {"OR": [{"data": {"contains": word}} for word in named]}
            naming = {"user_id": user, "kind": CONVERSATION, **holding}
            steps.append(self._similar_to(request.query, naming, _NAMED_POOL))
        results = iter((yield all_of(steps)))
        similar = self._hits(next(results), user, "similarity") if depth else []
        preferences = (
            self._hits(next(results), user, "preference") if request.max_preferences > 0 else []
        )
        keyed = self._hits(next(results), user, "alias") if request.keys else []
        facts = [h for h in similar if h.kind not in (PREFERENCE, CONVERSATION)]
        keyed = [h for h in keyed if h.kind not in (PREFERENCE, CONVERSATION)]
        keyed = [h for h in keyed if h.key in request.keys]
        preferences = [h for h in preferences if h.kind == PREFERENCE]
        said = []
        if request.conversations > 0:
            pool = [h for h in similar if h.kind == CONVERSATION]
            pool += [h for raw in results for h in self._hits(raw, user, "similarity")]
            said = self._said(request, pool)
        return recall_of(
            request,
            keyed,
            facts[: request.limit],
            preferences,
            scanned=len(similar),
            conversations=said,
        )

    def _similar_to(self, query: str, filters: dict[str, Any], depth: int) -> IO:
        kwargs: dict[str, Any] = {"filters": filters, self._limit_key: depth}
        if self._threshold:
            kwargs["threshold"] = 0.0  # the relevance bar is the agent's, applied after
        return self._call("search", query, **kwargs)

    def _said(self, request: RecallRequest, found: list[MemoryHit]) -> list[MemoryHit]:
        """The conversation memories mem0 found, ranked by BM25 and mem0's score fused."""
        pool: dict[str, MemoryHit] = {}
        for hit in found:
            if hit.kind == CONVERSATION:
                pool.setdefault(hit.id, hit)
        if not pool:
            return []
        values = {
            h.id: {**h.metadata, "text": h.text, "thread_id": h.thread_id, "at": h.at}
            for h in pool.values()
        }
        ranked = rank_pool(
            self.encoder,
            self.fuser,
            request.query,
            [(h.id, values[h.id], h.score) for h in pool.values()],
            request.conversations,
            window=request.time.window if request.time else None,
            sessions_back=request.time.sessions_back if request.time else 0,
            thread_id=request.thread_id,
            seen=request.seen,
            present=bool(request.time and request.time.present),
        )
        out = []
        for found_one in ranked:
            hit = pool[found_one.key]
            hit.score = found_one.score
            hit.similarity, hit.lexical = found_one.similarity, found_one.lexical
            hit.matched = "window" if found_one.in_window else "conversation"
            hit.in_window, hit.alone = found_one.in_window, found_one.alone
            hit.metadata["fused"] = found_one.fused
            out.append(hit)
        return out

    # -- add -------------------------------------------------------------------------
    def _add(self, record: MemoryRecord) -> Plan[None]:
        user = mem0_user(record.user_id)
        # mem0's extractor sees the question and the mapping it led to; without inference
        # only the memory itself is stored (raw messages would store the question too).
        if self.infer and record.kind != PREFERENCE:
            messages = [
                {"role": "user", "content": record.question},
                {
                    "role": "assistant",
                    "content": f"Search hint for these documents: {recall_text(record)}",
                },
            ]
        else:
            messages = [{"role": "user", "content": recall_text(record)}]
        metadata: dict[str, Any] = {
            **record.metadata,
            "kind": record.kind,
            "question": record.question[:500],
        }
        if record.key:
            metadata["memory_key"] = record.key
        if record.alias:
            metadata["alias"] = record.alias
        older: list[MemoryHit] = []
        if record.key and any(self._methods["get_all"]) and any(self._methods["delete"]):
            raw = yield self._get_all(user, memory_key=record.key)
            older = [h for h in self._hits(raw, user, "listed") if h.kind == record.kind]
        if record.kind == PREFERENCE and older:  # the one it replaces stays in its history
            held = {**older[0].metadata, "text": older[0].text}
            joins, history = preference_written(held, metadata, recall_text(record))
            if joins:  # said before the stored one, which stays current
                yield from self._rewrite_history(record.user_id, {older[0].id: history})
                return
            metadata["history"] = history
            if statements := statements_after(held, metadata):
                metadata["statements"] = statements
        kwargs: dict[str, Any] = {"user_id": user, "metadata": metadata}
        if self._accepts_infer:
            # a preference is an instruction already checked ("Answer in German."): stored
            # as it is, as ``memory=True`` stores it, where mem0's model would reword it or,
            # finding nothing to extract in it, store nothing at all
            kwargs["infer"] = self.infer and record.kind != PREFERENCE
        yield self._call("add", messages, **kwargs)
        if older:  # replaced: the new one is stored, now the old ones go
            yield self._erase(user, [h.id for h in older], messages=False)

    def _restore_preference(self, user_id: str, back: PreferencePutBack) -> Plan[bool]:
        # beside the one it replaces, which the forget then erases
        metadata = {k: v for k, v in back.entry.items() if k != "text"}
        metadata["history"] = back.history
        kwargs: dict[str, Any] = {"user_id": mem0_user(user_id), "metadata": metadata}
        if self._accepts_infer:
            kwargs["infer"] = False
        messages = [{"role": "user", "content": str(back.entry.get("text") or "")}]
        yield self._call("add", messages, **kwargs)
        return False

    # -- conversation memory --------------------------------------------------------------
    def _add_conversations(self, records: list[ConversationRecord]) -> Plan[list[MemoryHit]]:
        """Each record through mem0's own ``add``: its messages with inference (mem0's
        extraction and conflict handling), else the exchange as one memory. A record
        already stored (same key: an imported history imported again) is skipped; a fact
        replaces the older one on its subject, which its ``history`` keeps."""
        stored: list[MemoryHit] = []
        for user_id in dict.fromkeys(r.user_id for r in records):
            mine = latest_forms(list({r.key: r for r in records if r.user_id == user_id}.values()))
            user = mem0_user(user_id)
            older: dict[str, list[MemoryHit]] = {}
            keys = [r.key for r in mine if r.key]
            keys += [key for r in mine for key in r.earlier_keys]
            if keys and any(self._methods["get_all"]):
                raw = yield self._get_all(user, memory_key={"in": keys})
                for hit in self._hits(raw, user, "listed"):
                    older.setdefault(str(hit.metadata.get("memory_key") or ""), []).append(hit)
            for record in mine:
                if record.form == "exchange" and record.key in older and not record.replaces:
                    continue
                held = [
                    h
                    for h in older.get(record.key, [])
                    if not record.takes_place_of(h.id, h.metadata.get("written_us"))
                ]
                if record.restores and held:
                    continue  # a fact said since takes the place of one put back
                if record.form == "extract" and not self.infer_conversations:
                    continue
                # a put-back goes in beside the fact it replaces, which its forget erases
                replaced = older.get(record.key, []) if record.key and not record.restores else []
                metadata = self._conversation_metadata(record, replaced)
                added = yield self._add_conversation(record, user, metadata)
                stored += self._hits(_with_metadata(added, metadata), user, "stored")
                # and what an export that ended before the reply stored of this exchange
                unanswered = [h for key in record.earlier_keys for h in older.pop(key, [])]
                gone = [*replaced, *unanswered]
                if gone and any(self._methods["delete"]):
                    yield self._erase(user, [h.id for h in gone], messages=False)
        return stored

    @staticmethod
    def _conversation_metadata(
        record: ConversationRecord, replaced: list[MemoryHit]
    ) -> dict[str, Any]:
        """What mem0 keeps beside a conversation memory's text."""
        infer = record.form == "extract" and bool(record.messages)
        metadata: dict[str, Any] = {
            "kind": CONVERSATION,
            "form": "fact" if infer else record.form,
            "memory_key": record.key,
            "thread_id": record.thread_id,
            "title": record.title,
            "at": record.at,
            "sources": record.sources,
            "message_ids": record.message_ids,
        }
        if record.subject:
            metadata["subject"] = record.subject
        said = record.said or record.text
        if record.form == "exchange" and record.text != said:  # what mem0 embeds is said
            metadata["reply"] = record.text[len(said) :].strip()
        if record.speakers:
            metadata["speakers"] = record.speakers
        if record.place:
            metadata["place"] = record.place
        older = replaced[0] if replaced else None
        history = history_after(
            older.metadata.get("history") or [] if older else [],
            {
                **older.metadata,
                "text": older.text,
                "at": older.at,
                "thread_id": older.thread_id,
                "sources": older.sources,
            }
            if older
            else None,
            record,
        )
        if history:
            metadata["history"] = history
        return metadata

    def _add_conversation(
        self, record: ConversationRecord, user: str, metadata: dict[str, Any]
    ) -> IO:
        # An exchange is kept as said, one memory; "extract" hands its messages to mem0's
        # own extraction and conflict handling, whose memories are facts about the user.
        infer = record.form == "extract" and bool(record.messages)
        said = record.said or record.text
        messages = record.messages if infer else [{"role": "user", "content": said}]
        kwargs: dict[str, Any] = {"user_id": user, "metadata": metadata}
        if self._accepts_infer:
            kwargs["infer"] = infer
        return self._call("add", messages, **kwargs)

    # -- list / forget -------------------------------------------------------------------
    def _engine(self) -> Any:
        return self.memory

    def _list(self, user_id: str) -> Plan[list[MemoryHit]]:
        hits = yield from self._everything(mem0_user(user_id))
        return newest_said_first(hits)

    def _delete(self, user_id: str, ids: list[str]) -> IO:
        return self._erase(mem0_user(user_id), ids, messages=True)

    def _erase(self, user: str, ids: list[str], *, messages: bool) -> IO:
        """Delete memories and what mem0's history keeps of them (a replaced one's too: its
        id is gone, so forgetting the user later could not reach its words)."""
        deleted = all_of([self._call("delete", i) for i in ids])
        purge = functools.partial(_purge_local_history, self.memory, user, ids, messages)
        overwritten = functools.partial(_deletes_overwritten, self.memory)

        def blocking() -> Any:
            overwritten()
            result = deleted.sync()
            purge()
            return result

        async def awaited() -> Any:
            await in_thread(overwritten)
            result = await deleted.async_()
            await in_thread(purge)
            return result

        return IO(blocking, awaited)

    def _rewrite_history(
        self, user_id: str, histories: dict[str, list[dict[str, Any]]]
    ) -> Plan[None]:
        # only a fact written with the agent's extractor keeps a history (mem0's own
        # extraction writes none): a mem0 without update() never has one to rewrite
        if any(self._methods["update"]):
            yield all_of(
                [self._call("update", key, metadata={"history": h}) for key, h in histories.items()]
            )


def _purge_local_history(memory: Any, user: str, ids: list[str], messages: bool = True) -> None:
    """Erase what mem0's own SQLite history keeps of deleted memories.

    mem0 logs every memory's text in a ``history`` table (on ADD, and again on DELETE) and
    the user's last messages in a ``messages`` table; its ``delete`` leaves both. Erasing a
    memory must erase its words, so the rows of these ids, and the user's saved messages
    (a cache of context for mem0's extraction; kept with ``messages=False``, when a newer
    memory replaces one), go too. A history that is not mem0's local SQLite one (another
    store, an older mem0) is left to its owner."""
    db = getattr(memory, "db", None)
    connection, lock = getattr(db, "connection", None), getattr(db, "_lock", None)
    if connection is None or lock is None or not ids:
        return
    scope = f"user_id={user}"
    try:
        from mem0.memory.main import _build_session_scope

        scope = _build_session_scope({"user_id": user})
    except ImportError:  # pragma: no cover - the scope as mem0 2.x builds it
        pass
    with lock:
        connection.executemany("DELETE FROM history WHERE memory_id = ?", [(i,) for i in ids])
        tables = {r[0] for r in connection.execute("SELECT name FROM sqlite_master")}
        # scopes end with the user: agent_id, run_id, user_id
        if messages and "messages" in tables:
            connection.execute(
                "DELETE FROM messages WHERE session_scope = ? OR session_scope LIKE ? ESCAPE '\\'",
                (scope, "%&" + scope.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")),
            )
        connection.commit()

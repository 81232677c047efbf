"""What a long-term memory backend must do, and who a memory belongs to.

A user's long-term memory holds three kinds of item (``MemoryKind``):

* **search facts** -- '"vault" is called "repository" in these documents': found by the
  *words the user uses*. Each fact is keyed by its alias (the user's word, normalised to
  BM25 term ids by the node that writes it, see ``memory._keys``) and recalled whenever a
  later question of that user contains the alias, whatever words surround it. Beside that
  key channel, a fact is also found by embedding similarity to the question that taught
  it (which is what a fact without a key, e.g. one written by mem0's own extractor, has).
* **preferences** -- "answer in German": keyed by their subject (``language``,
  ``length`` ...), at most one per subject, and recalled on *every* turn of that user
  whatever the question: they never reach search, only the answer prompt.
* **conversation memory** -- what the user said in earlier conversations: each exchange
  (the user's message and a short form of the reply, ``form="exchange"``) and, where a
  model extracted them, durable facts about the user (``form="fact"``, keyed by subject,
  a newer one replacing the older while keeping it in its ``history``). Recalled by hybrid
  relevance to the question (words and meaning, see ``memory._hybrid``), from other
  threads than the current one, and shown to the model dated.

Scores are similarities in [0, 1], higher is closer, whatever the backend measures
natively. A fact recalled by its alias scores 1.0 (the user typed the word); one recalled
by similarity keeps its similarity, so ``memory_relevance_threshold`` gates the similarity
channel only and ``retrievalagent tune`` tunes it on ``best_similarity``.

What the similarity channel compares. A bare fact is far from any question in embedding
space (the packaged MiniLM scores one 0.15-0.55 against later questions), so a memory is
embedded as the question that taught it (``recall_text``); the same question scores
~0.85-0.95, a close rewording ~0.75, unrelated questions stay below ~0.5.
"""

from __future__ import annotations

import builtins
import dataclasses
import re
from abc import ABC, abstractmethod
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any, Literal, Protocol, runtime_checkable

from retrievalagent._inputs import check_id
from retrievalagent.errors import ConfigError
from retrievalagent.memory._conversations import ConversationRecord
from retrievalagent.memory._locks import user_locks
from retrievalagent.memory._plan import IO, Plan, arun, attempt, run
from retrievalagent.memory._secrets import mask_secrets
from retrievalagent.memory._temporal import CLOCK_SKEW, TimeRef, iso
from retrievalagent.types import MemoryInfo, readable_memory

__all__ = [
    "DEFAULT_USER",
    "HISTORY_FIELDS",
    "JOINED",
    "MemoryBackend",
    "MemoryHit",
    "MemoryKind",
    "MemoryRecord",
    "PlannedBackend",
    "PreferencePutBack",
    "Recall",
    "RecallRequest",
    "fact_text",
    "history_after",
    "history_threads",
    "history_with",
    "history_with_entry",
    "memory_info",
    "newest_per_key",
    "newest_said_first",
    "preference_history",
    "preference_written",
    "recall_text",
    "replaced_facts",
    "said_earlier",
    "statements_after",
    "user_id_from_config",
]

DEFAULT_USER = "default"

#: ``MemoryHit.matched`` of a fact a write put into the history of the one on its subject
#: (said before it), rather than storing it as the current one.
JOINED = "joined history"

MemoryKind = Literal["search_fact", "preference", "conversation"]
SEARCH_FACT: MemoryKind = "search_fact"
PREFERENCE: MemoryKind = "preference"
CONVERSATION: MemoryKind = "conversation"


def kind_of(value: Any) -> MemoryKind:
    """A stored ``kind`` as one of the three kinds (anything unknown is a search fact)."""
    if value in (PREFERENCE, CONVERSATION):
        return value  # type: ignore[no-any-return]
    return SEARCH_FACT


@dataclass
class MemoryHit:
    """One recalled (or listed) memory.

    ``matched`` says why it was recalled: ``"alias"`` (the question contains its key),
    ``"similarity"`` (its embedding is close to the question) or ``"preference"`` (applied
    on every turn). ``similarity`` is the embedding score when one was computed.
    """

    id: str
    text: str
    score: float
    metadata: dict[str, Any] = field(default_factory=dict)
    kind: MemoryKind = SEARCH_FACT
    key: str = ""
    matched: str = "similarity"
    similarity: float | None = None
    updated_at: str = ""
    #: Where a memory came from: the conversation (thread), when it was said, and the
    #: metadata of the messages it was drawn from, in order.
    thread_id: str = ""
    at: str = ""
    sources: list[dict[str, Any]] = field(default_factory=list)
    #: Conversation memory: the share of the question's word weight it contains, and
    #: whether it was said in the time the question points to.
    lexical: float | None = None
    in_window: bool = False
    #: Conversation memory: the relevance the gate reads, by its own words (an answer's:
    #: its question's), without what the exchange before it lends its rank (``score``
    #: counts that, and the "now" order).
    alone: float | None = None


@dataclass
class MemoryRecord:
    """One memory to write, with the turn it came from.

    ``key`` is what makes two records "the same memory" (a newer one replaces the older):
    a search fact's alias key, a preference's subject. An empty key stores a new item.
    """

    fact: str
    question: str
    answer: str
    user_id: str
    metadata: dict[str, Any] = field(default_factory=dict)
    kind: MemoryKind = SEARCH_FACT
    key: str = ""
    alias: str = ""  # the user's word as typed (search facts), for people reading the list


@dataclass(frozen=True)
class RecallRequest:
    """What one turn asks of memory: facts close to ``query`` or keyed by one of ``keys``,
    every preference of the user, and up to ``conversations`` conversation memories from
    other conversations than ``thread_id`` (``seen``: ids of the messages it holds, and the
    texts of its exchanges as memory writes them)."""

    query: str
    user_id: str
    #: Most facts (0: none is searched for, as when only the preferences are wanted).
    limit: int
    keys: tuple[str, ...] = ()
    max_preferences: int = 20
    conversations: int = 0
    thread_id: str = ""
    seen: frozenset[str] = frozenset()
    time: TimeRef | None = None
    #: When the question is asked (UTC ISO 8601; "" for unknown): what was said after it
    #: is not recalled, so a conversation replayed at its time does not know its future.
    asked: str = ""


@dataclass
class Recall:
    """A backend's answer to a ``RecallRequest`` (facts best first, preferences newest
    first, conversation memories in the order recall ranked them)."""

    facts: list[MemoryHit] = field(default_factory=list)
    preferences: list[MemoryHit] = field(default_factory=list)
    scanned: int = 0
    conversations: list[MemoryHit] = field(default_factory=list)


# The stored wording of a search fact's recall text (what backends embed and mem0 keeps):
# data, not a name, so it keeps the words it was written with.
_RECALL_TEXT = re.compile(r"^(?P<question>[^()]*) \(search hint: (?P<fact>.*)\)$", re.DOTALL)


def recall_text(record: MemoryRecord) -> str:
    """The text a search fact is found by: the question that taught it, then the fact.

    The question comes first and dominates the embedding (see the module docstring);
    parentheses in it become brackets so ``fact_text`` can split the two unambiguously.
    A preference is stored as itself.
    """
    if record.kind == PREFERENCE:
        return record.fact
    question = " ".join(record.question.split())[:300].replace("(", "[").replace(")", "]")
    return f"{question} (search hint: {record.fact})" if question else record.fact


def fact_text(text: str) -> str:
    """The fact alone, as injected into search and the prompt (``recall_text`` undone)."""
    text = text.strip()
    found = _RECALL_TEXT.match(text)
    return found.group("fact").strip() if found else text


_LONG_AGO = datetime.min.replace(tzinfo=timezone.utc)


def newest_said_first(hits: Iterable[MemoryHit]) -> list[MemoryHit]:
    """A listing's order: newest first by when it was said (a conversation memory's
    ``at``: an imported 2010 chat lists below a 2025 one, whatever order they came in),
    else by when it was stored; ties by when stored."""

    def moment(value: str) -> datetime:
        try:
            found = datetime.fromisoformat(value)
        except (TypeError, ValueError):
            return _LONG_AGO
        return found if found.tzinfo else found.replace(tzinfo=timezone.utc)

    return sorted(
        hits,
        key=lambda h: (moment(h.at or h.updated_at), moment(h.updated_at)),
        reverse=True,
    )


def newest_per_key(hits: Iterable[MemoryHit], limit: int) -> list[MemoryHit]:
    """Newest first, one per key (unkeyed items all kept), at most ``limit``."""
    seen: set[str] = set()
    out: list[MemoryHit] = []
    for hit in sorted(hits, key=lambda h: h.updated_at, reverse=True):
        if hit.key and hit.key in seen:
            continue
        seen.add(hit.key)
        out.append(hit)
        if len(out) >= limit:
            break
    return out


def merge_facts(*channels: Sequence[MemoryHit]) -> list[MemoryHit]:
    """One hit per memory id across recall channels: an alias match wins, else the best
    score; best first."""
    best: dict[str, MemoryHit] = {}
    for hits in channels:
        for hit in hits:
            held = best.get(hit.id)
            if held is None:
                best[hit.id] = hit
                continue
            if hit.similarity is not None and held.similarity is None:
                held.similarity = hit.similarity
            if hit.score > held.score or (hit.matched == "alias" and held.matched != "alias"):
                hit.similarity = max(
                    (s for s in (hit.similarity, held.similarity) if s is not None), default=None
                )
                best[hit.id] = hit
    return sorted(best.values(), key=lambda h: -h.score)


def recall_of(
    request: RecallRequest,
    keyed: Sequence[MemoryHit],
    similar: Sequence[MemoryHit],
    preferences: Iterable[MemoryHit],
    scanned: int,
    conversations: Sequence[MemoryHit] = (),
) -> Recall:
    """A backend's answer from its channels: every alias match kept (even beyond
    ``limit``), merged with the similar facts, the newest preference per subject, and the
    conversation memories as ranked."""
    return Recall(
        facts=merge_facts(keyed, similar)[: max(request.limit, len(keyed))],
        preferences=newest_per_key(preferences, request.max_preferences),
        scanned=scanned,
        conversations=list(conversations)[: request.conversations],
    )


def memory_info(hit: MemoryHit) -> MemoryInfo:
    """A stored memory as ``list_memories`` shows it."""
    info = MemoryInfo(
        id=hit.id,
        text=hit.text,
        kind=hit.kind,
        key=hit.key,
        alias=str(hit.metadata.get("alias") or ""),
        question=str(hit.metadata.get("question") or ""),
        updated_at=hit.updated_at,
        thread_id=hit.thread_id,
        at=hit.at or hit.updated_at,
        form=str(hit.metadata.get("form") or ""),
        sources=list(hit.sources),
        history=list(hit.metadata.get("history") or []),
    )
    return readable_memory(info)


@runtime_checkable
class MemoryBackend(Protocol):
    """Per-user recall, storage, listing and erasure of long-term memories."""

    #: Short name for traces ("mem0", "store").
    name: str
    #: True when the write path is a coroutine (scheduled as an asyncio task under ainvoke).
    async_native: bool
    #: True when the backend draws facts about the user from what they said by itself
    #: (mem0 with its LLM); the agent's own extractor is then not used.
    extracts_facts: bool

    def recall(self, request: RecallRequest) -> Recall:
        """Facts by key or similarity, and the user's preferences."""

    async def arecall(self, request: RecallRequest) -> Recall: ...

    def add(self, record: MemoryRecord) -> None:
        """Store one memory for ``record.user_id`` (replacing the one with the same key)."""

    async def aadd(self, record: MemoryRecord) -> None: ...

    def list(self, user_id: str) -> builtins.list[MemoryHit]:
        """Every memory of the user, newest first."""

    async def alist(self, user_id: str) -> builtins.list[MemoryHit]: ...

    def add_conversations(
        self, records: builtins.list[ConversationRecord]
    ) -> builtins.list[MemoryHit]:
        """Store conversation memories (one batch); returns them as stored."""

    async def aadd_conversations(
        self, records: builtins.list[ConversationRecord]
    ) -> builtins.list[MemoryHit]: ...

    def facts_about(self, user_id: str) -> builtins.list[MemoryHit]:
        """The facts about the user that conversation memory holds (``form="fact"``)."""

    async def afacts_about(self, user_id: str) -> builtins.list[MemoryHit]: ...

    def forget(
        self, user_id: str, memory_id: str | None = None, thread_id: str | None = None
    ) -> int:
        """Delete one memory, those of one conversation, or all of the user's; returns
        how many were deleted."""

    async def aforget(
        self, user_id: str, memory_id: str | None = None, thread_id: str | None = None
    ) -> int: ...

    def take_back(
        self, user_id: str, stored: builtins.list[MemoryHit], forgotten: Collection[str | None]
    ) -> None:
        """Undo what a ``forget`` of ``forgotten`` conversations (None: all the user's)
        overtook: the memories ``stored`` said in one go, and the others lose those
        conversations' words from their histories (see ``PlannedBackend._take_back``)."""

    async def atake_back(
        self, user_id: str, stored: builtins.list[MemoryHit], forgotten: Collection[str | None]
    ) -> None: ...


class PlannedBackend(ABC):
    """The ``MemoryBackend`` API over a backend's plans (see ``memory._plan``).

    A backend writes each operation once, as a plan that yields its I/O; the sync and the
    async method of each pair below differ only in how that I/O runs.
    """

    @abstractmethod
    def _recall(self, request: RecallRequest) -> Plan[Recall]:
        """Facts by key or similarity, and the user's preferences."""

    @abstractmethod
    def _add(self, record: MemoryRecord) -> Plan[None]:
        """Store one memory (replacing the one with the same key)."""

    @abstractmethod
    def _add_conversations(
        self, records: builtins.list[ConversationRecord]
    ) -> Plan[builtins.list[MemoryHit]]:
        """Store conversation memories (a fact replaces the one on its subject)."""

    @abstractmethod
    def _list(self, user_id: str) -> Plan[builtins.list[MemoryHit]]:
        """Every memory of the user, newest first."""

    @abstractmethod
    def _delete(self, user_id: str, ids: builtins.list[str]) -> IO:
        """The I/O that deletes the user's memories ``ids``."""

    @abstractmethod
    def _restore_preference(self, user_id: str, back: PreferencePutBack) -> Plan[bool]:
        """Store a preference back; True when it was written over the one it replaces
        (which the forget then keeps), False when beside it."""

    @abstractmethod
    def _rewrite_history(
        self, user_id: str, histories: dict[str, builtins.list[dict[str, Any]]]
    ) -> Plan[None]:
        """Give the user's memories (by id) these histories, the rest of each unchanged."""

    def _search(
        self, query: str, user_id: str, limit: int
    ) -> Plan[tuple[builtins.list[MemoryHit], int]]:
        recall = yield from self._recall(RecallRequest(query, user_id, limit, max_preferences=0))
        return recall.facts, recall.scanned

    def _facts_about(self, user_id: str) -> Plan[builtins.list[MemoryHit]]:
        hits = yield from self._list(user_id)
        return [h for h in hits if h.kind == CONVERSATION and h.metadata.get("form") == "fact"]

    def facts_about(self, user_id: str) -> builtins.list[MemoryHit]:
        return run(self._facts_about(user_id))

    async def afacts_about(self, user_id: str) -> builtins.list[MemoryHit]:
        return await arun(self._facts_about(user_id))

    def _forget(self, user_id: str, memory_id: str | None, thread_id: str | None) -> Plan[int]:
        hits = yield from self._list(user_id)
        ids = [
            h.id
            for h in hits
            if (memory_id is None or h.id == memory_id)
            and (thread_id is None or h.thread_id == thread_id)
        ]
        if thread_id is not None and memory_id is None:
            # a fact that replaced one drawn from this conversation keeps its words in its
            # history: they go with the conversation, the newer fact stays
            histories = {
                h.id: [e for e in _history_of(h) if _thread_of(e) != thread_id]
                for h in hits
                if h.id not in ids and any(_thread_of(e) == thread_id for e in _history_of(h))
            }
            if histories:
                yield from self._rewrite_history(user_id, histories)
        gone = [h for h in hits if h.id in ids]
        # one conversation erased: what its memories replaced from others comes back; a
        # failure on the way fails the forget before anything is erased
        threads = None if thread_id is None or memory_id is not None else {thread_id}
        yield from self._erase_putting_back(user_id, gone, threads, erase_on_failure=False)
        return len(ids)

    def recall(self, request: RecallRequest) -> Recall:
        return run(self._recall(request))

    async def arecall(self, request: RecallRequest) -> Recall:
        return await arun(self._recall(request))

    def search(self, query: str, user_id: str, limit: int) -> tuple[builtins.list[MemoryHit], int]:
        """Facts by similarity alone (no keys, no preferences), and how many were scanned."""
        return run(self._search(query, user_id, limit))

    async def asearch(
        self, query: str, user_id: str, limit: int
    ) -> tuple[builtins.list[MemoryHit], int]:
        return await arun(self._search(query, user_id, limit))

    def add(self, record: MemoryRecord) -> None:
        with user_locks(self._engine()).held(record.user_id, "a memory write"):
            run(self._add(_without_secrets(record)))

    async def aadd(self, record: MemoryRecord) -> None:
        async with user_locks(self._engine()).aheld(record.user_id, "a memory write"):
            await arun(self._add(_without_secrets(record)))

    def list(self, user_id: str) -> builtins.list[MemoryHit]:
        return run(self._list(user_id))

    async def alist(self, user_id: str) -> builtins.list[MemoryHit]:
        return await arun(self._list(user_id))

    # A write of conversation memories reads what it replaces (a fact on the same subject)
    # before it writes: two of one user, or one and a forget, take turns too
    def add_conversations(
        self, records: builtins.list[ConversationRecord]
    ) -> builtins.list[MemoryHit]:
        if not records:
            return []
        with user_locks(self._engine()).held_all(_users_of(records), "a memory write"):
            return run(self._add_conversations(records))

    async def aadd_conversations(
        self, records: builtins.list[ConversationRecord]
    ) -> builtins.list[MemoryHit]:
        if not records:
            return []
        async with user_locks(self._engine()).aheld_all(_users_of(records), "a memory write"):
            return await arun(self._add_conversations(records))

    def _engine(self) -> Any:
        """The object that holds the memories (agents over one share its user locks)."""
        return self

    # A forget or a take-back reads the user's memories, then writes from what it read:
    # two of one user take turns (``memory._locks``)
    def forget(
        self, user_id: str, memory_id: str | None = None, thread_id: str | None = None
    ) -> int:
        with user_locks(self._engine()).held(user_id):
            return run(self._forget(user_id, memory_id, thread_id))

    async def aforget(
        self, user_id: str, memory_id: str | None = None, thread_id: str | None = None
    ) -> int:
        async with user_locks(self._engine()).aheld(user_id):
            return await arun(self._forget(user_id, memory_id, thread_id))

    def take_back(
        self, user_id: str, stored: builtins.list[MemoryHit], forgotten: Collection[str | None]
    ) -> None:
        with user_locks(self._engine()).held(user_id, "taking back a write"):
            run(self._take_back(user_id, stored, forgotten))

    async def atake_back(
        self, user_id: str, stored: builtins.list[MemoryHit], forgotten: Collection[str | None]
    ) -> None:
        async with user_locks(self._engine()).aheld(user_id, "taking back a write"):
            await arun(self._take_back(user_id, stored, forgotten))

    def _take_back(
        self, user_id: str, stored: builtins.list[MemoryHit], forgotten: Collection[str | None]
    ) -> Plan[None]:
        """A write a ``forget`` overtook, set right: of the memories it ``stored``, those
        said in a ``forgotten`` conversation go, and the rest lose the words of such a one
        (a fact it replaced, read before it was forgotten) from their histories. Only where
        each is still what the write stored (by id and ``written_us``): a fact is kept under
        its subject, which may hold one said since, and that one stays."""
        mine = {(h.id, h.metadata.get("written_us")) for h in stored}
        listed = yield from self._list(user_id)
        ours = [h for h in listed if (h.id, h.metadata.get("written_us")) in mine]
        gone = [h for h in ours if None in forgotten or h.thread_id in forgotten]
        histories = {
            h.id: [e for e in _history_of(h) if _thread_of(e) not in forgotten]
            for h in ours
            if h not in gone and history_threads(h) & set(forgotten)
        }
        if histories:
            yield from self._rewrite_history(user_id, histories)
        # a fact going that replaced one said in a conversation still kept comes back (from
        # the history it has now: one imported since may have joined it), as the forget of
        # this conversation alone would have left it. Should that fail, what was forgotten
        # goes all the same, and the failure is raised after.
        threads = None if None in forgotten else {t for t in forgotten if t is not None}
        yield from self._erase_putting_back(user_id, gone, threads, erase_on_failure=True)

    def _erase_putting_back(
        self,
        user_id: str,
        gone: builtins.list[MemoryHit],
        forgotten: Collection[str] | None,
        *,
        erase_on_failure: bool,
    ) -> Plan[None]:
        """Erase ``gone``. Where one of them replaced a fact or a preference said in a
        conversation not ``forgotten`` (None: nothing is put back), that one is stored back
        first, over it where a backend keeps one per subject: a failure on the way leaves
        it in the newer one's history, never nowhere. Then the failure is raised, before
        anything is erased unless ``erase_on_failure`` (what was forgotten must go)."""
        facts = replaced_facts(gone, user_id, forgotten) if forgotten is not None else []
        preferences = replaced_preferences(gone, forgotten) if forgotten is not None else []
        overwritten: set[str] = set()
        failed = None
        if facts or preferences:
            result = yield attempt(
                IO(
                    lambda: run(self._put_back(user_id, facts, preferences)),
                    lambda: arun(self._put_back(user_id, facts, preferences)),
                )
            )
            if isinstance(result, Exception):
                if not erase_on_failure:
                    raise result
                failed = result
            else:
                overwritten = result
        erased = [h.id for h in gone if h.id not in overwritten]
        if erased:
            yield self._delete(user_id, erased)
        if failed is not None:
            raise failed

    def _put_back(
        self,
        user_id: str,
        facts: builtins.list[ConversationRecord],
        preferences: builtins.list[PreferencePutBack],
    ) -> Plan[set[str]]:
        """Store replaced facts and preferences back; the ids written over."""
        overwritten = (
            {h.id for h in (yield from self._add_conversations(facts))} if facts else set()
        )
        for back in preferences:
            if (yield from self._restore_preference(user_id, back)):
                overwritten.add(back.replacing.id)
        return overwritten


def _users_of(records: Iterable[ConversationRecord]) -> builtins.list[str]:
    return sorted({r.user_id for r in records})


#: What a fact's ``history`` keeps of each fact it replaced: enough to put it back whole.
HISTORY_FIELDS = ("text", "at", "thread_id", "title", "sources", "message_ids")


def history_after(
    earlier: Sequence[dict[str, Any]], older: Mapping[str, Any] | None, record: ConversationRecord
) -> builtins.list[dict[str, Any]]:
    """The history of the fact ``record`` writes over ``older`` (its ``HISTORY_FIELDS``;
    None: there is none): the older one's (``earlier``), then the older one itself, also
    when another conversation said the same (forgetting this one must leave that one), but
    not when its own conversation says it again. With no older one, the history ``record``
    brings (a fact put back has one)."""
    if older is None:
        return list(record.history)
    said = (str(older.get("text") or ""), str(older.get("thread_id") or ""))
    if said == (record.text, record.thread_id):
        return list(earlier)
    return [*earlier, {k: older.get(k) for k in HISTORY_FIELDS}]


def preference_history(
    older: Mapping[str, Any] | None, text: str, thread_id: str
) -> builtins.list[dict[str, Any]]:
    """The history of a preference ``text`` said in ``thread_id`` that replaces the stored
    one ``older`` (its value; None: there is none): the older one's history, then the
    older one whole, so that forgetting the conversation of the newer brings it back (the
    same preference said again in another conversation too: forgetting either leaves it).
    Said again in its own conversation, nothing is added."""
    if older is None:
        return []
    earlier = [e for e in older.get("history") or [] if isinstance(e, dict)]
    said = (str(older.get("text") or ""), _thread_of(older))
    if said == (text, thread_id) or not said[0]:
        return earlier
    entry = {k: v for k, v in older.items() if k != "history"}
    return [e for e in earlier if (e.get("text"), _thread_of(e)) != said] + [entry]


def preference_written(
    held: Mapping[str, Any] | None, new: dict[str, Any], text: str
) -> tuple[bool, builtins.list[dict[str, Any]]]:
    """How a preference ``new`` (its ``text`` as stored) is written over the stored one
    ``held``: said before it (a turn replayed at its time), it joins ``held``'s history,
    which stays current (True, that history); else it replaces ``held``, which its own
    history keeps (False, its history)."""
    if held is not None and said_earlier(str(new.get("at") or ""), held):
        return True, history_with_entry(held.get("history") or [], {**new, "text": text})
    return False, preference_history(held, text, _thread_of(new))


def statements_after(held: Mapping[str, Any] | None, new: Mapping[str, Any]) -> builtins.list[str]:
    """The statements (``statement``: where an imported preference was said) a preference
    written over ``held`` stands for: its own and all ``held`` stood for. Its history drops
    an older entry with the words and conversation of a newer one, and a statement that
    stood nowhere would be imported again, over what was said after it."""
    out = {*_statements_of(held or {}), *_statements_of(new)}
    return sorted(out)


def _statements_of(value: Mapping[str, Any]) -> builtins.list[str]:
    many = value.get("statements")
    found = [*(many if isinstance(many, list) else []), value.get("statement")]
    return [str(s) for s in found if isinstance(s, str) and s]


@dataclass(frozen=True)
class PreferencePutBack:
    """A preference to put back in the place of one being erased (``replacing``): the last
    one it replaced that was said in a conversation still kept, with its own history."""

    replacing: MemoryHit
    entry: dict[str, Any]
    history: builtins.list[dict[str, Any]]


def replaced_preferences(
    erased: Iterable[MemoryHit], forgotten: Collection[str]
) -> builtins.list[PreferencePutBack]:
    """Of the preferences being erased with the conversations ``forgotten``, those that
    replaced one said in another conversation, as what to put back."""
    out = []
    for hit in erased:
        earlier = [e for e in _history_of(hit) if _thread_of(e) not in forgotten]
        if hit.kind == PREFERENCE and earlier:
            out.append(PreferencePutBack(hit, earlier[-1], earlier[:-1]))
    return out


def history_with(
    earlier: Sequence[dict[str, Any]], record: ConversationRecord
) -> builtins.list[dict[str, Any]]:
    """A fact's history (oldest first) with the fact ``record`` put in at its time: said
    before the fact, in a conversation imported after its own."""
    return history_with_entry(earlier, {k: getattr(record, k) for k in HISTORY_FIELDS})


def history_with_entry(
    earlier: Sequence[dict[str, Any]], entry: dict[str, Any]
) -> builtins.list[dict[str, Any]]:
    """A history (oldest first) with ``entry`` put in at its time (its ``at``). Once only:
    a conversation saying the same again adds nothing."""
    said = (entry.get("text"), _thread_of(entry))
    if any((e.get("text"), _thread_of(e)) == said for e in earlier):
        return list(earlier)
    at = str(entry.get("at") or "")
    place = next((i for i, e in enumerate(earlier) if str(e.get("at") or "") > at), len(earlier))
    return [*earlier[:place], entry, *earlier[place:]]


def said_earlier(at: str, than: Mapping[str, Any]) -> bool:
    """Whether a memory said ``at`` was said before the stored one ``than`` (both dated)."""
    other = str(than.get("at") or "")
    return bool(at and other) and at < other


def replaced_facts(
    erased: Iterable[MemoryHit], user_id: str, forgotten: Collection[str]
) -> builtins.list[ConversationRecord]:
    """The facts that ``erased`` facts replaced, said in conversations not ``forgotten``,
    as records to put back: forgetting where "Runs PostgreSQL 15." was said brings back
    "Runs PostgreSQL 13." from the conversation before, which erasing this one must not
    take with it. Each keeps its conversation, time, sources and the history it had (what
    the forgotten conversations said left out)."""
    out = []
    for hit in erased:
        earlier = [e for e in _history_of(hit) if _thread_of(e) not in forgotten]
        if hit.metadata.get("form") != "fact" or not earlier:
            continue
        last = earlier[-1]
        text = str(last.get("text") or "")
        if not text:
            continue
        sources, ids = last.get("sources"), last.get("message_ids")
        out.append(
            ConversationRecord(
                text=text,
                user_id=user_id,
                thread_id=_thread_of(last),
                at=str(last.get("at") or ""),
                title=str(last.get("title") or ""),
                sources=[dict(s) for s in sources if isinstance(s, dict)]
                if isinstance(sources, list)
                else [],
                message_ids=[str(i) for i in ids] if isinstance(ids, list) else [],
                said=text,
                form="fact",
                subject=str(hit.metadata.get("subject") or hit.key or ""),
                key=str(hit.metadata.get("memory_key") or hit.id),
                restores=True,
                history=earlier[:-1],
                in_place_of=(hit.id, hit.metadata.get("written_us")),
            )
        )
    return out


def history_threads(hit: MemoryHit) -> set[str]:
    """The conversations the facts ``hit`` replaced were said in (its ``history``)."""
    return {_thread_of(e) for e in _history_of(hit)}


def _history_of(hit: MemoryHit) -> builtins.list[dict[str, Any]]:
    history = hit.metadata.get("history")
    return [e for e in history if isinstance(e, dict)] if isinstance(history, list) else []


def _thread_of(entry: Mapping[str, Any]) -> str:
    return str(entry.get("thread_id") or "")


def said_until(request: RecallRequest) -> str:
    """The latest a conversation memory may have been said to be recalled for ``request``
    (``iso``'s shape; "" for no bound): a day past when it is asked, the clock skew
    ``remember`` allows, so a turn replayed at its time does not know its future."""
    if not request.asked:
        return ""
    try:
        asked = datetime.fromisoformat(request.asked)
    except ValueError:
        return ""
    return iso(asked + CLOCK_SKEW)


def user_id_from_config(config: Mapping[str, Any] | None) -> str:
    """The LangGraph Server auth identity, else ``configurable.user_id``, else ``"default"``.

    Behind LangGraph Server with authentication, the authenticated user is the only one
    whose memory a run may touch: a client cannot name another in ``user_id`` (the server
    sets ``langgraph_auth_user`` itself, and leaves it empty without an auth handler).
    The one place a user id is read: it is checked here (a string of at most 256
    characters without control characters or surrounding whitespace, else ``ConfigError``)
    and used exactly as given; a blank one means "not given". Backends make it safe for
    their storage (``StoreBackend.namespace``).
    """
    configurable = (config or {}).get("configurable") or {}
    auth = configurable.get("langgraph_auth_user")
    authenticated, identity = False, None
    if isinstance(auth, Mapping):
        authenticated = auth.get("is_authenticated", True) is not False
        identity = auth.get("identity")
    elif auth is not None:
        authenticated = getattr(auth, "is_authenticated", True) is not False
        identity = getattr(auth, "identity", None) if authenticated else None
    if authenticated:
        # an authenticated user without an identity (an auth handler's bug) must not fall
        # back to the user the client names: that would open any user's memory to it
        uid = "" if identity is None else check_id(identity, "langgraph_auth_user.identity")
        if not uid.strip():
            raise ConfigError(
                "langgraph_auth_user is authenticated but has no identity: the auth "
                "handler must return one ('identity'), whose memory the run then uses"
            )
        return uid
    user = configurable.get("user_id")
    if user is not None and (uid := check_id(user, "user_id")).strip():
        return uid
    return DEFAULT_USER


def _without_secrets(record: MemoryRecord) -> MemoryRecord:
    """``record`` with what looks like a secret masked in its fact and in the turn it keeps
    (the question and answer are listed with a search fact or preference: a preference
    stated beside a pasted key must not keep the key)."""
    fact, question, answer = (
        mask_secrets(text)[0] for text in (record.fact, record.question, record.answer)
    )
    return dataclasses.replace(record, fact=fact, question=question, answer=answer)

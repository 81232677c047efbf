"""Writing conversation memory: a turn's exchange, an imported history, the facts in them.

The graph's ``write_memory`` node and ``RetrievalAgent.remember`` both come here, so a
turn the user had with the agent and a history they import are stored alike. The
exchange is one batched write; the facts (with a chat model, for a store backend: mem0
extracts its own) are a second plan that reads the subjects already known, asks the
extractor, checks what it filled (``memory._extract``) and writes what passed.

A turn's writes run in the background, the facts after a model call: ``forget`` may erase
the conversation while they are on their way. A write scheduled before such a ``forget``
(its ``ticket``) stores nothing, and takes back what it stored if the ``forget`` came
while it was storing (``_Forgets``).
"""

from __future__ import annotations

import hashlib
import json
import threading
from collections import deque
from collections.abc import Sequence
from datetime import datetime
from typing import Any, NamedTuple

from retrievalagent.memory._base import (
    CONVERSATION,
    PREFERENCE,
    MemoryBackend,
    MemoryHit,
    MemoryRecord,
    RecallRequest,
    history_threads,
    statements_after,
)
from retrievalagent.memory._conversations import (
    ConversationRecord,
    Said,
    exchange_records,
    fact_key,
    masked_said,
    mentions_self,
    source_of,
)
from retrievalagent.memory._extract import FactExtractor, checked_facts
from retrievalagent.memory._plan import IO, Plan, arun, run
from retrievalagent.memory._preferences import each_stated
from retrievalagent.memory._secrets import mask_secrets
from retrievalagent.memory._temporal import iso, parse_time

__all__ = ["ConversationWriter", "Imported"]


class Imported(NamedTuple):
    """One conversation of an import, checked: what was said, where and when
    (``user_id``, ``thread_id``, ``at``, ``title``), the keys of the exchanges it is the
    first of the import to hold, and the keys of its messages nothing reads (warned of by
    the caller)."""

    said: list[Said]
    where: dict[str, Any]
    keys: set[str]
    unread: Sequence[str] = ()


#: User messages shown to the extractor in one call (a long import takes several).
_MESSAGES_PER_CALL = 20


class _Forgets:
    """The ``forget`` calls of conversations (a thread, or all of a user's), numbered, so a
    write can tell whether one came after it was scheduled. Kept per user: every write
    asks, and only about its own user."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._count = 0
        self._of: dict[str, deque[tuple[int, str | None]]] = {}

    def ticket(self) -> int:
        with self._lock:
            return self._count

    def record(self, user_id: str, thread_id: str | None) -> None:
        with self._lock:
            self._count += 1
            self._of.setdefault(user_id, deque(maxlen=1000)).append((self._count, thread_id))

    def since(self, ticket: int, user_id: str, thread_id: str) -> bool:
        """Whether a ``forget`` after ``ticket`` erased this user's conversation."""
        return bool(self.threads(ticket, user_id) & {None, thread_id})

    def threads(self, ticket: int, user_id: str) -> set[str | None]:
        """The conversations of this user forgotten after ``ticket`` (None: all of them)."""
        with self._lock:
            return {thread for n, thread in self._of.get(user_id, ()) if n > ticket}


class ConversationWriter:
    """Turns what was said into conversation memory records and writes them.

    Args:
        memory: The backend the records go to.
        extractor: Draws facts about the user from their messages (a chat model); None
            offline, and for mem0, which extracts its own.
    """

    def __init__(self, memory: MemoryBackend, extractor: FactExtractor | None = None) -> None:
        self.memory = memory
        self.extractor = extractor
        self._forgets = _Forgets()

    def ticket(self) -> int:
        """Taken when a write is scheduled: a ``forget`` after it cancels the write."""
        return self._forgets.ticket()

    def forgetting(self, user_id: str, thread_id: str | None) -> None:
        """Called before a conversation (or all of a user's) is erased."""
        self._forgets.record(user_id, thread_id)

    @staticmethod
    def exchanges(
        said: Sequence[Said],
        *,
        user_id: str,
        thread_id: str = "",
        at: datetime | str | None = None,
        title: str = "",
        after: str | None = None,
        earlier: Sequence[Said] = (),
    ) -> list[ConversationRecord]:
        return exchange_records(
            said,
            user_id=user_id,
            thread_id=thread_id,
            at=at,
            title=title,
            after=after,
            earlier=earlier,
        )

    def store(self, records: list[ConversationRecord]) -> IO:
        """Writing ``records`` (one batch) as an I/O step; it gives the stored hits."""
        memory = self.memory
        return IO(
            lambda: memory.add_conversations(records),
            lambda: memory.aadd_conversations(records),
        )

    def store_now(
        self, records: list[ConversationRecord], ticket: int | None = None
    ) -> list[MemoryHit]:
        return run(self.kept(records, ticket))

    async def astore_now(
        self, records: list[ConversationRecord], ticket: int | None = None
    ) -> list[MemoryHit]:
        return await arun(self.kept(records, ticket))

    def store_facts(self, said: Sequence[Said], **where: Any) -> list[MemoryHit]:
        """Run :meth:`facts` with blocking calls."""
        return run(self.facts(said, **where))

    async def astore_facts(self, said: Sequence[Said], **where: Any) -> list[MemoryHit]:
        return await arun(self.facts(said, **where))

    def store_import(
        self,
        chunks: Sequence[list[ConversationRecord]],
        conversations: Sequence[Imported],
        collection: str,
    ) -> list[MemoryHit]:
        """Run :meth:`imported` with blocking calls."""
        return run(self.imported(chunks, conversations, collection))

    async def astore_import(
        self,
        chunks: Sequence[list[ConversationRecord]],
        conversations: Sequence[Imported],
        collection: str,
    ) -> list[MemoryHit]:
        return await arun(self.imported(chunks, conversations, collection))

    def imported(
        self,
        chunks: Sequence[list[ConversationRecord]],
        conversations: Sequence[Imported],
        collection: str,
    ) -> Plan[list[MemoryHit]]:
        """An import (``remember``): its exchanges (``chunks``, a write each), the
        preferences stated in its conversations, then the facts of those that stored
        something new: importing a history again, or a copy of a conversation, asks the
        model nothing."""
        ticket = self.ticket()
        stored: list[MemoryHit] = []
        for chunk in chunks:
            stored += yield from self.kept(chunk)
        if conversations:
            user = conversations[0].where["user_id"]
            stored += yield from self.preferences(conversations, user, collection, ticket)
        # an exchange's key is a store item's id, and mem0 keeps it as ``memory_key``
        news = {_key_of(hit) for hit in stored}
        drawing = [conversation for conversation in conversations if conversation.keys & news]
        for done, conversation in enumerate(drawing):
            try:
                stored += yield from self.facts(conversation.said, **conversation.where)
            except BaseException:
                # the import stops here (the model down, Ctrl-C): the exchanges of the
                # conversations whose facts are not drawn go again, so that the same import
                # run again finds them new and draws their facts (it asks only about news)
                undrawn = set().union(*(c.keys for c in drawing[done:]))
                back = [hit for hit in stored if _key_of(hit) in undrawn]
                if back:
                    yield self._take_back(conversation.where["user_id"], back)
                raise
        return stored

    def preferences(
        self, conversations: Sequence[Imported], user_id: str, collection: str, ticket: int
    ) -> Plan[list[MemoryHit]]:
        """The preferences the user stated in imported conversations ("I prefer answers in
        German."), stored as the turns they record would have stored them: each in the
        order said, dated by its message, so an earlier one on a subject is in the later
        one's history, and one said before the preference held joins that one's history
        (the backend tells by ``at``).

        One already held, current or in a history, is not stored again, so an import
        stopped halfway stores the rest when run again (which draws facts from nothing it
        stored before); one whose conversation a ``forget`` after ``ticket`` erased is not
        stored, or is erased again should the ``forget`` come while it is stored. Returns
        those stored that now hold their subject."""
        records = _restatements_dropped(
            sorted(
                (
                    r
                    for c in conversations
                    for r in _stated(
                        c.said, user_id, c.where["thread_id"], c.where["at"], collection
                    )
                ),
                key=lambda r: str(r.metadata["at"]),  # stable: as said, within one time
            )
        )
        if not records:
            return []
        held = _statements((yield self._preferences_of(user_id)))
        stored = []
        for record in records:
            thread = str(record.metadata["thread_id"])
            if record.metadata[STATEMENT] in held or self._forgets.since(ticket, user_id, thread):
                continue
            yield self._add(record)
            if self._forgets.since(ticket, user_id, thread):  # it came while this was stored
                yield self._forget_again(user_id, thread)
                continue
            stored.append(record)
        if not stored:
            return []
        forgotten = self._forgets.threads(ticket, user_id)
        standing = {
            h.metadata.get(STATEMENT): h
            for h in (yield self._preferences_of(user_id))
            if h.thread_id not in forgotten
        }
        found = (standing.get(r.metadata[STATEMENT]) for r in stored)
        return [hit for hit in found if hit is not None]

    def _preferences_of(self, user_id: str) -> IO:
        """The user's preferences as they now stand (with their histories)."""
        memory = self.memory
        request = RecallRequest(query="", user_id=user_id, limit=0, max_preferences=10_000)
        return IO(
            lambda: memory.recall(request).preferences,
            lambda: _preferences(memory.arecall(request)),
        )

    def _add(self, record: MemoryRecord) -> IO:
        memory = self.memory
        return IO(lambda: memory.add(record), lambda: memory.aadd(record))

    def _take_back(self, user_id: str, stored: list[MemoryHit]) -> IO:
        """Erase exchanges this write ``stored`` (only where each is still what it stored)."""
        memory = self.memory
        return IO(
            lambda: memory.take_back(user_id, stored, {None}),
            lambda: memory.atake_back(user_id, stored, {None}),
        )

    def _forget_again(self, user_id: str, thread_id: str) -> IO:
        memory = self.memory
        return IO(
            lambda: memory.forget(user_id, None, thread_id),
            lambda: memory.aforget(user_id, None, thread_id),
        )

    def kept(
        self, records: list[ConversationRecord], ticket: int | None = None
    ) -> Plan[list[MemoryHit]]:
        """``records`` stored, unless their conversation was forgotten after ``ticket``:
        then nothing is, and what this write stored while the ``forget`` ran is taken
        back (the ``forget`` erased what was there before it)."""
        if not records:
            return []
        user, thread = records[0].user_id, records[0].thread_id
        if ticket is not None and self._forgets.since(ticket, user, thread):
            return []
        stored: list[MemoryHit] = list((yield self.store(records)))
        forgotten = self._forgets.threads(ticket, user) if ticket is not None else set()
        taken = bool(forgotten & {None, thread})
        if not taken and not {t for h in stored for t in history_threads(h)} & forgotten:
            return stored
        # a forget overtook this write: what it stored of a forgotten conversation goes (a
        # fact it replaced in a conversation still kept comes back), and so do the words of
        # one it read (a fact it replaced, now in its history)
        memory = self.memory
        yield IO(
            lambda: memory.take_back(user, stored, forgotten),
            lambda: memory.atake_back(user, stored, forgotten),
        )
        return [] if taken else stored

    def wants_facts(self, said: Sequence[Said], user_id: str) -> bool:
        """Whether ``facts`` would extract anything: there is an extractor (the agent's
        model, or the backend's own) and the user said something about themselves."""
        extracts = self.extractor is not None or self.memory.extracts_facts
        return extracts and mentions_self(m.content for m in said if _by_user(m, user_id))

    def facts(
        self,
        said: Sequence[Said],
        *,
        user_id: str,
        thread_id: str = "",
        at: datetime | str | None = None,
        title: str = "",
        ticket: int | None = None,
    ) -> Plan[list[MemoryHit]]:
        """Extract, check and store the facts about the user in ``said`` (nothing once
        their conversation is forgotten after ``ticket``)."""
        if not self.wants_facts(said, user_id):
            return []
        # what the model sees and what is kept: the messages, metadata and title masked
        said, title = masked_said(said)[0], mask_secrets(title)[0]
        if self.extractor is None:  # the backend extracts: hand it the user's messages
            records = [self._for_backend(said, user_id, thread_id, at, title)]
            return list((yield from self.kept(records, ticket)))
        extractor, memory, when = self.extractor, self.memory, iso(parse_time(at))
        known = yield IO(lambda: memory.facts_about(user_id), lambda: memory.afacts_about(user_id))
        subjects = list(dict.fromkeys(str(h.metadata.get("subject") or "") for h in known))
        subjects = [s for s in subjects if s]
        mine = [m for m in said if _by_user(m, user_id)]
        stored: list[MemoryHit] = []
        for start in range(0, len(mine), _MESSAGES_PER_CALL):
            if ticket is not None and self._forgets.since(ticket, user_id, thread_id):
                break  # no more model calls for a forgotten conversation
            part = mine[start : start + _MESSAGES_PER_CALL]
            texts = [m.content for m in part]
            found = yield _extraction(extractor, texts, list(subjects))
            records = [
                ConversationRecord(
                    text=fact.fact,
                    user_id=user_id,
                    thread_id=thread_id,
                    at=when,
                    title=title,
                    sources=[source_of(part[t]) for t in fact.turns],
                    message_ids=[part[t].id for t in fact.turns if part[t].id],
                    form="fact",
                    subject=fact.subject,
                    key=fact_key(fact.subject),
                )
                for fact in checked_facts(found, texts)
            ]
            if records:
                stored += yield from self.kept(records, ticket)
                subjects += [r.subject for r in records if r.subject not in subjects]
        return [h for h in stored if h.kind == CONVERSATION]

    @staticmethod
    def _for_backend(
        said: Sequence[Said], user_id: str, thread_id: str, at: datetime | str | None, title: str
    ) -> ConversationRecord:
        """The conversation as one record whose messages the backend extracts facts from:
        the user's own and the replies, not other people's in a shared chat."""
        said = [m for m in said if m.role == "assistant" or _by_user(m, user_id)]
        whole = exchange_records(said, user_id=user_id, thread_id=thread_id, at=at, title=title)
        return ConversationRecord(
            text="",
            user_id=user_id,
            thread_id=thread_id,
            at=whole[0].at,
            title=title,
            sources=[s for r in whole for s in r.sources],
            message_ids=[i for r in whole for i in r.message_ids],
            form="extract",
            messages=[m for r in whole for m in r.messages],
        )


def _key_of(hit: MemoryHit) -> str:
    """An exchange's key: a store item's id; mem0 keeps it as ``memory_key``."""
    return str(hit.metadata.get("memory_key") or hit.id)


def _by_user(message: Said, user_id: str) -> bool:
    """Whether the user said ``message``: a user message unnamed, or named as the user (an
    export that names every speaker); not another person's in a shared chat ("Sam: I live
    in Oslo" is no fact about the user)."""
    return message.role == "user" and " ".join(message.name.split()).casefold() in {
        "",
        " ".join(user_id.split()).casefold(),
    }


def _extraction(extractor: FactExtractor, texts: list[str], subjects: list[str]) -> IO:
    return IO(
        lambda: extractor.extract(texts, subjects), lambda: extractor.aextract(texts, subjects)
    )


#: Where an imported preference was said, kept with it (``_statement``): what an import
#: stores is known by it, in any history, however often the words recur (the same
#: preference said twice in one conversation is two statements).
STATEMENT = "statement"


def _stated(
    said: Sequence[Said], user_id: str, thread_id: str, at: datetime | str | None, collection: str
) -> list[MemoryRecord]:
    """Every preference the user states in ``said``, as a turn's grade would write it:
    from the user's own lines (unnamed, or named as the user: an export that names every
    speaker), not another person's in a shared chat. Each keeps the sentence that stated
    it as its question, secrets masked (the sentence alone: masking every message again
    cost an import 6% of its time, for the few that state a preference)."""
    when = iso(parse_time(at))
    mine = [(place, message) for place, message in enumerate(said) if _by_user(message, user_id)]
    out: list[MemoryRecord] = []
    for (place, message), stated in zip(mine, each_stated(m.content for _, m in mine), strict=True):
        out += [
            MemoryRecord(
                fact=preference.instruction,
                question=mask_secrets(sentence)[0],
                answer="",
                user_id=user_id,
                metadata={
                    "collection": collection,
                    "thread_id": thread_id,
                    "at": message.at or when,
                    "sources": [source_of(message)],
                    STATEMENT: _statement(thread_id, place, order, sentence),
                },
                kind=PREFERENCE,
                key=preference.subject,
            )
            for order, (sentence, preference) in enumerate(stated)
        ]
    return out


def _statement(thread_id: str, place: int, order: int, sentence: str) -> str:
    """A statement's ``STATEMENT``: its conversation, then a digest of its place in what
    was imported, its sentence's order and its words. Not its time, nor its message's id:
    as an exchange is, it is the same statement imported again with another time, or
    from an export that gives ids after one that did not."""
    digest = hashlib.sha256(json.dumps([thread_id, place, order, sentence]).encode())
    return f"{thread_id}/{digest.hexdigest()[:32]}"


def _restatements_dropped(records: Sequence[MemoryRecord]) -> list[MemoryRecord]:
    """``records`` (in the order said) without one that says again, in the same
    conversation, what the one before it on its subject said: a turn does not store a
    preference it already holds from that conversation, and a backend keeps one such
    statement only (the second would replace the first, which then stood nowhere)."""
    last: dict[str, tuple[str, str]] = {}
    out = []
    for record in records:
        said = (record.fact, str(record.metadata["thread_id"]))
        if last.get(record.key) != said:
            out.append(record)
        last[record.key] = said
    return out


def _statements(held: Sequence[MemoryHit]) -> set[str]:
    """The statements (``STATEMENT``) the user's preferences stand for: each current one
    and its history, of the conversations they still hold (a ``forget`` of one takes its
    words from every history, so what was said there is imported again if asked)."""
    out: set[str] = set()
    for hit in held:
        entries = [
            hit.metadata,
            *(e for e in hit.metadata.get("history") or [] if isinstance(e, dict)),
        ]
        threads = {hit.thread_id, *(str(e.get("thread_id") or "") for e in entries)}
        for entry in entries:
            out.update(s for s in statements_after(None, entry) if s.rpartition("/")[0] in threads)
    return out


async def _preferences(recall: Any) -> list[MemoryHit]:
    return list((await recall).preferences)

"""The nodes of the agent's graph, each with a sync and an async body.

Every node reads what it needs from the state, does its I/O, and returns a state update
that includes one trace event. Sync and async bodies share the parts that are not I/O
(``_before_*`` / ``_after_*``), so the two paths cannot drift apart.
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime, timezone, tzinfo
from typing import Any, TypeVar
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage
from langchain_core.runnables import RunnableConfig
from langgraph.config import get_stream_writer
from langgraph.types import Overwrite
from typing_extensions import TypedDict

from retrievalagent._inputs import clean_question, content_text
from retrievalagent._threads import TraceLog, call_with_timeout
from retrievalagent.config import Settings, call_settings
from retrievalagent.errors import ConfigError, ModelError
from retrievalagent.graph._history import (
    fifo_removals,
    history_for_model,
    is_repeat,
    remember_failed_rewrite,
    tried_queries,
)
from retrievalagent.graph._state import AgentState, RecalledMemory, ScoredId
from retrievalagent.index import Hit
from retrievalagent.memory import (
    CONVERSATION,
    PREFERENCE,
    BackgroundWrites,
    ConversationWriter,
    MemoryBackend,
    MemoryHit,
    MemoryReader,
    MemoryRecord,
    ReadResult,
    RecallRequest,
    Said,
    alias_key,
    alias_of,
    by_subject,
    iso,
    kind_of,
    last_stated,
    parse_time,
    said_of,
    subject_of,
    typed_alias,
    user_id_from_config,
)
from retrievalagent.models import (
    Answer,
    Answerer,
    AnswerRequest,
    Grader,
    LLMInlineAnswerer,
    Meter,
    Rewriter,
    dated_line,
    memory_context,
    metering,
    turn_usage,
)
from retrievalagent.persistence import ThreadTitler, question_title
from retrievalagent.retrieval import HybridSearcher, SearchPlan, to_source
from retrievalagent.trace import (
    ConversationWrite,
    DenseSearchEvent,
    FinalGradeEvent,
    FuseEvent,
    GenerateEvent,
    LexicalSearchEvent,
    MemoryItem,
    PrepareEvent,
    ReadMemoryEvent,
    RewriteEvent,
    TimeWindow,
    Usage,
    WriteMemoryEvent,
)
from retrievalagent.types import Grade

__all__ = ["Components", "Nodes"]

logger = logging.getLogger("retrievalagent")
#: Longest fact the grader may have stored; a longer one is refused, not cut (a cut
#: instruction is still an instruction). Facts are stored on one line, as data.
MAX_FACT_CHARS = 300
#: The grade used when the grader's reply cannot be used: nothing is sufficient or stored.
CONSERVATIVE_GRADE = Grade(
    sufficient=False,
    confidence=0.0,
    memory_worth_storing=False,
    memory_confidence=0.0,
    memory_fact="",
)


def _ms(start: float) -> float:
    return round((time.perf_counter() - start) * 1e3, 3)


class _Failing(TypedDict, total=False):
    """What an event that can report an error has (see ``retrievalagent.trace``)."""

    error: str
    error_type: str


class _Metered(TypedDict, total=False):
    """What an event that can report model calls has."""

    usage: Usage


_F = TypeVar("_F", bound=_Failing)
_M = TypeVar("_M", bound=_Metered)


def _failure(exc: BaseException) -> tuple[str, str]:
    """An error as a trace event reports it: its message (or kind), and its kind."""
    kind = "timeout" if isinstance(exc, TimeoutError | asyncio.TimeoutError) else type(exc).__name__
    return str(exc) or kind, kind


def _failed(event: _F, exc: BaseException) -> _F:
    """``event`` with the ``error`` and ``error_type`` of ``exc``."""
    event["error"], event["error_type"] = _failure(exc)
    return event


#: What a node logs when it goes on without a model reply it cannot use.
_GRADE_CONSERVATIVELY = "grader reply unusable, grading conservatively"
_ANSWER_SEPARATELY = "inline answer+grade reply unusable, answering separately"


def _unusable_reply(exc: Exception, consequence: str | None = None) -> Exception:
    """A model reply that does not parse or validate (or a bug in the role): the node goes
    on without it (logging ``consequence``) and returns the error for its trace event. A
    model that cannot be reached (``ModelError``, after its retries) fails the turn."""
    if isinstance(exc, ModelError):
        raise exc
    if consequence is not None:
        logger.warning("%s: %s: %s", consequence, type(exc).__name__, exc)
    return exc


def _with_usage(event: _M, meter: Meter) -> _M:
    """Put the model calls a node made (tokens, time) into its trace event as ``usage``."""
    if (usage := meter.event()) is not None:
        event["usage"] = usage
    return event


def _one_line(text: str) -> str:
    return " ".join(text.split())


_SEARCH = "memory search"  # what a recall that times out is called in its error


@dataclass(frozen=True)
class _ReadPlan:
    """One recall: who reads, what to ask, how long to wait, when the node began (and the
    time the question is asked, which "yesterday" is relative to)."""

    reader: MemoryReader
    request: RecallRequest
    timeout: float
    start: float
    now: datetime


@dataclass(frozen=True)
class _Write:
    """One background memory write: its sync and async form, whose next turn waits for it
    (``owner``; "" for none), and what it writes (for a failure's late trace event)."""

    label: str
    sync: Callable[[], Any]
    async_: Callable[[], Awaitable[Any]]
    owner: str
    what: str


def _asked_at(config: RunnableConfig) -> str:
    """When the turn counts as asked: ``configurable.now`` (an ISO 8601 time or a datetime,
    to replay a recorded conversation), else now. "Yesterday" and "today" are reckoned from
    it, in its time zone (the user's, when it gives one), and the exchange is remembered
    as said then."""
    given = ((config or {}).get("configurable") or {}).get("now")
    try:
        return parse_time(given, "configurable.now", past=True).isoformat()
    except (TypeError, ValueError) as exc:
        raise ConfigError(str(exc)) from None


def _asked_zone(config: RunnableConfig) -> str:
    """The IANA name of ``configurable.now``'s zone ("" without one, or for an offset): the
    ISO time in ``asked_at`` keeps only its offset, and a date asked about in another
    season (January, asked in July in New York) needs that season's."""
    given = ((config or {}).get("configurable") or {}).get("now")
    zone = given.tzinfo if isinstance(given, datetime) else None
    return zone.key if isinstance(zone, ZoneInfo) else ""


def _who_and_when(config: RunnableConfig) -> tuple[str, str, str]:
    """The turn's user, time and time zone name, from its config (``ConfigError`` naming a
    bad one)."""
    return user_id_from_config(config), _asked_at(config), _asked_zone(config)


def _written(memory: MemoryBackend, records: Sequence[MemoryRecord]) -> _Write:
    """The background write of the memories the grade chose, one after the other in the
    order said: those of one message share their time, and a listing orders them by when
    each was stored (written at once, they came back in any order)."""

    def sync() -> None:
        for record in records:
            memory.add(record)

    async def async_() -> None:
        for record in records:
            await memory.aadd(record)

    what = " ".join(record.fact for record in records)
    return _Write(f"{memory.name}: {what}", sync, async_, records[0].user_id, what)


def _recalled(state: AgentState) -> set[tuple[str, str, Any]]:
    """What this turn recalled, as ``_said_as`` tells a memory: one recalled and learned in
    this conversation is nothing new. Said again in another, it is written again so that it
    belongs to the newer one (erasing the older conversation must not take a preference the
    user still states)."""
    return {
        (m.get("kind", "search_fact"), m.get("text", "").strip().lower(), m.get("thread_id"))
        for m in state.get("memories") or []
    }


def _said_as(record: MemoryRecord) -> tuple[str, str, Any]:
    return (record.kind, record.fact.strip().lower(), record.metadata["thread_id"])


def _thread_of(config: RunnableConfig | None) -> str:
    """The conversation a turn belongs to ("" when the caller named none)."""
    return str(((config or {}).get("configurable") or {}).get("thread_id") or "")


def _turn_time(state: AgentState) -> str:
    return state.get("asked_at") or iso(datetime.now(timezone.utc))


def _turn_moment(state: AgentState) -> datetime:
    """When the turn is asked, in its named zone when ``configurable.now`` had one, so the
    days it names and the dates it shows are reckoned as ``recall(now=...)`` reckons them."""
    moment = datetime.fromisoformat(_turn_time(state))
    try:
        return moment.astimezone(ZoneInfo(zone)) if (zone := state.get("asked_zone")) else moment
    except (ZoneInfoNotFoundError, ValueError):
        return moment


def _local(at: str, zone: tzinfo | None) -> str:
    """``at`` in the zone the turn was asked in: an answer that dates what the user said
    gives the day the prompt's memory lines give (8 pm in New York is the next day in UTC)."""
    try:
        moment = datetime.fromisoformat(at)
        return moment.astimezone(zone).isoformat() if moment.tzinfo and zone else at
    except (ValueError, OverflowError):  # unreadable, or at the calendar's first day
        return at


def _said(message: BaseMessage, position: int) -> Said | None:
    """A turn's message as conversation memory keeps it. Metadata it cannot keep (not a
    dict, not JSON) is left out, not allowed to fail the answer: the message is then known
    by its id and role, as the agent's own are."""
    try:
        return said_of(message, position)
    except ValueError:
        return said_of(message.model_copy(update={"additional_kwargs": {}}), position)


def _item(hit: MemoryHit) -> MemoryItem:
    """A recalled memory as the read_memory trace event lists it."""
    item: MemoryItem = {
        "id": hit.id,
        "kind": hit.kind,
        "key": hit.key,
        "text": hit.text,
        "score": round(hit.score, 4),
        "matched": hit.matched,
    }
    if hit.kind == CONVERSATION:
        item["thread_id"], item["at"] = hit.thread_id, hit.at
        if hit.alone is not None:
            item["relevance"] = round(hit.alone, 4)
    return item


@dataclass(frozen=True)
class _InlineReply:
    """What the inline call (grading="inline": answer and grade at once) gave: both, or
    the error after which the turn answers the plain way."""

    answer: Answer | None = None
    grade: Grade | None = None
    error: Exception | None = None


@dataclass
class Components:
    """What the nodes work with; built once by ``init_agent``."""

    settings: Settings
    searcher: HybridSearcher
    answerer: Answerer
    grader: Grader
    rewriter: Rewriter
    memory: MemoryBackend | None = None
    reader: MemoryReader | None = None  # what a turn recalls (with a memory backend)
    writer: ConversationWriter | None = None  # conversation memory (unless turned off)
    writes: BackgroundWrites = field(default_factory=BackgroundWrites)
    trace_log: TraceLog | None = None
    collection: str = ""
    titler: ThreadTitler | None = None  # names a new thread (LLM or the question)
    keeps_threads: bool = False  # a checkpointer keeps each thread's messages
    inline: LLMInlineAnswerer | None = None  # grading="inline": answer + grade in one call


class Nodes:
    """Node bodies bound to one agent's components."""

    def __init__(self, components: Components) -> None:
        self.components = components
        self.settings = components.settings

    @property
    def recall_in_parallel(self) -> bool:
        """Whether memory recall runs beside the dense search (only with a memory backend:
        without one there is nothing to overlap, and the graph runs in one line)."""
        return self.components.memory is not None

    # -- prepare ---------------------------------------------------------------------
    def prepare(self, state: AgentState, config: RunnableConfig) -> dict[str, Any]:
        """Start a turn: find the question, reset per-turn fields, name the thread."""
        start, question, update = time.perf_counter(), *self._question(state)
        who = _who_and_when(config)  # bad input fails before the title's model call
        with metering() as meter:
            title = state.get("title") or self._title(question, config)
        return self._prepared(state, who, question, title, update, start, meter)

    async def aprepare(self, state: AgentState, config: RunnableConfig) -> dict[str, Any]:
        """Async :meth:`prepare`: no thread hop before retrieval (the time to first token)."""
        start, question, update = time.perf_counter(), *self._question(state)
        who = _who_and_when(config)
        with metering() as meter:
            title = state.get("title") or await self._atitle(question, config)
        return self._prepared(state, who, question, title, update, start, meter)

    def _question(self, state: AgentState) -> tuple[str, dict[str, Any]]:
        messages = list(state.get("messages") or [])
        update: dict[str, Any] = {}
        if messages and isinstance(messages[-1], HumanMessage):
            asked = content_text(messages[-1].content)  # a chat UI sends content blocks
            if not asked.strip() and not isinstance(messages[-1].content, str):
                raise ConfigError("the last human message has no text block to answer")
            question = clean_question(asked, self.settings.max_question_chars)
        else:
            raw = state.get("question")
            if raw is None or (isinstance(raw, str) and not raw.strip()):
                raise ValueError("the input needs a non-empty 'question' or a final human message")
            question = clean_question(raw, self.settings.max_question_chars)
            update["messages"] = [HumanMessage(question)]
        return question, update

    def _prepared(
        self,
        state: AgentState,
        who: tuple[str, str, str],
        question: str,
        title: str,
        update: dict[str, Any],
        start: float,
        meter: Meter,
    ) -> dict[str, Any]:
        user_id, asked_at, asked_zone = who
        event: PrepareEvent = {"node": "prepare", "user_id": user_id, "ms": _ms(start)}
        update.update(
            {
                "asked_at": asked_at,
                "asked_zone": asked_zone,
                "question": question,
                "query": question,
                "user_id": user_id,
                "title": title,
                "memory_context": "",
                "memory_terms": "",
                "memories": [],
                "dense_hits": [],
                "lexical_hits": [],
                "sources": [],
                "answer": "",
                "generated_by": "",
                "llm_used": False,
                "grade": {},
                "inline_grade": {},
                "usage": {},
                "memory_fact": "",
                "attempts": 0,
                "tried_queries": [question],
                "trace": Overwrite([_with_usage(event, meter)]),
            }
        )
        if "rewrite_history" not in state:
            update["rewrite_history"] = []
        return update

    def _title(self, question: str, config: RunnableConfig) -> str:
        """A new thread's title: one short model call when the turn belongs to a thread."""
        thread_id = _thread_of(config)
        if self.components.titler is None or not thread_id:
            return question_title(question)
        return self.components.titler.title(question, config)

    async def _atitle(self, question: str, config: RunnableConfig) -> str:
        thread_id = _thread_of(config)
        if self.components.titler is None or not thread_id:
            return question_title(question)
        return await self.components.titler.atitle(question, config)

    # -- read_memory -----------------------------------------------------------------
    def _after_read(
        self, recollection: ReadResult, plan: _ReadPlan, waited_ms: float
    ) -> dict[str, Any]:
        kept = recollection.kept
        said = [
            dated_line(h.text, h.at, str(h.metadata.get("title") or ""), plan.now.tzinfo)
            for h in recollection.conversations
        ]
        context = memory_context(
            [h.text for h in recollection.facts],
            [h.text for h in recollection.preferences],
            said,
            today=plan.now.strftime("%Y-%m-%d (%a)"),
        )
        shown = [
            *(h.text for h in recollection.facts),
            *(h.text for h in recollection.preferences),
            *said,
        ]
        event: ReadMemoryEvent = {
            "node": "read_memory",
            # What was recalled, one "- " line each (the spec's shape); the prompt's wording
            # around it is in memory_context.
            "memories": "\n".join(f"- {text}" for text in shown),
            "items": [_item(h) for h in kept],
            "n_kept": len(kept),
            "n_facts": len(recollection.facts),
            "n_preferences": len(recollection.preferences),
            "n_conversations": len(recollection.conversations),
            "n_scanned": recollection.scanned,
            "threshold": self.settings.memory_relevance_threshold,
            "conversation_threshold": self.settings.conversation_relevance_threshold,
            "best_score": recollection.best_score,
            "best_similarity": recollection.best_similarity,
            "best_conversation": recollection.best_conversation,
            "backend": plan.reader.memory.name,
            "waited_for_writes_ms": round(waited_ms, 3),
            "ms": _ms(plan.start),
        }
        if (when := plan.request.time) is not None:
            event["time"] = TimeWindow(
                start=when.start,
                end=when.end,
                sessions_back=when.sessions_back,
                present=when.present,
            )
        if recollection.skipped:
            event["skipped"] = recollection.skipped
        if recollection.malformed:
            event["n_malformed"] = recollection.malformed
        return {
            "memory_context": context,
            "memory_terms": recollection.terms,
            "memories": [
                RecalledMemory(
                    id=h.id,
                    text=h.text,
                    score=h.score,
                    kind=h.kind,
                    key=h.key,
                    alias=alias_of(h),
                    thread_id=h.thread_id,
                    at=h.at,
                )
                for h in kept
            ],
            "trace": [event],
        }

    def _read_plan(self, state: AgentState, config: RunnableConfig) -> _ReadPlan | None:
        """What to recall for this turn, or None without a memory backend."""
        if (reader := self.components.reader) is None:
            return None
        start, now = time.perf_counter(), _turn_moment(state)
        thread_id = _thread_of(config)
        # the turns the answer prompt will show (the history its token budget keeps): one
        # the budget trims from a long thread is recalled like any other past exchange
        shown = history_for_model(state.get("messages") or [], self.settings.history_tokens)
        seen = [str(m.id) for m in shown if getattr(m, "id", None)]
        # history given without ids (``chat``'s pairs) has new ones each call: its exchanges
        # are known by their words too, as memory writes them
        said = [s for i, m in enumerate(shown) if (s := _said(m, i)) is not None]
        if said:
            written = ConversationWriter.exchanges(
                said, user_id=state["user_id"], thread_id=thread_id
            )
            seen += [r.text for r in written]
        request = reader.request(
            state["question"], state["user_id"], thread_id=thread_id, seen=seen, now=now
        )
        return _ReadPlan(reader, request, self.settings.memory_timeout, start, now)

    @staticmethod
    def _read_skipped() -> dict[str, Any]:
        event: ReadMemoryEvent = {
            "node": "read_memory",
            "memories": "",
            "skipped": "no_memory_backend",
        }
        return {"trace": [event]}

    @staticmethod
    def _read_failed(exc: Exception, plan: _ReadPlan) -> dict[str, Any]:
        logger.warning("memory recall failed: %s: %s", type(exc).__name__, exc)
        error, kind = _failure(exc)
        event: ReadMemoryEvent = {
            "node": "read_memory",
            "error": error,
            "error_type": kind,
            "skipped": "error",
            "memories": "",
            "ms": _ms(plan.start),
        }
        return {"trace": [event]}

    def read_memory(self, state: AgentState, config: RunnableConfig) -> dict[str, Any]:
        if (plan := self._read_plan(state, config)) is None:
            return self._read_skipped()
        reader, request = plan.reader, plan.request
        try:
            # read-your-writes: what this user's previous turn stored is seen by this one
            waited = self.components.writes.wait_for(request.user_id, plan.timeout)
            found = call_with_timeout(lambda: reader.read(request), plan.timeout, _SEARCH)
        except Exception as exc:
            return self._read_failed(exc, plan)
        return self._after_read(found, plan, waited)

    async def aread_memory(self, state: AgentState, config: RunnableConfig) -> dict[str, Any]:
        if (plan := self._read_plan(state, config)) is None:
            return self._read_skipped()
        try:
            waited = await self.components.writes.await_for(plan.request.user_id, plan.timeout)
            found = await asyncio.wait_for(plan.reader.aread(plan.request), plan.timeout)
        except Exception as exc:
            if isinstance(exc, TimeoutError | asyncio.TimeoutError) and not str(exc):
                # asyncio's says nothing: say what invoke's does
                exc = TimeoutError(f"{_SEARCH} took longer than {plan.timeout:g}s")
            return self._read_failed(exc, plan)
        return self._after_read(found, plan, waited)

    # -- dense_search ------------------------------------------------------------------
    def _plan(self, state: AgentState, config: RunnableConfig) -> SearchPlan:
        """This attempt's search: its query and recalled terms, sized as the call's
        ``configurable`` says where it sets a ``PER_CALL`` setting, else as the agent's."""
        given = call_settings((config or {}).get("configurable"))
        return self.components.searcher.plan(
            state["query"],
            given.get("top_k", self.settings.top_k),
            state.get("memory_terms") or "",
            fetch_k=given.get("fetch_k"),
            rerank_k=given.get("rerank_k"),
            memory_weight=given.get("memory_term_weight"),
        )

    def _after_dense(
        self, hits: list[Hit], embed_ms: float, start: float, attempt: int
    ) -> dict[str, Any]:
        event: DenseSearchEvent = {
            "node": "dense_search",
            "hits": len(hits),
            "embed_ms": embed_ms,
            "search_ms": _ms(start),
            "attempt": attempt,
        }
        return {"dense_hits": [ScoredId(id=h.id, score=h.score) for h in hits], "trace": [event]}

    def dense_search(self, state: AgentState, config: RunnableConfig) -> dict[str, Any]:
        searcher, plan = self.components.searcher, self._plan(state, config)
        t0 = time.perf_counter()
        vector = searcher.embedder.embed(plan.query)
        embed_ms, t1 = _ms(t0), time.perf_counter()
        hits = searcher.dense_hits(vector, searcher.conditions(state.get("filter")), plan.depth)
        return self._after_dense(hits, embed_ms, t1, state.get("attempts", 0))

    async def adense_search(self, state: AgentState, config: RunnableConfig) -> dict[str, Any]:
        searcher, plan = self.components.searcher, self._plan(state, config)
        t0 = time.perf_counter()
        vector = await searcher.embedder.aembed(plan.query)
        embed_ms, t1 = _ms(t0), time.perf_counter()
        conditions = searcher.conditions(state.get("filter"))
        hits = await asyncio.to_thread(searcher.dense_hits, vector, conditions, plan.depth)
        return self._after_dense(hits, embed_ms, t1, state.get("attempts", 0))

    # -- lexical_search ------------------------------------------------------------------
    async def alexical_search(self, state: AgentState, config: RunnableConfig) -> dict[str, Any]:
        return await asyncio.to_thread(self.lexical_search, state, config)

    def lexical_search(self, state: AgentState, config: RunnableConfig) -> dict[str, Any]:
        start = time.perf_counter()
        searcher, plan = self.components.searcher, self._plan(state, config)
        hits = searcher.lexical_hits(
            plan.query,
            plan.memory_terms,
            searcher.conditions(state.get("filter")),
            plan.memory_weight,
            plan.depth,
        )
        event: LexicalSearchEvent = {
            "node": "lexical_search",
            "hits": len(hits),
            "ms": _ms(start),
            "attempt": state.get("attempts", 0),
        }
        if plan.memory_terms:
            event["memory_terms"] = plan.memory_terms
        return {"lexical_hits": [ScoredId(id=h.id, score=h.score) for h in hits], "trace": [event]}

    # -- fuse ----------------------------------------------------------------------------
    async def afuse(self, state: AgentState, config: RunnableConfig) -> dict[str, Any]:
        return await asyncio.to_thread(self.fuse, state, config)

    def fuse(self, state: AgentState, config: RunnableConfig) -> dict[str, Any]:
        searcher, plan = self.components.searcher, self._plan(state, config)
        dense = [Hit(h["id"], h["score"]) for h in state.get("dense_hits") or []]
        lexical = [Hit(h["id"], h["score"]) for h in state.get("lexical_hits") or []]
        # Fusion, the winners' payloads (a passage deleted since the search is left out),
        # and with a reranker the first rerank_k reordered (for the user's question), as
        # HybridSearcher.search ranks them.
        with metering() as meter:
            ranked = searcher.rank(plan, dense, lexical, question=state["question"])
        sources = [to_source(hit) for hit in ranked.hits]
        event: FuseEvent = {
            "node": "fuse",
            "method": searcher.fuser.name,
            "dense_hits": len(dense),
            "lexical_hits": len(lexical),
            "fused": len(sources),
            "ms": round(ranked.fuse_ms + ranked.payload_ms, 3),
            "top_sources": [s["source"] for s in sources[:3]],
        }
        if rerank_event := ranked.rerank:
            _with_usage(rerank_event, meter)  # an LLM reranker's call, as the other roles'
            rerank_event["attempt"] = state.get("attempts", 0)
            rerank_event["top_sources"] = event["top_sources"]
        return {"sources": sources, "trace": [event, rerank_event] if rerank_event else [event]}

    # -- generate ------------------------------------------------------------------------
    def _request(self, state: AgentState, answer: str = "") -> AnswerRequest:
        dense_scores = {h["id"]: h["score"] for h in state.get("dense_hits") or []}
        zone = _turn_moment(state).tzinfo
        return AnswerRequest(
            question=state["question"],
            query=state.get("query") or state["question"],
            sources=list(state.get("sources") or []),
            history=history_for_model(state.get("messages") or [], self.settings.history_tokens),
            memory_context=state.get("memory_context") or "",
            memory_terms=state.get("memory_terms") or "",
            known_aliases=tuple(m["alias"] for m in state.get("memories") or [] if m.get("alias")),
            earlier=tuple(
                (_local(m.get("at") or "", zone), m["text"])
                for m in state.get("memories") or []
                if m.get("kind") == CONVERSATION
            ),
            user_id=state.get("user_id") or "",
            answer=answer,
            dense_scores=dense_scores,
        )

    def _after_generate(
        self,
        request: AnswerRequest,
        answer: Answer,
        start: float,
        meter: Meter,
        inline: _InlineReply | None = None,
    ) -> dict[str, Any]:
        streamed = self.components.answerer.streams_tokens and inline is None
        if not streamed:
            self._stream_text(answer.text)
        event: GenerateEvent = {
            "node": "generate",
            "generated_by": answer.generated_by,
            "llm": answer.llm,
            "n_sources": len(request.sources),
            "history_messages": len(request.history),
            "search_hints": bool(request.memory_context),
            "ms": _ms(start),
        }
        update: dict[str, Any] = {
            "answer": answer.text,
            "generated_by": answer.generated_by,
            "llm_used": answer.llm,
            "inline_grade": {},
        }
        if inline is not None:
            event["grading"] = "inline"
            if inline.grade is not None:
                update["inline_grade"] = inline.grade.model_dump()
            if inline.error is not None:  # the inline reply was unusable: answered the plain way
                _failed(event, inline.error)["fallback"] = "separate"
        update["trace"] = [_with_usage(event, meter)]
        return update

    @staticmethod
    def _stream_text(text: str) -> None:
        """Emit an answer that was not produced token by token as word-sized stream pieces."""
        try:
            writer = get_stream_writer()
        except RuntimeError:  # not running inside a graph
            return
        words = text.split(" ")
        for i, word in enumerate(words):
            writer({"token": word + (" " if i < len(words) - 1 else "")})

    def generate(self, state: AgentState, config: RunnableConfig) -> dict[str, Any]:
        start, request = time.perf_counter(), self._request(state)
        with metering() as meter:
            inline: _InlineReply | None = None
            if (model := self.components.inline) is not None:
                try:
                    inline = _InlineReply(*model.answer_and_grade(request, config))
                except Exception as exc:
                    inline = _InlineReply(error=_unusable_reply(exc, _ANSWER_SEPARATELY))
            if (answer := inline.answer if inline else None) is None:
                answer = self.components.answerer.answer(request, config)
        return self._after_generate(request, answer, start, meter, inline)

    async def agenerate(self, state: AgentState, config: RunnableConfig) -> dict[str, Any]:
        start, request = time.perf_counter(), self._request(state)
        with metering() as meter:
            inline: _InlineReply | None = None
            if (model := self.components.inline) is not None:
                try:
                    inline = _InlineReply(*await model.aanswer_and_grade(request, config))
                except Exception as exc:
                    inline = _InlineReply(error=_unusable_reply(exc, _ANSWER_SEPARATELY))
            if (answer := inline.answer if inline else None) is None:
                answer = await self.components.answerer.aanswer(request, config)
        return self._after_generate(request, answer, start, meter, inline)

    # -- final_grade -----------------------------------------------------------------------
    def _after_grade(
        self,
        state: AgentState,
        grade: Grade,
        start: float,
        error: BaseException | None,
        meter: Meter | None = None,
    ) -> dict[str, Any]:
        threshold = self.settings.memory_storage_threshold
        fact = _one_line(grade.memory_fact)
        store = bool(
            grade.memory_worth_storing
            and fact
            and len(fact) <= MAX_FACT_CHARS
            and grade.memory_confidence >= threshold
        )
        event: FinalGradeEvent = {
            "node": "final_grade",
            "sufficient": grade.sufficient,
            "confidence": round(grade.confidence, 4),
            "memory_should_store": store,
            "memory_confidence": round(grade.memory_confidence, 4),
            "memory_worth_storing": grade.memory_worth_storing,
            "memory_kind": grade.memory_kind,
            "memory_key": grade.memory_key,
            "storage_threshold": threshold,
            "attempt": state.get("attempts", 0),
            "ms": _ms(start),
        }
        if len(fact) > MAX_FACT_CHARS:
            event["memory_fact_rejected"] = f"longer than {MAX_FACT_CHARS} characters"
        if error is not None:
            _failed(event, error)["fallback"] = "conservative"
        if meter is None:
            event["grading"] = "inline"  # graded by the generate call: no call here
        else:
            _with_usage(event, meter)
        update: dict[str, Any] = {
            "grade": grade.model_dump(),
            "trace": [event],
            "memory_fact": fact if store else "",
        }
        if not grade.sufficient and state.get("attempts", 0) > 0:  # a rewrite that failed
            history = remember_failed_rewrite(state.get("rewrite_history"), state["query"])
            if history is not None:
                update["rewrite_history"] = history
        return update

    def _inline_grade(self, state: AgentState, start: float) -> dict[str, Any] | None:
        """The update for a grade the generate call already returned (inline grading)."""
        if not (fields := state.get("inline_grade")):
            return None
        return self._after_grade(state, Grade.model_validate(fields), start, None)

    def final_grade(self, state: AgentState, config: RunnableConfig) -> dict[str, Any]:
        start, request = time.perf_counter(), self._request(state, state.get("answer", ""))
        if (inline := self._inline_grade(state, start)) is not None:
            return inline
        with metering() as meter:
            try:
                grade, error = self.components.grader.grade(request, config), None
            except Exception as exc:
                grade, error = CONSERVATIVE_GRADE, _unusable_reply(exc, _GRADE_CONSERVATIVELY)
        return self._after_grade(state, grade, start, error, meter)

    async def afinal_grade(self, state: AgentState, config: RunnableConfig) -> dict[str, Any]:
        start, request = time.perf_counter(), self._request(state, state.get("answer", ""))
        if (inline := self._inline_grade(state, start)) is not None:
            return inline
        with metering() as meter:
            try:
                grade, error = await self.components.grader.agrade(request, config), None
            except Exception as exc:
                grade, error = CONSERVATIVE_GRADE, _unusable_reply(exc, _GRADE_CONSERVATIVELY)
        return self._after_grade(state, grade, start, error, meter)

    def after_grade(self, state: AgentState, config: RunnableConfig) -> str:
        """Route: another retrieval with a rewritten query (at most ``max_retries``, the
        call's own when its ``configurable`` sets it), or finish."""
        grade = state.get("grade") or {}
        given = call_settings((config or {}).get("configurable"))
        retries = given.get("max_retries", self.settings.max_retries)
        if not grade.get("sufficient", True) and state.get("attempts", 0) < retries:
            return "rewrite"
        return "write_memory"

    # -- rewrite ---------------------------------------------------------------------------
    def _tried(self, state: AgentState) -> list[str]:
        """This turn's queries, then every rewrite that already failed in this thread."""
        return tried_queries(state.get("tried_queries"), state.get("rewrite_history"))

    def _after_rewrite(
        self,
        state: AgentState,
        query: str | None,
        start: float,
        meter: Meter,
        error: BaseException | None = None,
    ) -> dict[str, Any]:
        event: RewriteEvent = {
            "node": "rewrite",
            "query": query,
            "ms": _ms(start),
            "attempt": state.get("attempts", 0) + 1,
        }
        _with_usage(event, meter)
        if error is not None:
            _failed(event, error)
        if query and is_repeat(query, self._tried(state)):  # never run a tried query again
            event["query"], event["repeated"] = None, query
            query = None
        if not query:
            event["skipped"] = "repeated_query" if "repeated" in event else "no_new_query"
            return {"trace": [event], "query": state["query"]}
        return {
            "query": query,
            "attempts": state.get("attempts", 0) + 1,
            "tried_queries": [*(state.get("tried_queries") or []), query],
            "trace": [event],
        }

    def rewrite(self, state: AgentState, config: RunnableConfig) -> dict[str, Any]:
        start, request = time.perf_counter(), self._request(state, state.get("answer", ""))
        error: Exception | None = None
        with metering() as meter:
            try:
                query = self.components.rewriter.rewrite(request, self._tried(state), config)
            except Exception as exc:
                query, error = None, _unusable_reply(exc)
        return self._after_rewrite(state, query, start, meter, error)

    async def arewrite(self, state: AgentState, config: RunnableConfig) -> dict[str, Any]:
        start, request = time.perf_counter(), self._request(state, state.get("answer", ""))
        error: Exception | None = None
        with metering() as meter:
            try:
                query = await self.components.rewriter.arewrite(request, self._tried(state), config)
            except Exception as exc:
                query, error = None, _unusable_reply(exc)
        return self._after_rewrite(state, query, start, meter, error)

    def after_rewrite(self, state: AgentState) -> Sequence[str]:
        last = (state.get("trace") or [{}])[-1]
        if last.get("node") == "rewrite" and not last.get("skipped"):
            if self.recall_in_parallel:
                return ["dense_search", "lexical_search"]
            return ["dense_search"]  # one line of steps: lexical follows dense
        return ["write_memory"]

    # -- write_memory ------------------------------------------------------------------------
    @staticmethod
    def _reply(state: AgentState) -> AIMessage:
        """The turn's answer as the thread keeps it (with an id, which conversation memory
        records as where the exchange came from)."""
        return AIMessage(
            state.get("answer", ""),
            id=uuid.uuid4().hex,
            response_metadata={
                "generated_by": state.get("generated_by"),
                "llm": state.get("llm_used", False),
                "sources": [s.get("source") for s in state.get("sources") or []],
            },
        )

    def _finish(
        self, state: AgentState, event: WriteMemoryEvent, config: RunnableConfig, reply: AIMessage
    ) -> dict[str, Any]:
        messages = list(state.get("messages") or [])
        update: dict[str, Any] = {
            "messages": [
                reply,
                *fifo_removals([*messages, reply], self.settings.max_thread_messages),
            ],
            "trace": [event],
            "usage": turn_usage([*(state.get("trace") or []), event]),
        }
        if self.components.trace_log is not None:
            configurable = (config or {}).get("configurable") or {}
            self.components.trace_log.write(
                {
                    "ts": time.time(),
                    "collection": self.components.collection,
                    "thread_id": configurable.get("thread_id"),
                    "user_id": state.get("user_id"),
                    "question": state.get("question"),
                    "trace": [*(state.get("trace") or []), event],
                }
            )
        return update

    def _write_plan(
        self, state: AgentState, config: RunnableConfig
    ) -> tuple[WriteMemoryEvent, list[MemoryRecord]]:
        """The turn's ``write_memory`` event and the memories the grade's choice writes: its
        fact, and the other preferences stated with it (``_stated_with``)."""
        fact = state.get("memory_fact") or ""
        grade = state.get("grade") or {}
        if self.components.memory is None:
            return {"node": "write_memory", "skipped": "no_memory_backend"}, []
        if not fact:
            reason = (
                "not_worth_storing" if not grade.get("memory_worth_storing") else "below_threshold"
            )
            if reason != "not_worth_storing" and (
                len(_one_line(str(grade.get("memory_fact") or ""))) > MAX_FACT_CHARS
            ):
                reason = "fact_too_long"
            return {
                "node": "write_memory",
                "skipped": reason,
                "memory_confidence": grade.get("memory_confidence", 0.0),
                "threshold": self.settings.memory_storage_threshold,
            }, []
        record = self._record(state, fact, grade, config)
        stated = self._stated_with(state, record) if record.kind == PREFERENCE else [record]
        recalled = _recalled(state)
        new = [r for r in stated if _said_as(r) not in recalled]
        event: WriteMemoryEvent
        if record in new:
            event = {
                "node": "write_memory",
                "scheduled": True,
                "backend": self.components.memory.name,
                "kind": record.kind,
                "key": record.key,
                "fact": fact,
            }
        else:
            event = {"node": "write_memory", "skipped": "already_known", "fact": fact}
        if beside := [r.fact for r in new if r is not record]:
            event["also"] = beside
        return event, new

    def _stated_with(self, state: AgentState, record: MemoryRecord) -> list[MemoryRecord]:
        """The grade's preference and the others the question states beside it (a grade
        holds one: "I prefer answers in German. Keep answers short." is two), in the order
        said, by the offline rules when they find the grade's own: each subject's last."""
        shown = history_for_model(state.get("messages") or [], self.settings.history_tokens)
        before = last_stated(shown)  # as the grader saw it (``_request``)
        stated = by_subject(state["question"], before=before)
        if (record.key, record.fact) not in {(p.subject, p.instruction) for p in stated}:
            return [record]
        return [
            record
            if p.subject == record.key
            else replace(record, fact=p.instruction, key=p.subject, metadata=dict(record.metadata))
            for p in stated
        ]

    def _record(
        self, state: AgentState, fact: str, grade: dict[str, Any], config: RunnableConfig
    ) -> MemoryRecord:
        """The memory to write, keyed so that a newer one on the same alias or subject
        replaces the older (see ``memory._keys``). It carries its conversation and time,
        so that erasing that conversation erases what was learned in it."""
        kind = kind_of(grade.get("memory_kind"))
        given = _one_line(str(grade.get("memory_key") or ""))[:80]
        if kind == PREFERENCE:
            key, alias = subject_of(given, fact), ""
        else:
            alias = typed_alias(self.components.searcher.encoder, given, state["question"], fact)
            key = alias_key(self.components.searcher.encoder, alias) if alias else ""
        return MemoryRecord(
            fact=fact,
            question=state["question"],
            answer=state.get("answer", ""),
            user_id=state["user_id"],
            metadata={
                "collection": self.components.collection,
                "thread_id": _thread_of(config),
                "at": _turn_time(state),
            },
            kind=kind,
            key=key,
            alias=alias if key else "",
        )

    def _writes(
        self, state: AgentState, config: RunnableConfig, reply: AIMessage
    ) -> tuple[WriteMemoryEvent, list[_Write]]:
        """The turn's trace event and its background writes: a search fact or preference
        the grade chose, the exchange, and (with an extractor) the facts the user stated."""
        event, records = self._write_plan(state, config)
        memory = self.components.memory
        writes = [_written(memory, records)] if memory is not None and records else []
        conversation, more = self._conversation_writes(state, config, reply)
        if memory is not None:
            event["conversation"] = conversation
        return event, writes + more

    def _conversation_writes(
        self, state: AgentState, config: RunnableConfig, reply: AIMessage
    ) -> tuple[ConversationWrite, list[_Write]]:
        """The exchange this turn adds to conversation memory (and the facts in it)."""
        writer, user = self.components.writer, state["user_id"]
        if writer is None:
            return {"skipped": "off" if self.components.memory else "no_memory_backend"}, []
        history = list(state.get("messages") or [])
        asked = next(
            (i for i in range(len(history) - 1, -1, -1) if isinstance(history[i], HumanMessage)),
            None,
        )
        question = history[asked] if asked is not None else None
        # the reply this turn follows: a turn asked again after a cancelled copy of it
        # follows the same one, and replaces that copy in memory
        after = next(
            (str(m.id or "") for m in reversed(history[: asked or 0]) if isinstance(m, AIMessage)),
            "",
        )
        said = [s for i, m in enumerate([question, reply]) if m is not None and (s := _said(m, i))]
        if not any(s.role == "assistant" for s in said):
            return {"skipped": "no_answer"}, []
        where: dict[str, Any] = {
            "user_id": user,
            "thread_id": _thread_of(config),
            "title": state.get("title") or "",
            "at": _turn_time(state),
        }
        # only a kept thread can hold a cancelled turn's question; elsewhere each turn is its
        # own exchange
        kept = self.components.keeps_threads and bool(where["thread_id"])
        # a secret pasted in an earlier turn the model saw is masked in this reply too
        shown = history_for_model(history[: asked or 0], self.settings.history_tokens)
        earlier = [s for i, m in enumerate(shown) if (s := _said(m, i)) is not None]
        records = writer.exchanges(said, **where, after=after if kept else None, earlier=earlier)
        ticket = writer.ticket()  # a forget of this conversation from now on cancels these
        writes = [
            _Write(
                f"conversation: {state['question']}",
                lambda: writer.store_now(records, ticket),
                lambda: writer.astore_now(records, ticket),
                user,
                records[0].text[:200],
            )
        ]
        # the question is the user's, whatever name its message carries
        asked_by_user = [replace(s, name="") if s.role == "user" else s for s in said]
        if wants_facts := writer.wants_facts(asked_by_user, user):
            writes.append(  # not waited for by the user's next turn: a model call
                _Write(
                    f"conversation facts: {state['question']}",
                    lambda: writer.store_facts(asked_by_user, **where, ticket=ticket),
                    lambda: writer.astore_facts(asked_by_user, **where, ticket=ticket),
                    "",
                    "facts about the user",
                )
            )
        event: ConversationWrite = {
            "scheduled": True,
            "exchanges": len(records),
            "secrets_masked": sum(r.masked for r in records),
            "facts": wants_facts,
        }
        return event, writes

    def _write_failed(self, state: AgentState, what: str) -> Callable[[BaseException], None]:
        """Where a background write's failure goes: the log (by BackgroundWrites), the drain
        report, and the trace log as a late ``write_memory`` event of the same turn."""

        def hook(exc: BaseException) -> None:
            if self.components.trace_log is None:
                return
            event = _failed(WriteMemoryEvent(node="write_memory"), exc)
            event["fact"], event["late"] = what, True
            self.components.trace_log.write(
                {
                    "ts": time.time(),
                    "collection": self.components.collection,
                    "user_id": state.get("user_id"),
                    "question": state.get("question"),
                    "trace": [event],
                }
            )

        return hook

    def write_memory(self, state: AgentState, config: RunnableConfig) -> dict[str, Any]:
        start, reply = time.perf_counter(), self._reply(state)
        event, writes = self._writes(state, config, reply)
        for write in writes:
            waited = self.components.writes.submit_thread(
                write.sync, write.label, self._write_failed(state, write.what), owner=write.owner
            )
            event["waited_ms"] = round(event.get("waited_ms", 0.0) + waited, 3)
            event["mode"] = "thread"
        event["ms"] = _ms(start)
        return self._finish(state, event, config, reply)

    async def awrite_memory(self, state: AgentState, config: RunnableConfig) -> dict[str, Any]:
        start, reply = time.perf_counter(), self._reply(state)
        event, writes = self._writes(state, config, reply)
        memory, background = self.components.memory, self.components.writes
        for write in writes:
            hook = self._write_failed(state, write.what)
            if memory is not None and memory.async_native:
                waited = await background.submit_task(
                    write.async_, write.label, hook, owner=write.owner
                )
                event["mode"] = "task"
            else:  # a thread outlives the event loop; the write survives asyncio.run() ending
                waited = background.submit_thread(write.sync, write.label, hook, owner=write.owner)
                event["mode"] = "thread"
            event["waited_ms"] = round(event.get("waited_ms", 0.0) + waited, 3)
        event["ms"] = _ms(start)
        return self._finish(state, event, config, reply)

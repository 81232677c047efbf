"""The nodes of the agent's graph, each with a sync and an async body.

Every node reads what it needs from the state, does its I/O, and returns a state update
that includes one trace event. Sync and async bodies share the parts that are not I/O
(``_before_*`` / ``_after_*``), so the two paths cannot drift apart.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import math
import re
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from langchain_core.messages import AIMessage, HumanMessage
from langchain_core.runnables import RunnableConfig
from langgraph.config import get_stream_writer
from langgraph.types import Overwrite

from retrievalagent._inputs import clean_question
from retrievalagent._threads import TraceLog, call_with_timeout
from retrievalagent.config import Settings
from retrievalagent.errors import ModelError
from retrievalagent.graph._history import (
    fifo_removals,
    history_for_model,
    is_repeat,
    remember_failed_rewrite,
    tried_queries,
)
from retrievalagent.graph._state import AgentState, RecalledMemory, ScoredId
from retrievalagent.memory._background import BackgroundWrites
from retrievalagent.memory._base import (
    PREFERENCE,
    MemoryBackend,
    MemoryHit,
    MemoryRecord,
    Recall,
    RecallRequest,
    kind_of,
    user_id_from_config,
)
from retrievalagent.memory._keys import alias_key, fact_targets, mapping_alias, question_keys
from retrievalagent.models._base import Answer, Answerer, AnswerRequest, Grader, Rewriter
from retrievalagent.models._llm import LLMInlineAnswerer
from retrievalagent.models._prompts import memory_context
from retrievalagent.models._usage import Meter, metering, turn_usage
from retrievalagent.persistence._titles import ThreadTitler, question_title
from retrievalagent.retrieval._searcher import HybridSearcher, to_source
from retrievalagent.retrieval._types import Hit
from retrievalagent.types import Grade

__all__ = ["Components", "Nodes"]

logger = logging.getLogger("retrievalagent")
#: Longest fact the grader may have stored; a longer one is refused, not cut (a cut
#: instruction is still an instruction). Facts are stored on one line, as data.
MAX_FACT_CHARS = 300
#: Longest recalled memory text injected into search and the prompt (longer ones are cut).
MAX_MEMORY_CHARS = 1000
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


def _error_event(node: str, exc: BaseException, **extra: Any) -> dict[str, Any]:
    kind = "timeout" if isinstance(exc, TimeoutError | asyncio.TimeoutError) else type(exc).__name__
    return {"node": node, "error": str(exc) or kind, "error_type": kind, **extra}


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


def _with_usage(event: dict[str, Any], meter: Meter) -> dict[str, Any]:
    """Put the model calls a node made (tokens, time) into its trace event as ``usage``."""
    if (usage := meter.event()) is not None:
        event["usage"] = usage
    return event


def _one_line(text: str) -> str:
    return " ".join(text.split())


def _usable_hits(raw: Any) -> tuple[list[MemoryHit], int]:
    """What a backend recalled, minus malformed hits (no finite score, no text, wrong
    types); scores clamped to [0, 1], texts put on one line and cut to MAX_MEMORY_CHARS.
    Returns the hits, best first, and how many were dropped."""
    if not isinstance(raw, list | tuple):
        return [], 1
    usable: list[MemoryHit] = []
    for hit in raw:
        try:
            score = float(hit.score)
            text = _one_line(hit.text if isinstance(hit.text, str) else "")[:MAX_MEMORY_CHARS]
            meta = hit.metadata if isinstance(hit.metadata, dict) else {}
            usable_hit = dataclasses.replace(
                hit, id=str(hit.id), text=text, score=min(1.0, max(0.0, score)), metadata=meta
            )
        except (AttributeError, TypeError, ValueError, OverflowError):
            continue
        if math.isfinite(score) and text:
            usable.append(usable_hit)
    return usable, len(raw) - len(usable)


_SUBJECT_UNSAFE = re.compile(r"[^a-z0-9]+")


def _alias_of(hit: MemoryHit) -> str:
    """The alias a recalled fact explains (as stored, else read off a quoted mapping)."""
    return str(hit.metadata.get("alias") or "") or mapping_alias(hit.text)


_SEARCH = "memory search"  # what a recall that times out is called in its error


@dataclass(frozen=True)
class _ReadPlan:
    """One recall: the backend, what to ask it, how long to wait, and when the node began."""

    memory: MemoryBackend
    request: RecallRequest
    timeout: float
    start: float


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
    writes: BackgroundWrites = field(default_factory=BackgroundWrites)
    trace_log: TraceLog | None = None
    collection: str = ""
    titler: ThreadTitler | None = None  # names a new thread (LLM or the question)
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
        with metering() as meter:
            title = state.get("title") or self._title(question, config)
        return self._prepared(state, config, question, title, update, start, meter)

    async def aprepare(self, state: AgentState, config: RunnableConfig) -> dict[str, Any]:
        """Async :meth:`prepare`: no thread hop before retrieval (the time to first token)."""
        start, question, update = time.perf_counter(), *self._question(state)
        with metering() as meter:
            title = state.get("title") or await self._atitle(question, config)
        return self._prepared(state, config, question, title, update, start, meter)

    def _question(self, state: AgentState) -> tuple[str, dict[str, Any]]:
        messages = list(state.get("messages") or [])
        update: dict[str, Any] = {}
        if messages and isinstance(messages[-1], HumanMessage):
            question = clean_question(str(messages[-1].content), self.settings.max_question_chars)
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
        config: RunnableConfig,
        question: str,
        title: str,
        update: dict[str, Any],
        start: float,
        meter: Meter,
    ) -> dict[str, Any]:
        user_id = user_id_from_config(config)
        update.update(
            {
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
                "trace": Overwrite(
                    [_with_usage({"node": "prepare", "user_id": user_id, "ms": _ms(start)}, meter)]
                ),
            }
        )
        if "rewrite_history" not in state:
            update["rewrite_history"] = []
        return update

    def _title(self, question: str, config: RunnableConfig) -> str:
        """A new thread's title: one short model call when the turn belongs to a thread."""
        thread_id = ((config or {}).get("configurable") or {}).get("thread_id")
        if self.components.titler is None or not thread_id:
            return question_title(question)
        return self.components.titler.title(question, config)

    async def _atitle(self, question: str, config: RunnableConfig) -> str:
        thread_id = ((config or {}).get("configurable") or {}).get("thread_id")
        if self.components.titler is None or not thread_id:
            return question_title(question)
        return await self.components.titler.atitle(question, config)

    # -- read_memory -----------------------------------------------------------------
    def _recall_request(self, state: AgentState) -> RecallRequest:
        question = state["question"]
        return RecallRequest(
            query=question,
            user_id=state["user_id"],
            limit=self.settings.memory_top_k,
            keys=question_keys(self.components.searcher.encoder, question),
            max_preferences=self.settings.memory_max_preferences,
        )

    def _after_read(self, recall: Recall, plan: _ReadPlan, waited_ms: float) -> dict[str, Any]:
        threshold = self.settings.memory_relevance_threshold
        if not isinstance(recall, Recall):
            recall, bad = Recall(), 1
        else:
            bad = 0
        facts, bad_facts = _usable_hits(recall.facts)
        preferences, bad_preferences = _usable_hits(recall.preferences)
        facts = sorted((h for h in facts if h.kind != PREFERENCE), key=lambda h: -h.score)
        preferences = [h for h in preferences if h.kind == PREFERENCE]
        kept = [h for h in facts if h.score >= threshold]
        scanned = recall.scanned if isinstance(recall.scanned, int) else 0
        encoder = self.components.searcher.encoder
        targets = [fact_targets(encoder, h.text, _alias_of(h)) for h in kept]
        context = memory_context([h.text for h in kept], [h.text for h in preferences])
        similarities = [h.similarity for h in facts if h.similarity is not None]
        items = [
            {
                "id": h.id,
                "kind": h.kind,
                "key": h.key,
                "text": h.text,
                "score": round(h.score, 4),
                "matched": h.matched,
            }
            for h in [*kept, *preferences]
        ]
        event: dict[str, Any] = {
            "node": "read_memory",
            # What was recalled, one "- " line each (the spec's shape); the prompt's wording
            # around it is in memory_context.
            "memories": "\n".join(f"- {h.text}" for h in [*kept, *preferences]),
            "items": items,
            "n_kept": len(items),
            "n_facts": len(kept),
            "n_preferences": len(preferences),
            "n_scanned": scanned,
            "threshold": threshold,
            "best_score": round(facts[0].score, 4) if facts else None,
            "best_similarity": round(max(similarities), 4) if similarities else None,
            "backend": plan.memory.name,
            "waited_for_writes_ms": round(waited_ms, 3),
            "ms": _ms(plan.start),
        }
        if not items:
            event["skipped"] = "below_threshold" if facts else "no_memories"
        if malformed := bad + bad_facts + bad_preferences:
            event["n_malformed"] = malformed
        return {
            "memory_context": context,
            "memory_terms": " ".join(dict.fromkeys(" ".join(targets).split())),
            "memories": [
                RecalledMemory(
                    id=h.id, text=h.text, score=h.score, kind=h.kind, key=h.key, alias=_alias_of(h)
                )
                for h in [*kept, *preferences]
            ],
            "trace": [event],
        }

    def _read_plan(self, state: AgentState) -> _ReadPlan | None:
        """What to recall for this turn, or None without a memory backend."""
        if (memory := self.components.memory) is None:
            return None
        start = time.perf_counter()
        return _ReadPlan(memory, self._recall_request(state), self.settings.memory_timeout, start)

    @staticmethod
    def _read_skipped() -> dict[str, Any]:
        return {"trace": [{"node": "read_memory", "memories": "", "skipped": "no_memory_backend"}]}

    @staticmethod
    def _read_failed(exc: Exception, plan: _ReadPlan) -> dict[str, Any]:
        logger.warning("memory recall failed: %s: %s", type(exc).__name__, exc)
        event = _error_event("read_memory", exc, skipped="error", memories="", ms=_ms(plan.start))
        return {"trace": [event]}

    def read_memory(self, state: AgentState, config: RunnableConfig) -> dict[str, Any]:
        if (plan := self._read_plan(state)) is None:
            return self._read_skipped()
        memory, request = plan.memory, plan.request
        try:
            # read-your-writes: what this user's previous turn stored is seen by this one
            waited = self.components.writes.wait_for(request.user_id, plan.timeout)
            recall = call_with_timeout(lambda: memory.recall(request), plan.timeout, _SEARCH)
        except Exception as exc:
            return self._read_failed(exc, plan)
        return self._after_read(recall, plan, waited)

    async def aread_memory(self, state: AgentState, config: RunnableConfig) -> dict[str, Any]:
        if (plan := self._read_plan(state)) is None:
            return self._read_skipped()
        try:
            waited = await self.components.writes.await_for(plan.request.user_id, plan.timeout)
            recall = await asyncio.wait_for(plan.memory.arecall(plan.request), plan.timeout)
        except Exception as exc:
            return self._read_failed(exc, plan)
        return self._after_read(recall, plan, waited)

    # -- dense_search ------------------------------------------------------------------
    def _after_dense(
        self, hits: list[Hit], embed_ms: float, start: float, attempt: int
    ) -> dict[str, Any]:
        return {
            "dense_hits": [ScoredId(id=h.id, score=h.score) for h in hits],
            "trace": [
                {
                    "node": "dense_search",
                    "hits": len(hits),
                    "embed_ms": embed_ms,
                    "search_ms": _ms(start),
                    "attempt": attempt,
                }
            ],
        }

    def dense_search(self, state: AgentState, config: RunnableConfig) -> dict[str, Any]:
        searcher, t0 = self.components.searcher, time.perf_counter()
        vector = searcher.embedder.embed(state["query"])
        embed_ms, t1 = _ms(t0), time.perf_counter()
        hits = searcher.dense_hits(vector, searcher.conditions(state.get("filter")))
        return self._after_dense(hits, embed_ms, t1, state.get("attempts", 0))

    async def adense_search(self, state: AgentState, config: RunnableConfig) -> dict[str, Any]:
        searcher, t0 = self.components.searcher, time.perf_counter()
        vector = await searcher.embedder.aembed(state["query"])
        embed_ms, t1 = _ms(t0), time.perf_counter()
        conditions = searcher.conditions(state.get("filter"))
        hits = await asyncio.to_thread(searcher.dense_hits, vector, conditions)
        return self._after_dense(hits, embed_ms, t1, state.get("attempts", 0))

    # -- lexical_search ------------------------------------------------------------------
    async def alexical_search(self, state: AgentState, config: RunnableConfig) -> dict[str, Any]:
        return await asyncio.to_thread(self.lexical_search, state, config)

    def lexical_search(self, state: AgentState, config: RunnableConfig) -> dict[str, Any]:
        start = time.perf_counter()
        searcher = self.components.searcher
        memory_terms = state.get("memory_terms") or ""
        hits = searcher.lexical_hits(
            state["query"],
            memory_terms,
            searcher.conditions(state.get("filter")),
            memory_weight=self.settings.memory_term_weight,
        )
        event: dict[str, Any] = {
            "node": "lexical_search",
            "hits": len(hits),
            "ms": _ms(start),
            "attempt": state.get("attempts", 0),
        }
        if memory_terms:
            event["memory_terms"] = memory_terms
        return {"lexical_hits": [ScoredId(id=h.id, score=h.score) for h in hits], "trace": [event]}

    # -- fuse ----------------------------------------------------------------------------
    async def afuse(self, state: AgentState, config: RunnableConfig) -> dict[str, Any]:
        return await asyncio.to_thread(self.fuse, state, config)

    def fuse(self, state: AgentState, config: RunnableConfig) -> dict[str, Any]:
        start = time.perf_counter()
        searcher = self.components.searcher
        dense = [Hit(h["id"], h["score"]) for h in state.get("dense_hits") or []]
        lexical = [Hit(h["id"], h["score"]) for h in state.get("lexical_hits") or []]
        memory_terms = state.get("memory_terms") or ""
        fused = searcher.fuse(
            dense,
            lexical,
            searcher.candidates_for(self.settings.top_k),
            state["query"],
            memory_terms,
            self.settings.memory_term_weight,
        )
        # Payloads of the winners only; a passage deleted since the search is left out.
        hits = searcher.with_payloads(fused, searcher.candidates_for(self.settings.top_k))
        fuse_ms = _ms(start)
        # With a reranker, the first rerank_k fused passages are reordered before the cut.
        with metering() as meter:
            hits, rerank_event = searcher.rerank(state["question"], hits)
        if rerank_event:
            _with_usage(rerank_event, meter)  # an LLM reranker's call, as the other roles'
        sources = [to_source(hit) for hit in hits[: self.settings.top_k]]
        event = {
            "node": "fuse",
            "method": searcher.fuser.name,
            "dense_hits": len(dense),
            "lexical_hits": len(lexical),
            "fused": len(sources),
            "ms": fuse_ms,
            "top_sources": [s["source"] for s in sources[:3]],
        }
        if rerank_event:
            rerank_event["attempt"] = state.get("attempts", 0)
            rerank_event["top_sources"] = event["top_sources"]
        return {"sources": sources, "trace": [event, rerank_event] if rerank_event else [event]}

    # -- generate ------------------------------------------------------------------------
    def _request(self, state: AgentState, answer: str = "") -> AnswerRequest:
        dense_scores = {h["id"]: h["score"] for h in state.get("dense_hits") or []}
        return AnswerRequest(
            question=state["question"],
            query=state.get("query") or state["question"],
            sources=list(state.get("sources") or []),
            history=history_for_model(state.get("messages") or [], self.settings.history_tokens),
            memory_context=state.get("memory_context") or "",
            memory_terms=state.get("memory_terms") or "",
            known_aliases=tuple(m["alias"] for m in state.get("memories") or [] if m.get("alias")),
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
        event = {
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
                event.update(_error_event("generate", inline.error, fallback="separate"))
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
        event: dict[str, Any] = {
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
            event.update(_error_event("final_grade", error, fallback="conservative"))
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

    def after_grade(self, state: AgentState) -> str:
        """Route: another retrieval with a rewritten query, or finish."""
        grade = state.get("grade") or {}
        if (
            not grade.get("sufficient", True)
            and state.get("attempts", 0) < self.settings.max_retries
        ):
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
        event: dict[str, Any] = _with_usage(
            {
                "node": "rewrite",
                "query": query,
                "ms": _ms(start),
                "attempt": state.get("attempts", 0) + 1,
            },
            meter,
        )
        if error is not None:
            event.update(_error_event("rewrite", error))
        if query and is_repeat(query, self._tried(state)):  # never run a tried query again
            event.update({"query": None, "repeated": query})
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
    def _finish(
        self, state: AgentState, event: dict[str, Any], config: RunnableConfig
    ) -> dict[str, Any]:
        messages = list(state.get("messages") or [])
        reply = AIMessage(
            state.get("answer", ""),
            response_metadata={
                "generated_by": state.get("generated_by"),
                "llm": state.get("llm_used", False),
                "sources": [s.get("source") for s in state.get("sources") or []],
            },
        )
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

    def _write_plan(self, state: AgentState) -> tuple[dict[str, Any], MemoryRecord | None]:
        fact = state.get("memory_fact") or ""
        grade = state.get("grade") or {}
        if self.components.memory is None:
            return {"node": "write_memory", "skipped": "no_memory_backend"}, None
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
            }, None
        record = self._record(state, fact, grade)
        recalled = {
            (m.get("kind", "search_fact"), m.get("text", "").strip().lower())
            for m in state.get("memories") or []
        }
        if (record.kind, fact.strip().lower()) in recalled:  # recalled this turn: nothing new
            return {"node": "write_memory", "skipped": "already_known", "fact": fact}, None
        return {
            "node": "write_memory",
            "scheduled": True,
            "backend": self.components.memory.name,
            "kind": record.kind,
            "key": record.key,
            "fact": fact,
        }, record

    def _record(self, state: AgentState, fact: str, grade: dict[str, Any]) -> MemoryRecord:
        """The memory to write, keyed so that a newer one on the same alias or subject
        replaces the older (see ``memory._keys``)."""
        kind = kind_of(grade.get("memory_kind"))
        given = _one_line(str(grade.get("memory_key") or ""))[:80]
        if kind == PREFERENCE:
            key = _SUBJECT_UNSAFE.sub("-", given.lower()).strip("-")[:40]
            alias = ""
        else:
            alias = given or mapping_alias(fact)
            key = alias_key(self.components.searcher.encoder, alias) if alias else ""
        return MemoryRecord(
            fact=fact,
            question=state["question"],
            answer=state.get("answer", ""),
            user_id=state["user_id"],
            metadata={"collection": self.components.collection},
            kind=kind,
            key=key,
            alias=alias if key else "",
        )

    def _write_failed(
        self, state: AgentState, record: MemoryRecord
    ) -> Callable[[BaseException], None]:
        """Where a background write's failure goes: the log (by BackgroundWrites), the drain
        report, and the trace log as a late ``write_memory`` event of the same turn."""

        def hook(exc: BaseException) -> None:
            if self.components.trace_log is None:
                return
            event = _error_event("write_memory", exc, fact=record.fact, late=True)
            self.components.trace_log.write(
                {
                    "ts": time.time(),
                    "collection": self.components.collection,
                    "user_id": record.user_id,
                    "question": record.question,
                    "trace": [event],
                }
            )

        return hook

    def write_memory(self, state: AgentState, config: RunnableConfig) -> dict[str, Any]:
        start = time.perf_counter()
        event, record = self._write_plan(state)
        if record is not None:
            memory = self.components.memory
            assert memory is not None
            event["waited_ms"] = self.components.writes.submit_thread(
                lambda: memory.add(record),
                f"{memory.name}: {record.fact[:60]}",
                self._write_failed(state, record),
                owner=record.user_id,
            )
            event["mode"] = "thread"
        event["ms"] = _ms(start)
        return self._finish(state, event, config)

    async def awrite_memory(self, state: AgentState, config: RunnableConfig) -> dict[str, Any]:
        start = time.perf_counter()
        event, record = self._write_plan(state)
        if record is not None:
            memory = self.components.memory
            assert memory is not None
            label, hook = f"{memory.name}: {record.fact[:60]}", self._write_failed(state, record)
            if memory.async_native:
                event["waited_ms"] = await self.components.writes.submit_task(
                    lambda: memory.aadd(record), label, hook, owner=record.user_id
                )
                event["mode"] = "task"
            else:  # a thread outlives the event loop; the write survives asyncio.run() ending
                event["waited_ms"] = self.components.writes.submit_thread(
                    lambda: memory.add(record), label, hook, owner=record.user_id
                )
                event["mode"] = "thread"
        event["ms"] = _ms(start)
        return self._finish(state, event, config)

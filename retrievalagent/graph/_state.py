"""The graph's state: what one turn reads and writes, and what persists in a thread."""

from __future__ import annotations

from typing import Annotated, Any

from langchain_core.messages import AnyMessage
from langgraph.graph.message import add_messages
from typing_extensions import TypedDict

from retrievalagent.types import Source

__all__ = ["AgentState", "RecalledMemory", "ScoredId", "append_trace"]


def append_trace(
    left: list[dict[str, Any]] | None, right: list[dict[str, Any]] | None
) -> list[dict[str, Any]]:
    """Trace events accumulate within a turn; ``prepare`` starts each turn afresh (Overwrite)."""
    return [*(left or []), *(right or [])]


class ScoredId(TypedDict):
    """One search hit as the state keeps it: which chunk, and its score in that search."""

    id: str
    score: float


class RecalledMemory(TypedDict):
    """One memory recalled for this turn (a search fact, a preference or a conversation
    memory)."""

    id: str
    text: str
    score: float
    kind: str
    key: str
    alias: str  # the question word a search fact explains ("" for the other kinds)
    thread_id: str  # the conversation it was said or learned in, and when
    at: str


class AgentState(TypedDict, total=False):
    """Graph state. Per-turn fields are reset by ``prepare``; ``messages``, ``title`` and
    ``rewrite_history`` persist across the turns of a thread (with a checkpointer)."""

    # conversation (persists)
    messages: Annotated[list[AnyMessage], add_messages]
    title: str
    rewrite_history: list[str]
    # this turn
    asked_at: (
        str  # when it counts as asked (ISO 8601 in configurable.now's zone, else this machine's)
    )
    asked_zone: str  # configurable.now's IANA zone name ("" for none or a fixed offset)
    question: str
    query: str
    user_id: str
    filter: dict[str, Any] | None
    memory_context: str
    memory_terms: str
    memories: list[RecalledMemory]
    dense_hits: list[ScoredId]
    lexical_hits: list[ScoredId]
    sources: list[Source]
    answer: str
    generated_by: str
    llm_used: bool
    # A Grade's fields (Grade.model_dump()): the state holds plain data, so that it
    # checkpoints and reaches the caller's result as LangGraph returns it.
    grade: dict[str, Any]
    inline_grade: dict[str, Any]  # grading="inline": the grade the answer call returned
    usage: dict[str, Any]  # the turn's model calls per role and in total (see turn_usage)
    memory_fact: str
    attempts: int
    tried_queries: list[str]
    trace: Annotated[list[dict[str, Any]], append_trace]

"""The pluggable model roles of the graph: answering, grading and rewriting queries.

Each role has an LLM implementation and an offline one (no model: extractive answers and
grades computed from retrieval evidence). Nodes depend only on these Protocols.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Protocol

from langchain_core.messages import BaseMessage
from langchain_core.runnables import RunnableConfig

from retrievalagent.types import Grade, Source

__all__ = ["Answer", "AnswerRequest", "Answerer", "Grader", "Rewriter"]


@dataclass
class AnswerRequest:
    """Everything an answer or a grade is based on."""

    question: str
    query: str
    sources: list[Source]
    history: Sequence[BaseMessage] = ()
    memory_context: str = ""  # exactly what the answer prompt shows of recalled memory
    memory_terms: str = ""  # the recalled facts' corpus terms (what BM25 searched for)
    known_aliases: tuple[str, ...] = ()  # question words a recalled fact already explains
    # recalled conversation memories: (when it was said, ISO; what was said), best first
    earlier: tuple[tuple[str, str], ...] = ()
    user_id: str = ""  # whose turn it is: their own lines of ``earlier`` may carry it as a name
    answer: str = ""  # filled in for grading
    dense_scores: dict[str, float] = field(default_factory=dict)  # chunk id -> cosine


@dataclass
class Answer:
    """An answer and how it was produced."""

    text: str
    generated_by: str
    llm: bool


class Answerer(Protocol):
    """Writes the answer with citations from the numbered passages."""

    #: True when tokens reach LangGraph's "messages" stream on their own (chat models).
    streams_tokens: bool

    def answer(self, request: AnswerRequest, config: RunnableConfig | None = None) -> Answer: ...

    async def aanswer(
        self, request: AnswerRequest, config: RunnableConfig | None = None
    ) -> Answer: ...


class Grader(Protocol):
    """Judges an answer and proposes what to remember."""

    def grade(self, request: AnswerRequest, config: RunnableConfig | None = None) -> Grade: ...

    async def agrade(
        self, request: AnswerRequest, config: RunnableConfig | None = None
    ) -> Grade: ...


class Rewriter(Protocol):
    """Proposes a new search query after an insufficient answer (None = nothing new to try)."""

    def rewrite(
        self, request: AnswerRequest, tried: Sequence[str], config: RunnableConfig | None = None
    ) -> str | None: ...

    async def arewrite(
        self, request: AnswerRequest, tried: Sequence[str], config: RunnableConfig | None = None
    ) -> str | None: ...

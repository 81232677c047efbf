"""LLM mode: answer, grade and rewrite with a LangChain chat model.

Prompt building and reply parsing are shared by the sync and async paths; only the model
call differs. The grade uses ``with_structured_output(Grade)``. Every model call goes
through one :class:`~retrievalagent.models._retry.RetryPolicy` (bounded retries of
transient errors, then ``ModelError``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import BaseMessage, HumanMessage, SystemMessage
from langchain_core.runnables import RunnableConfig

from retrievalagent.models._base import Answer, AnswerRequest
from retrievalagent.models._prompts import (
    ANSWER_SYSTEM,
    GRADE_HUMAN,
    GRADE_SYSTEM,
    REWRITE_HUMAN,
    REWRITE_SYSTEM,
    format_passages,
    search_hints,
)
from retrievalagent.models._retry import RetryPolicy
from retrievalagent.types import Grade

__all__ = ["LLMAnswerer", "LLMGrader", "LLMRewriter", "model_name"]


def model_name(model: BaseChatModel) -> str:
    for attr in ("model_name", "model", "model_id"):
        value = getattr(model, attr, None)
        if isinstance(value, str) and value:
            return value
    return type(model).__name__


def _text(message: Any) -> str:
    content = getattr(message, "content", message)
    if isinstance(content, list):  # content blocks
        return "".join(b.get("text", "") if isinstance(b, dict) else str(b) for b in content)
    return str(content)


class LLMAnswerer:
    """Answers from the passages with citations, following the conversation history."""

    streams_tokens = True

    def __init__(self, model: BaseChatModel, retry: RetryPolicy | None = None) -> None:
        self.model = model
        self.name = model_name(model)
        self.retry = retry or RetryPolicy()
        self.generated_by = f"llm:{self.name}"

    def messages(self, request: AnswerRequest) -> list[BaseMessage]:
        system = search_hints(request.memory_context) + ANSWER_SYSTEM.format(
            passages=format_passages(request.sources)
        )
        return [SystemMessage(system), *request.history, HumanMessage(request.question)]

    def answer(self, request: AnswerRequest, config: RunnableConfig | None = None) -> Answer:
        messages = self.messages(request)
        reply = self.retry.call(
            lambda: self.model.invoke(messages, config), model=self.name, role="answer"
        )
        return Answer(_text(reply).strip(), self.generated_by, llm=True)

    async def aanswer(self, request: AnswerRequest, config: RunnableConfig | None = None) -> Answer:
        messages = self.messages(request)
        reply = await self.retry.acall(
            lambda: self.model.ainvoke(messages, config), model=self.name, role="answer"
        )
        return Answer(_text(reply).strip(), self.generated_by, llm=True)


class LLMGrader:
    """Structured grade from the model; see ``Grade`` for the fields it must fill."""

    def __init__(self, model: BaseChatModel, retry: RetryPolicy | None = None) -> None:
        self.runnable = model.with_structured_output(Grade)
        self.name = model_name(model)
        self.retry = retry or RetryPolicy()

    def messages(self, request: AnswerRequest) -> list[BaseMessage]:
        human = GRADE_HUMAN.format(
            question=request.question,
            passages=format_passages(request.sources, max_chars=800),
            answer=request.answer,
        )
        return [SystemMessage(GRADE_SYSTEM), HumanMessage(human)]

    @staticmethod
    def parse(reply: Any) -> Grade:
        if isinstance(reply, Grade):
            return reply
        if isinstance(reply, dict):
            return Grade.model_validate(reply)
        raise TypeError(f"the grader returned {type(reply).__name__}, not a Grade")

    def grade(self, request: AnswerRequest, config: RunnableConfig | None = None) -> Grade:
        messages = self.messages(request)
        return self.parse(
            self.retry.call(
                lambda: self.runnable.invoke(messages, config), model=self.name, role="grade"
            )
        )

    async def agrade(self, request: AnswerRequest, config: RunnableConfig | None = None) -> Grade:
        messages = self.messages(request)
        return self.parse(
            await self.retry.acall(
                lambda: self.runnable.ainvoke(messages, config), model=self.name, role="grade"
            )
        )


class LLMRewriter:
    """A new search query from the model, never one already tried."""

    def __init__(self, model: BaseChatModel, retry: RetryPolicy | None = None) -> None:
        self.model = model
        self.name = model_name(model)
        self.retry = retry or RetryPolicy()

    def messages(self, request: AnswerRequest, tried: Sequence[str]) -> list[BaseMessage]:
        listed = "\n".join(f"- {t}" for t in tried) or "- (none)"
        return [
            SystemMessage(REWRITE_SYSTEM),
            HumanMessage(REWRITE_HUMAN.format(question=request.question, tried=listed)),
        ]

    @staticmethod
    def parse(reply: Any, tried: Sequence[str]) -> str | None:
        query = _text(reply).strip().strip('"').strip()
        if not query or query.lower() in {t.strip().lower() for t in tried}:
            return None
        return query.splitlines()[0][:500]

    def rewrite(
        self, request: AnswerRequest, tried: Sequence[str], config: RunnableConfig | None = None
    ) -> str | None:
        messages = self.messages(request, tried)
        reply = self.retry.call(
            lambda: self.model.invoke(messages, config), model=self.name, role="rewrite"
        )
        return self.parse(reply, tried)

    async def arewrite(
        self, request: AnswerRequest, tried: Sequence[str], config: RunnableConfig | None = None
    ) -> str | None:
        messages = self.messages(request, tried)
        reply = await self.retry.acall(
            lambda: self.model.ainvoke(messages, config), model=self.name, role="rewrite"
        )
        return self.parse(reply, tried)

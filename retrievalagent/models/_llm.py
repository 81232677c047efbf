"""LLM mode: answer, grade and rewrite with a LangChain chat model.

Prompt building and reply parsing are shared by the sync and async paths; only the model
call differs. The grade uses ``with_structured_output(Grade, include_raw=True)`` (the raw
message carries the provider's token usage) and sees only the passages the answer cites.
In inline grading, :class:`LLMInlineAnswerer` makes one structured call that returns the
answer and its grade. Every model call goes through one
:class:`~retrievalagent.models._retry.RetryPolicy` (bounded retries of transient errors,
then ``ModelError``) and is recorded (tokens, wall time) in the meter of the node that made
it (:mod:`retrievalagent.models._usage`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from langchain_core.callbacks import BaseCallbackManager
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import BaseMessage, HumanMessage, SystemMessage
from langchain_core.runnables import RunnableConfig
from pydantic import BaseModel, Field, create_model

from retrievalagent.models._base import Answer, AnswerRequest
from retrievalagent.models._prompts import (
    ANSWER_SYSTEM,
    GRADE_HUMAN,
    GRADE_PASSAGE_CHARS,
    GRADE_SYSTEM,
    INLINE_SUFFIX,
    NO_CITED_PASSAGES,
    REWRITE_HUMAN,
    REWRITE_SYSTEM,
    cited_numbers,
    format_passages,
    memory_preamble,
)
from retrievalagent.models._retry import RetryPolicy
from retrievalagent.models._usage import ametered_call, metered_call
from retrievalagent.types import Grade

try:  # LangGraph's token handler (stream_mode="messages"); private, so guarded
    from langgraph.pregel._messages import StreamMessagesHandler as _TokenHandler
except ImportError:  # pragma: no cover - a future LangGraph moved it: calls stream as before
    _TokenHandler = None  # type: ignore[assignment,misc]  # the module may not exist

__all__ = [
    "GradedAnswer",
    "LLMAnswerer",
    "LLMGrader",
    "LLMInlineAnswerer",
    "LLMRewriter",
    "model_name",
    "structured_reply",
]

#: The inline grading schema: an ``answer`` field first (the model writes the answer, then
#: judges it), then every field of :class:`Grade`, with the same descriptions.
GradedAnswer: type[BaseModel] = create_model(  # type: ignore[call-overload]
    "GradedAnswer",
    __doc__="An answer to the question and its grade.",
    answer=(
        str,
        Field(description="The answer, following the rules above (cite passages as [n])."),
    ),
    **{name: (f.annotation, f) for name, f in Grade.model_fields.items()},
)


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
        system = memory_preamble(request.memory_context) + ANSWER_SYSTEM.format(
            passages=format_passages(request.sources)
        )
        return [SystemMessage(system), *request.history, HumanMessage(request.question)]

    def answer(self, request: AnswerRequest, config: RunnableConfig | None = None) -> Answer:
        messages = self.messages(request)
        reply = metered_call(
            "answer", messages, lambda: self.model.invoke(messages, config), self.retry, self.name
        )
        return Answer(_text(reply).strip(), self.generated_by, llm=True)

    async def aanswer(self, request: AnswerRequest, config: RunnableConfig | None = None) -> Answer:
        messages = self.messages(request)
        reply = await ametered_call(
            "answer", messages, lambda: self.model.ainvoke(messages, config), self.retry, self.name
        )
        return Answer(_text(reply).strip(), self.generated_by, llm=True)


def structured_reply(reply: Any) -> tuple[Any, Any]:
    """``(parsed, raw message)`` of a structured reply: the ``include_raw`` dict, or (from a
    model that ignores ``include_raw``) the value itself with no raw message. A reply that
    did not parse raises ``ValueError`` (the caller decides what a bad reply means)."""
    if isinstance(reply, Mapping) and {"raw", "parsed"} <= set(reply):
        error = reply.get("parsing_error")
        if error is not None or reply.get("parsed") is None:
            raise ValueError(f"the model's structured reply did not parse: {error}")
        return reply["parsed"], reply["raw"]
    return reply, None


def _parse_as(value: Any, schema: type[BaseModel]) -> Any:
    if isinstance(value, schema):
        return value
    if isinstance(value, BaseModel):
        return schema.model_validate(value.model_dump())
    if isinstance(value, dict):
        return schema.model_validate(value)
    raise TypeError(f"the model returned {type(value).__name__}, not a {schema.__name__}")


def _nostream(config: RunnableConfig | None) -> RunnableConfig:
    """A config for a call read only once complete (a JSON grade, a one-line rewrite).

    Its tokens stay out of the answer's token stream, and the call is not streamed at all:
    under ``stream``/``astream`` LangGraph's token handler would otherwise make LangChain
    stream it, paying per-chunk callbacks for nothing (and, for a structured reply over
    OpenAI's streaming path, logging a pydantic serializer warning). Only that handler
    is left out: tracing and ``astream_events`` handlers still see the call.
    """
    out: RunnableConfig = {**(config or {})}
    out["tags"] = [*(out.get("tags") or []), "nostream"]
    callbacks = out.get("callbacks")
    if _TokenHandler is not None and isinstance(callbacks, BaseCallbackManager):
        quiet = callbacks.copy()
        for handler in list(quiet.handlers):
            if isinstance(handler, _TokenHandler):
                quiet.remove_handler(handler)
        out["callbacks"] = quiet
    return out


class LLMInlineAnswerer:
    """Inline grading: one structured call returns the answer and its grade.

    One round trip and one prompt (the answer prompt plus one sentence) per attempt,
    instead of two. Trade-off: the answer arrives whole when the call ends (a JSON reply
    cannot be streamed as prose), so ``stream``/``astream`` show no token before then, and
    the model judges its own answer in the same breath (a separate grade call is a second
    look at it).
    """

    def __init__(self, model: BaseChatModel, retry: RetryPolicy | None = None) -> None:
        self.runnable = model.with_structured_output(GradedAnswer, include_raw=True)
        self.name = model_name(model)
        self.retry = retry or RetryPolicy()
        self.generated_by = f"llm:{self.name}"

    def messages(self, request: AnswerRequest) -> list[BaseMessage]:
        system = (
            memory_preamble(request.memory_context)
            + ANSWER_SYSTEM.format(passages=format_passages(request.sources))
            + INLINE_SUFFIX
        )
        return [SystemMessage(system), *request.history, HumanMessage(request.question)]

    def _done(self, reply: Any) -> tuple[Answer, Grade]:
        parsed, _ = structured_reply(reply)
        fields = _parse_as(parsed, GradedAnswer).model_dump()
        answer = str(fields.pop("answer") or "").strip()
        return Answer(answer, self.generated_by, llm=True), Grade.model_validate(fields)

    def answer_and_grade(
        self, request: AnswerRequest, config: RunnableConfig | None = None
    ) -> tuple[Answer, Grade]:
        messages = self.messages(request)
        call = lambda: self.runnable.invoke(messages, _nostream(config))  # noqa: E731
        return self._done(metered_call("answer", messages, call, self.retry, self.name))

    async def aanswer_and_grade(
        self, request: AnswerRequest, config: RunnableConfig | None = None
    ) -> tuple[Answer, Grade]:
        messages = self.messages(request)
        call = lambda: self.runnable.ainvoke(messages, _nostream(config))  # noqa: E731
        return self._done(await ametered_call("answer", messages, call, self.retry, self.name))


class LLMGrader:
    """Structured grade from the model; see ``Grade`` for the fields it must fill.

    The prompt holds the question, the answer and the passages the answer cites (with the
    numbers the answer used, each cut to ``GRADE_PASSAGE_CHARS``): what the grade judges
    by, without paying again for passages the answer did not use.
    """

    def __init__(self, model: BaseChatModel, retry: RetryPolicy | None = None) -> None:
        self.runnable = model.with_structured_output(Grade, include_raw=True)
        self.name = model_name(model)
        self.retry = retry or RetryPolicy()

    def messages(self, request: AnswerRequest) -> list[BaseMessage]:
        cited = cited_numbers(request.answer, len(request.sources))
        passages = (
            format_passages(request.sources, max_chars=GRADE_PASSAGE_CHARS, numbers=cited)
            if cited
            else NO_CITED_PASSAGES
        )
        human = GRADE_HUMAN.format(
            question=request.question, passages=passages, answer=request.answer
        )
        return [SystemMessage(GRADE_SYSTEM), HumanMessage(human)]

    @staticmethod
    def parse(reply: Any) -> Grade:
        parsed, _ = structured_reply(reply)
        if isinstance(parsed, Grade):
            return parsed
        if isinstance(parsed, dict):
            return Grade.model_validate(parsed)
        raise TypeError(f"the grader returned {type(parsed).__name__}, not a Grade")

    def grade(self, request: AnswerRequest, config: RunnableConfig | None = None) -> Grade:
        messages = self.messages(request)
        call = lambda: self.runnable.invoke(messages, _nostream(config))  # noqa: E731
        return self.parse(metered_call("grade", messages, call, self.retry, self.name))

    async def agrade(self, request: AnswerRequest, config: RunnableConfig | None = None) -> Grade:
        messages = self.messages(request)
        call = lambda: self.runnable.ainvoke(messages, _nostream(config))  # noqa: E731
        return self.parse(await ametered_call("grade", messages, call, self.retry, self.name))


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
        call = lambda: self.model.invoke(messages, _nostream(config))  # noqa: E731
        return self.parse(metered_call("rewrite", messages, call, self.retry, self.name), tried)

    async def arewrite(
        self, request: AnswerRequest, tried: Sequence[str], config: RunnableConfig | None = None
    ) -> str | None:
        messages = self.messages(request, tried)
        call = lambda: self.model.ainvoke(messages, _nostream(config))  # noqa: E731
        reply = await ametered_call("rewrite", messages, call, self.retry, self.name)
        return self.parse(reply, tried)

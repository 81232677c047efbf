"""Chat models whose words are scripted, for benchmarks: the graph, callbacks and message
handling they go through are real.

* ``InstantChatModel`` answers at once with a fixed sufficient grade (timing the graph).
* ``ScriptedGradeModel`` grades with a function of the grade prompt (what a good LLM grader
  would decide, e.g. the alias mapping a dataset knows) and records the answer prompts it
  receives, so a benchmark can check what reached the model.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from langchain_core.callbacks import CallbackManagerForLLMRun
from langchain_core.language_models import BaseChatModel
from langchain_core.language_models.fake_chat_models import FakeListChatModel
from langchain_core.messages import AIMessage, AIMessageChunk, BaseMessage
from langchain_core.outputs import ChatGeneration, ChatGenerationChunk, ChatResult
from langchain_core.runnables import Runnable, RunnableLambda
from pydantic import PrivateAttr

from retrievalagent.types import Grade

__all__ = ["GRADE", "InstantChatModel", "ScriptedGradeModel", "question_of"]

GRADE = {
    "sufficient": True,
    "confidence": 0.9,
    "memory_worth_storing": False,
    "memory_confidence": 0.0,
    "memory_fact": "",
}
_QUESTION = re.compile(r"^Question: (.*?)\n\nPassages:", re.DOTALL)
# The answer prompt's system message (models._prompts.ANSWER_SYSTEM); titles and rewrites
# are other calls.
_ANSWER_MARK = "You answer questions using only the numbered passages"


class InstantChatModel(FakeListChatModel):
    """Answers at once; ``with_structured_output(Grade)`` returns a fixed sufficient grade."""

    responses: list[str] = ["The passages answer it [1]."]  # noqa: RUF012 - pydantic field

    def with_structured_output(self, schema: Any, **kwargs: Any) -> Runnable[Any, Any]:
        def grade(_: Any) -> Any:
            if isinstance(schema, type) and issubclass(schema, Grade):
                return Grade.model_validate(GRADE)
            return dict(GRADE)

        return RunnableLambda(grade)


def _content(message: Any) -> str:
    content = getattr(message, "content", message)
    if isinstance(content, list):
        return "".join(b.get("text", "") if isinstance(b, dict) else str(b) for b in content)
    return str(content)


def question_of(messages: Sequence[Any]) -> str:
    """The question a grade prompt is about ('' when it is not a grade prompt)."""
    found = _QUESTION.search(_content(messages[-1])) if messages else None
    return found.group(1).strip() if found else ""


class ScriptedGradeModel(BaseChatModel):
    """Answers with a fixed sentence; grades with ``grader(messages) -> Grade``.

    ``answer_prompts`` holds, for every answer call in order, the part of its system message
    before the answering instructions and passages: what recalled memory put there (empty
    when nothing was recalled). Passages are left out, so a passage that happens to say
    "German" is not mistaken for the user's preference.
    """

    grader: Callable[[Sequence[BaseMessage]], Grade]
    reply: str = "The passages answer it [1]."
    _answer_prompts: list[str] = PrivateAttr(default_factory=list)

    @property
    def _llm_type(self) -> str:
        return "scripted-grade"

    @property
    def answer_prompts(self) -> list[str]:
        return self._answer_prompts

    def _record(self, messages: Sequence[BaseMessage]) -> str:
        system = _content(messages[0]) if messages else ""
        if _ANSWER_MARK in system:
            self._answer_prompts.append(system.split(_ANSWER_MARK, 1)[0])
            return self.reply
        return "scripted"  # a thread title or a rewritten query

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        return ChatResult(generations=[ChatGeneration(message=AIMessage(self._record(messages)))])

    def _stream(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> Iterator[ChatGenerationChunk]:
        chunk = ChatGenerationChunk(message=AIMessageChunk(content=self._record(messages)))
        if run_manager is not None:
            run_manager.on_llm_new_token(str(chunk.message.content), chunk=chunk)
        yield chunk

    def with_structured_output(self, schema: Any, **kwargs: Any) -> Runnable[Any, Any]:
        def grade(messages: Any) -> Any:
            msgs = list(messages.to_messages() if hasattr(messages, "to_messages") else messages)
            verdict = self.grader(msgs)
            if isinstance(schema, type) and issubclass(schema, Grade):
                return verdict
            return verdict.model_dump()

        return RunnableLambda(grade)

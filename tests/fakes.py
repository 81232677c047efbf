"""Fakes for an LLM's words (and nothing else): scripted chat replies and structured grades.

``ScriptedChatModel`` is a real ``BaseChatModel`` (callbacks, streaming, async all work as
LangChain implements them); only the text it returns is scripted. It records every prompt
it receives so tests can assert on what the agent sent.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from typing import Any

from langchain_core.callbacks import CallbackManagerForLLMRun
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, AIMessageChunk, BaseMessage
from langchain_core.outputs import ChatGeneration, ChatGenerationChunk, ChatResult
from langchain_core.runnables import Runnable, RunnableLambda
from pydantic import BaseModel, Field, PrivateAttr

Reply = str | Callable[[Sequence[BaseMessage]], str]


class ScriptedChatModel(BaseChatModel):
    """Answers from a script; grades (structured output) from another script.

    Args:
        replies: Texts returned in order (the last one repeats), or a function of the prompt.
        grades: Dicts for ``with_structured_output`` calls, in order (the last repeats), or a
            function of the prompt; an Exception instance is raised instead.
    """

    replies: list[Any] = Field(default_factory=lambda: ["Scripted answer [1]."])
    grades: list[Any] = Field(
        default_factory=lambda: [
            {
                "sufficient": True,
                "confidence": 0.9,
                "memory_worth_storing": False,
                "memory_confidence": 0.0,
                "memory_fact": "",
            }
        ]
    )
    _prompts: list[list[BaseMessage]] = PrivateAttr(default_factory=list)
    _grade_prompts: list[list[BaseMessage]] = PrivateAttr(default_factory=list)
    _reply_index: int = PrivateAttr(default=0)
    _grade_index: int = PrivateAttr(default=0)

    @property
    def _llm_type(self) -> str:
        return "scripted"

    @property
    def prompts(self) -> list[list[BaseMessage]]:
        return self._prompts

    @property
    def grade_prompts(self) -> list[list[BaseMessage]]:
        return self._grade_prompts

    def _next(self, script: list[Any], attr: str, messages: Sequence[BaseMessage]) -> Any:
        index = getattr(self, attr)
        item = script[min(index, len(script) - 1)]
        setattr(self, attr, index + 1)
        if isinstance(item, Exception):
            raise item
        return item(messages) if callable(item) else item

    def _text(self, messages: Sequence[BaseMessage]) -> str:
        self._prompts.append(list(messages))
        return str(self._next(self.replies, "_reply_index", messages))

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        return ChatResult(generations=[ChatGeneration(message=AIMessage(self._text(messages)))])

    def _stream(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> Iterator[ChatGenerationChunk]:
        text = self._text(messages)
        pieces = [text[i : i + 4] for i in range(0, len(text), 4)] or [""]
        for piece in pieces:
            chunk = ChatGenerationChunk(message=AIMessageChunk(content=piece))
            if run_manager is not None:
                run_manager.on_llm_new_token(piece, chunk=chunk)
            yield chunk

    def with_structured_output(self, schema: Any, **kwargs: Any) -> Runnable[Any, Any]:
        def grade(messages: Any) -> Any:
            msgs = list(messages.to_messages() if hasattr(messages, "to_messages") else messages)
            self._grade_prompts.append(msgs)
            value = self._next(self.grades, "_grade_index", msgs)
            if isinstance(schema, type) and issubclass(schema, BaseModel):
                return schema.model_validate(value)
            return value

        return RunnableLambda(grade)

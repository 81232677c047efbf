"""The one fake chat model of the tests and benchmarks: it fakes an LLM's words and nothing else.

``ScriptedChatModel`` is a real ``BaseChatModel`` (callbacks, streaming, async all work as
LangChain implements them); only the text it returns and the structured output it grades
with are scripted. It records every prompt it receives, with the role the call plays
(``kind_of``), so tests can assert on what the agent sent.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator, Sequence
from typing import Any, NamedTuple

from langchain_core.callbacks import CallbackManagerForLLMRun
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, AIMessageChunk, BaseMessage, SystemMessage
from langchain_core.outputs import ChatGeneration, ChatGenerationChunk, ChatResult
from langchain_core.runnables import Runnable, RunnableLambda
from pydantic import BaseModel, Field, PrivateAttr

__all__ = [
    "GRADE",
    "ModelCall",
    "ScriptedChatModel",
    "by_kind",
    "kind_of",
    "prompt_text",
    "question_of",
    "system_text",
    "text_of",
]

GRADE: dict[str, Any] = {
    "sufficient": True,
    "confidence": 0.9,
    "memory_worth_storing": False,
    "memory_confidence": 0.0,
    "memory_fact": "",
}
# The grade prompt's human message (models._prompts.GRADE_HUMAN) starts with the question.
_QUESTION = re.compile(r"^Question: (.*?)\n\nPassages:", re.DOTALL)


def text_of(message: Any) -> str:
    """A message's text, whether its content is a string or a list of blocks."""
    content = getattr(message, "content", message)
    if isinstance(content, list):
        return "".join(b.get("text", "") if isinstance(b, dict) else str(b) for b in content)
    return str(content)


def prompt_text(messages: Sequence[Any]) -> str:
    """A whole prompt as one text, a line per message."""
    return "\n".join(text_of(m) for m in messages)


def system_text(messages: Sequence[BaseMessage]) -> str:
    """The first system message's text ('' without one)."""
    return next((text_of(m) for m in messages if isinstance(m, SystemMessage)), "")


def kind_of(messages: Sequence[BaseMessage]) -> str:
    """Which role a model call plays, from its system prompt: title, rewrite, grade, memory
    (facts about the user, drawn from what they said) or answer."""
    system = system_text(messages)
    if system.startswith("Name a conversation"):
        return "title"
    if system.startswith("Read what a user wrote"):
        return "memory"
    if system.startswith("A search over the user's documents"):
        return "rewrite"
    if system.startswith("You check an answer"):
        return "grade"
    return "answer"


def by_kind(reply: Callable[[str, list[BaseMessage]], str]) -> Callable[[list[BaseMessage]], str]:
    """A reply function told which role the call plays (``reply(kind, messages)``)."""
    return lambda messages: reply(kind_of(messages), messages)


def question_of(messages: Sequence[Any]) -> str:
    """The question a grade prompt is about ('' when it is not a grade prompt)."""
    found = _QUESTION.search(text_of(messages[-1])) if messages else None
    return found.group(1).strip() if found else ""


class ModelCall(NamedTuple):
    """One call the model received: its role, its prompt, and whether it was a grade."""

    kind: str
    messages: list[BaseMessage]
    structured: bool


class ScriptedChatModel(BaseChatModel):
    """Answers from a script; grades (structured output) from another script.

    Args:
        replies: Texts returned in order (the last one repeats); an item may be a function
            of the prompt, or an Exception instance, raised instead.
        grades: Structured outputs for ``with_structured_output`` calls, in order (the last
            repeats): dicts or models, functions of the prompt giving one, or exceptions.
        facts: The same for the calls that draw facts about the user from what they said
            (conversation memory); by default none are found.
        chunk_chars: How many characters each streamed chunk carries.
    """

    replies: list[Any] = Field(default_factory=lambda: ["Scripted answer [1]."])
    grades: list[Any] = Field(default_factory=lambda: [dict(GRADE)])
    facts: list[Any] = Field(default_factory=lambda: [{"facts": []}])
    chunk_chars: int = 4
    _calls: list[ModelCall] = PrivateAttr(default_factory=list)
    _reply_index: int = PrivateAttr(default=0)
    _grade_index: int = PrivateAttr(default=0)
    _facts_index: int = PrivateAttr(default=0)

    @property
    def _llm_type(self) -> str:
        return "scripted"

    @property
    def calls(self) -> list[ModelCall]:
        """Every call in order, text and structured alike."""
        return self._calls

    @property
    def prompts(self) -> list[list[BaseMessage]]:
        """The prompts of the text calls (answers, titles, rewrites), in order."""
        return [c.messages for c in self._calls if not c.structured]

    @property
    def grade_prompts(self) -> list[list[BaseMessage]]:
        """The prompts of the grading calls (structured output), in order."""
        return [c.messages for c in self._calls if c.structured and c.kind == "grade"]

    def inputs(self, kind: str) -> list[list[BaseMessage]]:
        """The prompts of the calls of one role (see ``kind_of``; structured calls: "grade")."""
        return [c.messages for c in self._calls if c.kind == kind]

    def _next(self, script: list[Any], attr: str, messages: list[BaseMessage]) -> Any:
        index = getattr(self, attr)
        item = script[min(index, len(script) - 1)]
        setattr(self, attr, index + 1)
        if isinstance(item, Exception):
            raise item
        return item(messages) if callable(item) else item

    def _text(self, messages: list[BaseMessage]) -> str:
        self._calls.append(ModelCall(kind_of(messages), list(messages), structured=False))
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
        size = self.chunk_chars
        for piece in [text[i : i + size] for i in range(0, len(text), size)] or [""]:
            chunk = ChatGenerationChunk(message=AIMessageChunk(content=piece))
            if run_manager is not None:
                run_manager.on_llm_new_token(piece, chunk=chunk)
            yield chunk

    def with_structured_output(self, schema: Any, **kwargs: Any) -> Runnable[Any, Any]:
        def grade(messages: Any) -> Any:
            msgs = list(messages.to_messages() if hasattr(messages, "to_messages") else messages)
            if kind_of(msgs) == "memory":
                self._calls.append(ModelCall("memory", msgs, structured=True))
                return _as_schema(self._next(self.facts, "_facts_index", msgs), schema)
            self._calls.append(ModelCall("grade", msgs, structured=True))
            return _as_schema(self._next(self.grades, "_grade_index", msgs), schema)

        return RunnableLambda(grade)


def _as_schema(value: Any, schema: Any) -> Any:
    """A scripted grade in the shape asked for: a model for a model class, else a dict."""
    if isinstance(schema, type) and issubclass(schema, BaseModel):
        return value if isinstance(value, schema) else schema.model_validate(value)
    return value.model_dump() if isinstance(value, BaseModel) else value

"""Thread titles: the first question, or a few words from the chat model.

A title is made once, at a thread's first turn, and then kept in the thread's state. By
default it is the question itself, cut to :data:`TITLE_CHARS` characters at a word
boundary: no model call. With ``thread_title="llm"`` it costs one short call, made before
retrieval (its tokens and time show in the ``prepare`` trace event); if that call fails or
says nothing usable, the title is the question.
"""

from __future__ import annotations

import logging
import re
import time
from typing import Any

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import BaseMessage, HumanMessage, SystemMessage
from langchain_core.runnables import RunnableConfig

from retrievalagent.models import record

__all__ = ["TITLE_CHARS", "ThreadTitler", "question_title"]

logger = logging.getLogger("retrievalagent")

TITLE_CHARS = 50

_SYSTEM = (
    "Name a conversation that opens with the user's message below. Answer with a title of "
    "at most six words, no quotes, no trailing punctuation. Do not answer the message."
)
_PREFIX = re.compile(r"^\s*(title\s*[:\-–]\s*)", re.IGNORECASE)


def _clip(text: str, limit: int = TITLE_CHARS) -> str:
    text = " ".join(text.split())
    if len(text) <= limit:
        return text
    cut = text[: limit - 1]
    if " " in cut[limit // 2 :]:
        cut = cut.rsplit(" ", 1)[0]
    return cut.rstrip(" ,;:-") + "…"


def question_title(question: str) -> str:
    """The question as a title: whitespace collapsed, at most 50 characters."""
    return _clip(question)


def _reply_text(reply: Any) -> str:
    content = getattr(reply, "content", reply)
    if isinstance(content, list):
        return "".join(b.get("text", "") if isinstance(b, dict) else str(b) for b in content)
    return str(content)


class ThreadTitler:
    """Titles for new threads; ``model=None`` uses the question."""

    def __init__(self, model: BaseChatModel | None = None) -> None:
        self.model = model

    @staticmethod
    def messages(question: str) -> list[BaseMessage]:
        return [SystemMessage(_SYSTEM), HumanMessage(question[:2000])]

    @staticmethod
    def parse(reply: Any, question: str) -> str:
        lines = [ln for ln in _reply_text(reply).strip().splitlines() if ln.strip()]
        text = _PREFIX.sub("", lines[0]) if lines else ""
        text = text.strip().strip("\"'`*#").strip().rstrip(".")
        return _clip(text) if text else question_title(question)

    @staticmethod
    def _config(config: RunnableConfig | None) -> RunnableConfig:
        # "nostream": the title's tokens must not reach the answer's token stream
        given: RunnableConfig = config or {}
        return {
            **given,
            "tags": [*(given.get("tags") or []), "nostream"],
            "run_name": "thread_title",
        }

    def title(self, question: str, config: RunnableConfig | None = None) -> str:
        if self.model is None:
            return question_title(question)
        messages, start = self.messages(question), time.perf_counter()
        try:
            reply = self.model.invoke(messages, self._config(config))
            record("title", messages, reply, start)
        except Exception as exc:
            logger.warning("title generation failed: %s: %s", type(exc).__name__, exc)
            return question_title(question)
        return self.parse(reply, question)

    async def atitle(self, question: str, config: RunnableConfig | None = None) -> str:
        if self.model is None:
            return question_title(question)
        messages, start = self.messages(question), time.perf_counter()
        try:
            reply = await self.model.ainvoke(messages, self._config(config))
            record("title", messages, reply, start)
        except Exception as exc:
            logger.warning("title generation failed: %s: %s", type(exc).__name__, exc)
            return question_title(question)
        return self.parse(reply, question)

"""What a long-term memory backend must do, and who a memory belongs to.

Both backends (mem0 and LangGraph stores) answer two questions for one user: "what do you
recall that is close to this question?" and "remember this fact". Scores are similarities
in [0, 1], higher is closer, whatever the backend measures natively.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

__all__ = [
    "DEFAULT_USER",
    "MemoryBackend",
    "MemoryHit",
    "MemoryRecord",
    "fact_text",
    "recall_text",
    "user_id_from_config",
]

DEFAULT_USER = "default"


@dataclass
class MemoryHit:
    """One recalled memory."""

    id: str
    text: str
    score: float
    metadata: dict[str, Any] = field(default_factory=dict)


@dataclass
class MemoryRecord:
    """One fact to remember, with the turn it came from."""

    fact: str
    question: str
    answer: str
    user_id: str
    metadata: dict[str, Any] = field(default_factory=dict)


_ASKED = re.compile(r"\s*\(asked: [^()]*\)\s*$", re.DOTALL)


def recall_text(record: MemoryRecord) -> str:
    """What a memory is found by: the fact and the question that taught it.

    A bare mapping ('"x" is called "y" in these documents') is far from any question in
    embedding space (cosine ~0.3-0.55 with the packaged model), so it would never clear the
    0.7 relevance bar; with the question beside it, a similar question finds it (~0.8).
    """
    question = " ".join(record.question.split())[:300].replace("(", "[").replace(")", "]")
    return f"{record.fact} (asked: {question})" if question else record.fact


def fact_text(text: str) -> str:
    """The fact alone, as injected into search and the prompt (``recall_text`` undone)."""
    return _ASKED.sub("", text).strip()


@runtime_checkable
class MemoryBackend(Protocol):
    """Per-user recall and storage of search facts."""

    #: Short name for traces ("mem0", "store").
    name: str
    #: True when the write path is a coroutine (scheduled as an asyncio task under ainvoke).
    async_native: bool

    def search(self, query: str, user_id: str, limit: int) -> tuple[list[MemoryHit], int]:
        """Hits best first, and how many memories were looked at."""

    async def asearch(
        self, query: str, user_id: str, limit: int
    ) -> tuple[list[MemoryHit], int]: ...

    def add(self, record: MemoryRecord) -> None:
        """Store one fact for ``record.user_id``."""

    async def aadd(self, record: MemoryRecord) -> None: ...


def user_id_from_config(config: Mapping[str, Any] | None) -> str:
    """``configurable.user_id``, else the LangGraph Server auth identity, else ``"default"``."""
    configurable = (config or {}).get("configurable") or {}
    user = configurable.get("user_id")
    if user is not None and str(user).strip():
        return str(user).strip()
    auth = configurable.get("langgraph_auth_user")
    identity = None
    if isinstance(auth, Mapping):
        identity = auth.get("identity")
    elif auth is not None:
        identity = getattr(auth, "identity", None)
    if identity is not None and str(identity).strip():
        return str(identity).strip()
    return DEFAULT_USER

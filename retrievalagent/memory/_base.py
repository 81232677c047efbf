"""What a long-term memory backend must do, and who a memory belongs to.

Both backends (mem0 and LangGraph stores) answer two questions for one user: "what do you
recall that is close to this question?" and "remember this fact". Scores are similarities
in [0, 1], higher is closer, whatever the backend measures natively.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

__all__ = ["DEFAULT_USER", "MemoryBackend", "MemoryHit", "MemoryRecord", "user_id_from_config"]

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

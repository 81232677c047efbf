"""What a long-term memory backend must do, and who a memory belongs to.

Both backends (mem0 and LangGraph stores) answer two questions for one user: "what do you
recall that is close to this question?" and "remember this fact". Scores are similarities
in [0, 1], higher is closer, whatever the backend measures natively.

What a memory is found by. A fact such as '"repository" is called "vault" in these
documents' is far from any question in embedding space: against later questions the
packaged MiniLM scores a bare fact 0.15-0.55, so it would never clear the default
``memory_relevance_threshold`` of 0.7. So a memory is found by the question that taught it:

* ``StoreBackend`` (no store index): the vector of that question (already computed for the
  turn's dense search, so a write embeds nothing); a fact stored without a question is
  found by its own vector. With a store index: the store embeds ``recall_text`` and the
  question.
* ``Mem0Backend`` with ``infer=False`` (``memory=True`` without a model): mem0 stores and
  embeds ``recall_text`` -- the question, then the fact -- and ``fact_text`` gives the
  fact back when it is recalled. The same question scores ~0.85-0.95, a close rewording
  ~0.75, unrelated questions stay below ~0.5.
* ``Mem0Backend`` with ``infer=True``: mem0's LLM decides what is stored. It is sent the
  question and "Search hint for these documents: <recall_text>"; an extractor that keeps
  the question keeps recall working, one that keeps only the bare fact stores something
  that scores ~0.15-0.55 against later questions. With such a model lower
  ``memory_relevance_threshold`` (about 0.4-0.5, and check with ``retrievalagent tune``)
  or pass ``infer=False`` to ``Mem0Backend``.

Recall is by similarity to earlier questions, so a fact learned from one question helps
that question and close rewordings of it, rarely a different question that merely uses the
same word (``bench/memory/alias_bench.py`` measures both).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from retrievalagent._inputs import check_id

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


_HINTED = re.compile(r"^(?P<question>[^()]*) \(search hint: (?P<fact>.*)\)$", re.DOTALL)
_ASKED = re.compile(r"\s*\(asked: [^()]*\)\s*$", re.DOTALL)  # the format of earlier releases


def recall_text(record: MemoryRecord) -> str:
    """The text a memory is found by: the question that taught it, then the fact.

    The question comes first and dominates the embedding (see the module docstring);
    parentheses in it become brackets so ``fact_text`` can split the two unambiguously.
    """
    question = " ".join(record.question.split())[:300].replace("(", "[").replace(")", "]")
    return f"{question} (search hint: {record.fact})" if question else record.fact


def fact_text(text: str) -> str:
    """The fact alone, as injected into search and the prompt (``recall_text`` undone)."""
    text = text.strip()
    hinted = _HINTED.match(text)
    if hinted:
        return hinted.group("fact").strip()
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
    """``configurable.user_id``, else the LangGraph Server auth identity, else ``"default"``.

    The one place a user id is read: it is checked here (a string of at most 256
    characters without control characters, else ``ConfigError``) and trimmed; an empty one
    means "not given". Backends make it safe for their storage (``StoreBackend.namespace``).
    """
    configurable = (config or {}).get("configurable") or {}
    user = configurable.get("user_id")
    if user is not None and (uid := check_id(user, "user_id").strip()):
        return uid
    auth = configurable.get("langgraph_auth_user")
    identity = None
    if isinstance(auth, Mapping):
        identity = auth.get("identity")
    elif auth is not None:
        identity = getattr(auth, "identity", None)
    if identity is not None and (uid := check_id(identity, "langgraph_auth_user.identity").strip()):
        return uid
    return DEFAULT_USER

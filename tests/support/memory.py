"""Pieces of the memory tests: an offline mem0 config, memory records, the sample questions.

Real backends only: mem0 ``Memory`` / ``AsyncMemory`` with an offline config (mem0's
``langchain`` LLM provider around the scripted chat model answering mem0's extraction call,
mem0's ``langchain`` embedder around the packaged MiniLM, Qdrant local mode under a temp
dir) and LangGraph ``InMemoryStore``.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from langchain_core.embeddings import Embeddings
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import BaseMessage

from retrievalagent.memory import MemoryRecord
from retrievalagent.types import Grade
from tests.support.chat import ScriptedChatModel, prompt_text

__all__ = [
    "ALIASES",
    "SAMPLE_QUESTIONS",
    "CountingEmbeddings",
    "extracted_hints",
    "learned_grade",
    "mem0_config",
    "mem0_extractor",
    "record",
    "trace_events",
]

SAMPLE_QUESTIONS = json.loads(
    (
        Path(__file__).resolve().parents[2] / "retrievalagent" / "sample_docs" / "questions.json"
    ).read_text(encoding="utf-8")
)
ALIASES = {q["alias"]: q for q in SAMPLE_QUESTIONS if q["kind"] == "alias"}

# mem0 2.2 lists the new messages as "role: content" lines under "## New Messages" in the user
# prompt of its one extraction call; the agent's assistant turn reads "Search hint for these
# documents: <question> (search hint: <fact>)" (``recall_text``).
_HINT = re.compile(r"^assistant: Search hint for these documents: (.+)$", re.MULTILINE)


def extracted_hints(messages: list[BaseMessage]) -> str:
    """mem0's extraction reply: ``{"memory": [{"id", "text"}]}`` with the hints it finds in
    the new messages, exactly the JSON mem0's additive extraction expects."""
    prompt = prompt_text(messages)
    new = prompt.rsplit("## New Messages", 1)[-1]  # the system prompt has examples too
    facts = [raw.strip() for raw in _HINT.findall(new.split("## Observation Date", 1)[0])]
    body = {"memory": [{"id": str(i), "text": f} for i, f in enumerate(dict.fromkeys(facts))]}
    return json.dumps(body)


def mem0_extractor() -> ScriptedChatModel:
    """Stands in for mem0's LLM (its words only): replies with ``extracted_hints``."""
    return ScriptedChatModel(replies=[extracted_hints])


def mem0_config(path: Path, embeddings: Any, llm: BaseChatModel | None = None) -> dict[str, Any]:
    """An offline mem0 config: nothing leaves the machine."""
    from retrievalagent.memory._embedded import offline_mem0_config

    return offline_mem0_config(
        path, llm or mem0_extractor(), embeddings, 384, collection_name="memories"
    )


def learned_grade(fact: str, key: str, kind: str | None = None) -> Grade:
    """A grade that learns ``fact`` under ``key``: a preference with ``kind="preference"``,
    else a search fact (the grader's words for a turn worth remembering)."""
    extra: dict[str, Any] = {"memory_kind": kind} if kind else {}
    return Grade(
        sufficient=True,
        confidence=0.9,
        memory_worth_storing=True,
        memory_key=key,
        memory_confidence=0.95,
        memory_fact=fact,
        **extra,
    )


def record(fact: str, user: str = "alice", question: str = "") -> MemoryRecord:
    """A memory record of ``fact`` for ``user``."""
    return MemoryRecord(fact=fact, question=question, answer="", user_id=user)


def trace_events(state: Any, node: str) -> list[dict[str, Any]]:
    """The trace events one graph node wrote."""
    return [e for e in state.trace if e.get("node") == node]


class CountingEmbeddings(Embeddings):
    """``inner``'s embeddings, with the size of every call in ``calls`` (a query is a call
    of one text): for tests of how work is batched."""

    def __init__(self, inner: Embeddings) -> None:
        self.inner = inner
        self.calls: list[int] = []

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        self.calls.append(len(texts))
        return self.inner.embed_documents(texts)

    def embed_query(self, text: str) -> list[float]:
        return self.embed_documents([text])[0]

"""Shared parts of the memory tests (no tests here).

Real backends only: mem0 ``Memory`` / ``AsyncMemory`` with an offline config (mem0's
``langchain`` LLM provider around a fake chat model that answers mem0's extraction call,
mem0's ``langchain`` embedder around the packaged MiniLM, Qdrant local mode under a temp
dir) and LangGraph ``InMemoryStore``. Slow or failing backends wrap the real ones.
"""

from __future__ import annotations

import json
import re
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from pydantic import PrivateAttr

from retrievalagent.memory import MemoryRecord

SAMPLE_QUESTIONS = json.loads(
    (
        Path(__file__).resolve().parents[1] / "retrievalagent" / "sample_docs" / "questions.json"
    ).read_text(encoding="utf-8")
)
ALIASES = {q["alias"]: q for q in SAMPLE_QUESTIONS if q["kind"] == "alias"}

# mem0 2.2 lists the new messages as "role: content" lines under "## New Messages" in the user
# prompt of its one extraction call; the agent's assistant turn reads "Search hint for these
# documents: <question> (search hint: <fact>)" (``recall_text``).
_HINT = re.compile(r"^assistant: Search hint for these documents: (.+)$", re.MULTILINE)


class Mem0Extractor(BaseChatModel):
    """Stands in for mem0's LLM: replies ``{"memory": [{"id", "text"}]}`` with the hint it
    finds in the new messages, exactly the JSON mem0's additive extraction expects."""

    _calls: list[str] = PrivateAttr(default_factory=list)

    @property
    def _llm_type(self) -> str:
        return "mem0-extractor-fake"

    @property
    def calls(self) -> list[str]:
        return self._calls

    def _generate(
        self, messages: Sequence[BaseMessage], stop: Any = None, run_manager: Any = None, **kw: Any
    ) -> ChatResult:
        prompt = "\n".join(str(m.content) for m in messages)
        self._calls.append(prompt)
        new = prompt.rsplit("## New Messages", 1)[-1]  # the system prompt has examples too
        facts = [raw.strip() for raw in _HINT.findall(new.split("## Observation Date", 1)[0])]
        body = {"memory": [{"id": str(i), "text": f} for i, f in enumerate(dict.fromkeys(facts))]}
        return ChatResult(generations=[ChatGeneration(message=AIMessage(json.dumps(body)))])


def mem0_config(path: Path, embeddings: Any, llm: BaseChatModel | None = None) -> dict[str, Any]:
    """An offline mem0 config: nothing leaves the machine."""
    return {
        "llm": {"provider": "langchain", "config": {"model": llm or Mem0Extractor()}},
        "embedder": {"provider": "langchain", "config": {"model": embeddings}},
        "vector_store": {
            "provider": "qdrant",
            "config": {
                "collection_name": "memories",
                "path": str(path / "qdrant"),
                "embedding_model_dims": 384,
                "on_disk": True,
            },
        },
        "history_db_path": str(path / "history.db"),
    }


def record(fact: str, user: str = "alice", question: str = "") -> MemoryRecord:
    return MemoryRecord(fact=fact, question=question, answer="", user_id=user)


class SlowAdd:
    """A real memory backend object whose writes take ``delay`` seconds (or raise)."""

    def __init__(self, inner: Any, delay: float = 0.5, error: Exception | None = None) -> None:
        self._inner = inner
        self.delay = delay
        self.error = error
        self.adds = 0
        self.lock = threading.Lock()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    def add(self, *args: Any, **kwargs: Any) -> Any:
        time.sleep(self.delay)
        with self.lock:
            self.adds += 1
        if self.error is not None:
            raise self.error
        return self._inner.add(*args, **kwargs)


def trace_events(state: Any, node: str) -> list[dict[str, Any]]:
    return [e for e in state.trace if e.get("node") == node]

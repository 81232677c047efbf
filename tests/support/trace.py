"""Real turns that leave every kind of trace event, and a check of their keys against
``retrievalagent.trace``.

Used by ``tests/test_trace.py`` and by ``bench/structure.py`` (its count of undocumented
trace keys). The turns run on the real index, embedder, graph and memory store; only the
chat model's words are scripted (``ScriptedChatModel``), and the failing store is a real
``InMemoryStore`` whose calls raise.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, get_args, get_origin

from langchain_core.callbacks import Callbacks
from langchain_core.documents import BaseDocumentCompressor, Document
from langchain_core.embeddings import Embeddings
from langchain_core.messages import BaseMessage
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.store.memory import InMemoryStore

from retrievalagent import init_agent
from retrievalagent.trace import EVENTS, fields
from tests.support.chat import GRADE, ScriptedChatModel, by_kind, system_text

__all__ = ["DOCS", "every_event_kind", "undeclared"]

DOCS = [
    "# Vault encryption\n\nThe vault encrypts every chunk with AES-256-GCM. The passphrase "
    "is stretched with Argon2id using 64 MiB of memory and three passes.",
    "# Snapshots\n\nA snapshot of the vault is taken every six hours and kept for thirty days.",
    "# Recovery sheet\n\nThe recovery sheet holds the 24-word seed that restores a lost vault.",
    "# Error codes\n\nLF-409 means the vault is locked by another process.",
]
QUESTION = "How is the vault password stretched?"
FACT = '"password" is called "passphrase" in these documents'
GOOD = GRADE  # sufficient, nothing worth storing


class Reverse(BaseDocumentCompressor):
    """A reranker that returns the passages in the opposite order."""

    def compress_documents(
        self, documents: Sequence[Document], query: str, callbacks: Callbacks | None = None
    ) -> Sequence[Document]:
        return list(reversed(documents))


class Broken(BaseDocumentCompressor):
    """A reranker whose service is down."""

    def compress_documents(
        self, documents: Sequence[Document], query: str, callbacks: Callbacks | None = None
    ) -> Sequence[Document]:
        raise RuntimeError("reranking service unavailable")


class DownStore(InMemoryStore):
    """A real InMemoryStore whose every call fails, as a store whose server is gone."""

    def batch(self, ops: Any) -> Any:
        raise ConnectionError("store is down")

    async def abatch(self, ops: Any) -> Any:
        raise ConnectionError("store is down")


def _words(kind: str, messages: list[BaseMessage]) -> str:
    if kind == "title":
        return "Vault crypto"
    if kind == "rewrite":
        return "vault passphrase Argon2id"
    return "Argon2id stretches the passphrase [1]."


def _failing_rewrite(kind: str, messages: list[BaseMessage]) -> str:
    if kind == "rewrite":
        raise ValueError("rewriter reply is empty")
    return _words(kind, messages)


def _inline(*grades: Any) -> Callable[[list[BaseMessage]], Any]:
    """Structured replies in order (the last repeats): inline answer+grade replies where the
    prompt asks for both, plain grades otherwise."""
    script = list(grades)

    def reply(messages: list[BaseMessage]) -> Any:
        item = script.pop(0) if len(script) > 1 else script[0]
        if isinstance(item, Exception):
            raise item
        if "Fill the JSON fields" in system_text(messages):
            return {"answer": "Argon2id stretches the passphrase [1].", **item}
        return item

    return reply


def _records(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def every_event_kind(embeddings: Embeddings, folder: Path) -> list[dict[str, Any]]:
    """Every trace event of a few real turns, late failure events included; together they
    leave each node's event in its main variants. The agents (in-memory indexes, data and
    trace files under ``folder``) are closed before it returns."""
    made: list[Any] = []

    def make_agent(collection: str, **kwargs: Any) -> Any:
        kwargs.update(backend_url=":memory:", embeddings=embeddings, data_dir=folder)
        made.append(init_agent(collection, **kwargs))
        return made[-1]

    try:
        return _turns(make_agent, folder)
    finally:
        for agent in made:
            agent.close()


def _turns(make_agent: Callable[..., Any], folder: Path) -> list[dict[str, Any]]:
    events: list[dict[str, Any]] = []
    # 1. Memory store, inline grading, a reranker, LLM titles: the first answer is graded
    #    insufficient and the query rewritten; the second stores a search fact.
    stored = {**GOOD, "memory_worth_storing": True, "memory_confidence": 0.95}
    rag = make_agent(
        "trace-memory",
        model=ScriptedChatModel(
            replies=[by_kind(_words)],
            grades=[
                _inline(
                    {**GOOD, "sufficient": False, "confidence": 0.2},
                    {**stored, "memory_fact": FACT, "memory_key": "password"},
                    {**stored, "memory_fact": "x" * 400},  # too long to store
                    ValueError("not JSON"),  # unusable inline reply: answered separately
                    # learned in t1, said again in t2: written again, now t2's ...
                    {**stored, "memory_fact": FACT, "memory_key": "password"},
                    # ... and a third time in t2: already known there
                    {**stored, "memory_fact": FACT, "memory_key": "password"},
                )
            ],
        ),
        memory_store=InMemoryStore(),
        checkpointer=InMemorySaver(),
        reranker=Reverse(),
        rerank_k=4,
        grading="inline",
        thread_title="llm",
        trace_file=folder / "memory.jsonl",
    )
    rag.add_documents(DOCS, progress=False)
    alice = {"configurable": {"user_id": "alice", "thread_id": "t1", "now": "2024-05-06T10:00"}}
    rag.invoke(QUESTION, config=alice)
    rag.drain_background(timeout=30)
    later = {"configurable": {"user_id": "alice", "thread_id": "t2", "now": "2024-05-07T10:00"}}
    rag.invoke("What did I ask yesterday about the vault password?", config=later)
    asyncio.run(rag.ainvoke("Is the vault password stretched?", config=later))
    rag.drain_background(timeout=30)
    rag.invoke("Where is the vault password kept?", config=later)
    rag.drain_background(timeout=30)
    events += [e for record in _records(folder / "memory.jsonl") for e in record["trace"]]

    # 2. A memory store that is down, a reranker that fails, a grader and a rewriter whose
    #    replies cannot be used: every failure the trace reports, late write failures too.
    rag = make_agent(
        "trace-failures",
        model=ScriptedChatModel(
            replies=[by_kind(_failing_rewrite)], grades=[ValueError("grader reply is not JSON")]
        ),
        memory_store=DownStore(),
        reranker=Broken(),
        trace_file=folder / "failures.jsonl",
    )
    rag.add_documents(DOCS, progress=False)
    rag.invoke(QUESTION, config={"configurable": {"user_id": "bob"}})
    rag.drain_background(timeout=30)
    events += [e for record in _records(folder / "failures.jsonl") for e in record["trace"]]

    # 3. Offline, no memory backend.
    rag = make_agent("trace-offline")
    rag.add_documents(DOCS, progress=False)
    events += rag.invoke(QUESTION).trace
    return events


def _is_typeddict(tp: Any) -> bool:
    return isinstance(tp, type) and hasattr(tp, "__required_keys__")


def _nested(value: Any, tp: Any, path: str) -> list[tuple[str, Any, Any]]:
    """(path, value, TypedDict) for each dict inside ``value`` that ``tp`` declares."""
    if _is_typeddict(tp) and isinstance(value, dict):
        return [(path, value, tp)]
    origin, args = get_origin(tp), get_args(tp)
    if origin is list and args and isinstance(value, list):
        return [n for v in value for n in _nested(v, args[0], f"{path}[]")]
    if origin is dict and len(args) == 2 and isinstance(value, dict):
        return [n for k, v in value.items() for n in _nested(v, args[1], f"{path}.<{k}>")]
    return []


def undeclared(event: dict[str, Any]) -> list[str]:
    """The keys of ``event`` (and of the dicts inside it) its node's TypedDict does not
    declare, as ``node.key`` paths (``write_memory.conversation.facts``)."""
    node = event.get("node")
    if node not in EVENTS:
        return [f"{node}"]
    missing: list[str] = []
    todo = [(str(node), event, EVENTS[node])]
    while todo:
        path, value, tp = todo.pop()
        declared = {f.key: f.type for f in fields(tp)}
        for key, item in value.items():
            if key not in declared:
                missing.append(f"{path}.{key}")
            else:
                todo += _nested(item, declared[key], f"{path}.{key}")
    return sorted(missing)

"""The memory examples of the spec page (seed 003) run as written.

They run in one fresh interpreter, so mem0's import-time defaults (``MEM0_DIR``, its
history database under ``$HOME``) land in a temp dir, as they would for a user who sets
them. The hosted models are the local OpenAI-compatible server over real HTTP (chat:
answers, structured grades, mem0's extraction JSON; embeddings: the packaged MiniLM padded
to the requested width) and ``http://localhost:6333`` is the Qdrant REST shim. The
``AsyncPostgresStore`` example is covered by the persistence tests.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import textwrap
from typing import Any

import pytest

FACT = '"German" is called "Deutsch" in these documents'

# Faithful copies of the page's code blocks; PRINT(...) lines after each report results.
EXAMPLES = {
    "minimal_mem0": """
from retrievalagent import init_agent
from mem0 import Memory  # or AsyncMemory

rag = init_agent(
    "docs",
    model="openai:gpt-5.4",
    backend="qdrant",
    backend_url="http://localhost:6333",
    mem0_memory=Memory(),
)

config = {"configurable": {"user_id": "alice"}}

first = rag.invoke("I prefer answers in German.", config=config)
drained = rag.drain_background()
second = rag.invoke("What is hybrid search?", config=config)
PRINT(first=first, second=second, drained=drained,
      stored=rag.memory.memory.get_all(filters={"user_id": "alice"}))
""",
    "mem0_from_config": """
from mem0 import Memory

mem = Memory.from_config({
    "vector_store": {
        "provider": "qdrant",
        "config": {"host": "localhost", "port": 6333, "collection_name": "user_memories"},
    },
    "llm": {
        "provider": "openai",
        "config": {"model": "gpt-5.4-mini"},
    },
    "embedder": {
        "provider": "openai",
        "config": {"model": "text-embedding-3-small"},
    },
})

rag = init_agent("docs", model="openai:gpt-5.4", backend="qdrant", mem0_memory=mem)
first = rag.invoke("I prefer answers in German.", config={"configurable": {"user_id": "alice"}})
drained = rag.drain_background()
state = rag.invoke("What is hybrid search?", config={"configurable": {"user_id": "alice"}})
for step in state.trace:
    if step["node"] == "read_memory":
        print("Recalled facts:\\n", step.get("memories"))
PRINT(first=first, second=state, drained=drained,
      stored=mem.get_all(filters={"user_id": "alice"}))
""",
    "memory_true": """
rag = init_agent("docs", model="openai:gpt-5.4", memory=True)
first = rag.invoke("I prefer answers in German.", config={"configurable": {"user_id": "alice"}})
drained = rag.drain_background()
second = rag.invoke("What is hybrid search?", config={"configurable": {"user_id": "alice"}})
PRINT(first=first, second=second, drained=drained,
      stored=rag.memory.memory.get_all(filters={"user_id": "alice"}))
""",
    "memory_store": """
from retrievalagent import init_agent
from langgraph.store.memory import InMemoryStore

rag = init_agent(
    "docs",
    model="openai:gpt-5.4",
    backend="qdrant",
    backend_url="http://localhost:6333",
    memory_store=InMemoryStore(),
)

# Scope memories to a user with user_id
config = {"configurable": {"user_id": "alice"}}

first = rag.invoke("I prefer answers in German.", config=config)
drained = rag.drain_background()
second = rag.invoke("I prefer answers in German.", config=config)
PRINT(first=first, second=second, drained=drained)
""",
    "combined": """
from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.store.memory import InMemoryStore

rag = init_agent(
    "docs",
    model="openai:gpt-5.4",
    backend="qdrant",
    checkpointer=SqliteSaver.from_conn_string("./memory.db"),
    memory_store=InMemoryStore(),
)

config = {"configurable": {"thread_id": "session-1", "user_id": "alice"}}
state = rag.invoke("What is hybrid search?", config=config)

# state.trace includes a 'read_memory' entry showing what was recalled
for step in state.trace:
    if step["node"] == "read_memory":
        print("Recalled:", step.get("memories"))
PRINT(first=state, second=state, drained=rag.drain_background())
""",
}

HARNESS = """
import json, os
os.environ.setdefault("MEM0_TELEMETRY", "False")
from retrievalagent import init_agent

# mem0's default local Qdrant folder is the fixed /tmp/qdrant, shared by every process on
# the machine: point it at this example's temp dir, as MEM0_DIR and HOME are, so repeated
# and concurrent test runs never see each other's memories (nor fight over its lock).
import mem0.vector_stores.qdrant as _mem0_qdrant
_RealQdrantClient = _mem0_qdrant.QdrantClient

def _isolated_qdrant(*args, path=None, **kwargs):
    if path == "/tmp/qdrant":
        path = os.path.join(os.getcwd(), "mem0-default-qdrant")
    return _RealQdrantClient(*args, path=path, **kwargs)

_mem0_qdrant.QdrantClient = _isolated_qdrant

def PRINT(first, second, drained, stored=None):
    keep = ("read_memory", "final_grade", "write_memory")
    out = {
        "first": [e for e in first.trace if e["node"] in keep],
        "second": [e for e in second.trace if e["node"] in keep],
        "first_fact": first.memory_fact,
        "second_context": second.memory_context,
        "answer": second.answer,
        "drained": dict(drained),
        "stored": [m.get("memory") for m in (stored or {}).get("results", [])],
    }
    print("RESULT " + json.dumps(out, default=str), flush=True)
"""


def _responder(request: Any) -> Any:
    """The hosted model's words: an answer, a structured grade, or mem0's extraction."""
    if request.json_schema is not None:  # the grader (with_structured_output -> json_schema)
        german = "Question: I prefer answers in German." in request.last_user_message
        return {
            "sufficient": True,
            "confidence": 0.9 if german else 0.85,
            "memory_worth_storing": german,
            "memory_confidence": 0.92 if german else 0.0,
            "memory_fact": FACT if german else "",
        }
    if "## New Messages" in request.last_user_message:  # mem0's fact extraction call
        new = request.last_user_message.rsplit("## New Messages", 1)[-1]
        new = new.split("## Observation Date", 1)[0]
        hints = re.findall(r"^assistant: Search hint for these documents: (.+)$", new, re.M)
        return {"memory": [{"id": str(i), "text": h.strip()} for i, h in enumerate(hints)]}
    return "Hybrid search combines BM25 keyword scores with dense vector similarity [1]."


@pytest.fixture(scope="module")
def results(
    openai_server_session: Any,
    qdrant_server_6333_session: Any,
    minilm: Any,
    tmp_path_factory: pytest.TempPathFactory,
) -> dict[str, dict[str, Any]]:
    server, shim = openai_server_session, qdrant_server_6333_session
    server.reset()
    shim.reset()
    server.responder = _responder

    def embed(texts: list[str], dims: int) -> list[list[float]]:
        return [v + [0.0] * (dims - len(v)) for v in minilm.embed_documents(list(texts))]

    server.embed = embed
    out: dict[str, dict[str, Any]] = {}
    try:
        for name, code in EXAMPLES.items():
            tmp = tmp_path_factory.mktemp(f"seed-{name}")
            env = {
                **os.environ,
                "OPENAI_BASE_URL": server.base_url,
                "OPENAI_API_BASE": server.base_url,
                "OPENAI_API_KEY": "sk-test-local",
                "MEM0_DIR": str(tmp / "mem0"),
                "HOME": str(tmp / "home"),
                "RAG_DATA_DIR": str(tmp / "data"),
                "MEM0_TELEMETRY": "False",
            }
            for var in ("OPENROUTER_API_KEY", "AZURE_OPENAI_ENDPOINT", "AZURE_OPENAI_API_KEY"):
                env.pop(var, None)
            script = HARNESS + textwrap.dedent(code)
            proc = subprocess.run(
                [sys.executable, "-c", script], cwd=tmp, env=env, capture_output=True,
                text=True, timeout=240, check=False,
            )  # fmt: skip
            lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT ")]
            assert proc.returncode == 0 and lines, f"{name} failed:\n{proc.stderr[-3000:]}"
            out[name] = {**json.loads(lines[-1][7:]), "stdout": proc.stdout}
            assert not (tmp / "home" / ".mem0").exists() or name == "memory_true"
    finally:
        server.reset()
        shim.reset()
    return out


def _one(events: list[dict[str, Any]], node: str) -> dict[str, Any]:
    (event,) = [e for e in events if e["node"] == node]
    return event


@pytest.mark.parametrize("name", ["minimal_mem0", "mem0_from_config", "memory_true"])
def test_mem0_examples(results: dict[str, dict[str, Any]], name: str) -> None:
    res = results[name]
    grade = _one(res["first"], "final_grade")
    assert grade["memory_should_store"] is True and grade["memory_confidence"] == 0.92
    assert res["first_fact"] == FACT
    assert _one(res["first"], "write_memory")["scheduled"] is True
    assert res["drained"] == {"landed": 1, "failed": 0, "pending": 0}
    assert any(FACT in (m or "") for m in res["stored"])  # mem0 extracted it via its LLM
    read = _one(res["second"], "read_memory")
    assert read["n_scanned"] == 1 and "threshold" in read, res["stored"]  # scored for alice
    second_grade = _one(res["second"], "final_grade")
    assert second_grade["memory_should_store"] is False
    assert second_grade["memory_confidence"] == 0.0
    assert _one(res["second"], "write_memory")["skipped"] == "not_worth_storing"
    assert res["answer"].startswith("Hybrid search combines")


@pytest.mark.parametrize("name", ["memory_store"])
def test_recall_fires_on_the_next_turn(results: dict[str, dict[str, Any]], name: str) -> None:
    res = results[name]
    assert res["drained"] == {"landed": 1, "failed": 0, "pending": 0}
    read = _one(res["second"], "read_memory")
    assert "memories" in read, res
    assert read["memories"] == f"- {FACT}" and read["n_kept"] == 1
    assert read["n_scanned"] == 1 and read["threshold"] == 0.7
    assert res["second_context"] == f"- {FACT}"
    assert _one(res["second"], "write_memory")["skipped"] == "already_known"


def test_combined_example(results: dict[str, dict[str, Any]]) -> None:
    res = results["combined"]
    read = _one(res["first"], "read_memory")
    assert read["skipped"] == "no_memories"
    assert "Recalled: None" in res["stdout"]

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

from tests.seed_examples import find_block

PREFERENCE = "Answer in German."
QUESTION = "What is hybrid search?"
BOB_QUESTION = "What is dense search?"  # another user, right after alice stated hers
NEW_THREAD_QUESTION = "What is BM25?"  # alice again, in a thread of her own


def _block(*names: str) -> str:
    """One code block of the spec page, exactly as the page prints it."""
    return find_block(*names).code


# Each example is one or more of the page's own blocks, run as written, then a few lines
# that ask what the page promises: alice's later turns (any thread) carry her preference,
# bob's do not.
def _examples() -> dict[str, str]:
    follow_up = f"""
drained = rag.drain_background()
rag.invoke({BOB_QUESTION!r}, config={{"configurable": {{"user_id": "bob", "thread_id": "bob-1"}}}})
rag.invoke({NEW_THREAD_QUESTION!r}, config={{"configurable": {{"user_id": "alice", "thread_id": "other"}}}})
"""
    state_first = """
rag.invoke("I prefer answers in German.", config={"configurable": {"user_id": "alice"}})
rag.drain_background()
"""
    inspect = _block('print("Recalled facts', "step[")
    combined = _block("SqliteSaver", "InMemoryStore", "session-1")
    return {
        "minimal_mem0": _block("mem0_memory=Memory()", "I prefer answers in German.")
        + inspect
        + follow_up,
        "mem0_from_config": _block("Memory.from_config") + state_first + inspect + follow_up,
        "memory_true": "from retrievalagent import init_agent\n"
        + _block("memory=True")
        + state_first
        + inspect
        + follow_up,
        "memory_store": _block("memory_store=InMemoryStore()", "I prefer answers in German.")
        + inspect
        + follow_up,
        "combined": "from retrievalagent import init_agent\n"
        + combined
        + 'rag.invoke("I prefer answers in German.", config=config)\n'
        + "rag.drain_background()\n"
        + combined[combined.index("state = rag.invoke") :]
        + follow_up,
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

import atexit

def _report():
    rag = globals()["rag"]
    out = {user: rag.list_memories(user) for user in ("alice", "bob")}
    print("RESULT " + json.dumps(out, default=str), flush=True)

atexit.register(_report)
"""


class HostedModel:
    """The hosted model's words (an answer, a structured grade, mem0's extraction); it
    records every answer request, which is where a preference must show."""

    def __init__(self) -> None:
        self.answers: list[tuple[str, str]] = []  # (question, system prompt)

    def __call__(self, request: Any) -> Any:
        if request.json_schema is not None:  # the grader (with_structured_output)
            stated = "Question: I prefer answers in German." in request.last_user_message
            return {
                "sufficient": True,
                "confidence": 0.9,
                "memory_worth_storing": stated,
                "memory_kind": "preference" if stated else "search_fact",
                "memory_key": "language" if stated else "",
                "memory_confidence": 0.92 if stated else 0.0,
                "memory_fact": PREFERENCE if stated else "",
            }
        if "## New Messages" in request.last_user_message:  # mem0's own extraction call
            new = request.last_user_message.rsplit("## New Messages", 1)[-1]
            new = new.split("## Observation Date", 1)[0]
            said = re.findall(r"^user: (.+)$", new, re.M)
            return {"memory": [{"id": str(i), "text": t.strip()} for i, t in enumerate(said)]}
        if "Passages:" in request.system_prompt:  # an answer (not a thread title)
            self.answers.append((request.last_user_message, request.system_prompt))
        return "Hybrid search combines BM25 keyword scores with dense vector similarity [1]."

    def prompts(self, question: str) -> list[str]:
        return [system for asked, system in self.answers if asked == question]


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
    examples = _examples()

    def embed(texts: list[str], dims: int) -> list[list[float]]:
        return [v + [0.0] * (dims - len(v)) for v in minilm.embed_documents(list(texts))]

    server.embed = embed
    out: dict[str, dict[str, Any]] = {}
    try:
        for name, code in examples.items():
            model = HostedModel()
            server.responder = model
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
            out[name] = {**json.loads(lines[-1][7:]), "stdout": proc.stdout, "model": model}
            assert not (tmp / "home" / ".mem0").exists() or name == "memory_true"
    finally:
        server.reset()
        shim.reset()
    return out


@pytest.mark.parametrize(
    "name", ["minimal_mem0", "mem0_from_config", "memory_true", "memory_store", "combined"]
)
def test_a_stated_preference_reaches_every_later_answer_of_that_user(
    results: dict[str, dict[str, Any]], name: str
) -> None:
    res, model = results[name], results[name]["model"]
    # the turn after "I prefer answers in German." (the page's own second call)
    (second,) = model.prompts(QUESTION)[-1:]
    assert f"- {PREFERENCE}" in second, second[:400]
    # a new thread of the same user still carries it; another user's turn never does
    (other_thread,) = model.prompts(NEW_THREAD_QUESTION)
    assert f"- {PREFERENCE}" in other_thread
    (bob,) = model.prompts(BOB_QUESTION)
    assert PREFERENCE not in bob and "German" not in bob
    # what the agent keeps about each of them, as list_memories shows it: alice's one
    # preference beside what each of them said (conversation memory), never the other's
    kept = [(m["kind"], m["text"]) for m in res["alice"] if m["kind"] != "conversation"]
    assert kept == [("preference", PREFERENCE)]
    assert all(m["kind"] == "conversation" for m in res["bob"])
    assert not any("German" in m["text"] for m in res["bob"])


@pytest.mark.parametrize(
    "name", ["minimal_mem0", "mem0_from_config", "memory_true", "memory_store"]
)
def test_the_pages_inspect_loop_prints_what_was_recalled(
    results: dict[str, dict[str, Any]], name: str
) -> None:
    # the spec's shape: each recalled memory as a "- " line (the prompt's header is not part)
    assert f"Recalled facts:\n - {PREFERENCE}" in results[name]["stdout"]


def test_combined_example_prints_nothing_recalled_then_the_preference(
    results: dict[str, dict[str, Any]],
) -> None:
    stdout = results["combined"]["stdout"]
    first, second = [ln for ln in stdout.splitlines() if ln.startswith("Recalled:")][:2]
    assert first == "Recalled: "  # nothing stored yet: an empty string, never a KeyError
    assert PREFERENCE in stdout.split(second, 1)[0] + second or PREFERENCE in stdout

"""Every program in examples/ runs offline, as a user would run it (a subprocess)."""

from __future__ import annotations

import importlib.util
import os
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import httpx
import pytest

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "examples"
TIMEOUT = 180


def example_env(tmp_path: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("RAG_", "OPENAI_"))}
    env.update(
        RAG_DATA_DIR=str(tmp_path / "data"),
        MEM0_DIR=str(tmp_path / "mem0"),
        MEM0_TELEMETRY="False",
        PYTHONUNBUFFERED="1",
    )
    return env


def run_example(name: str, tmp_path: Path, *args: str) -> str:
    proc = subprocess.run(
        [sys.executable, str(EXAMPLES / name), *args],
        cwd=tmp_path,
        env=example_env(tmp_path),
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
    )
    assert proc.returncode == 0, f"{name} failed:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
    return proc.stdout


def test_every_example_is_tested() -> None:
    tested = {
        "quickstart_offline.py",
        "mem0_memory.py",
        "store_memory.py",
        "postgres_persistence.py",
        "streaming.py",
        "fastapi_app.py",
        "custom_model_and_embeddings.py",
    }
    present = {p.name for p in EXAMPLES.glob("*.py") if not p.name.startswith("_")}
    assert present == tested
    listed = (ROOT / "docs" / "examples.md").read_text(encoding="utf-8")
    for name in present:
        assert f"examples/{name}" in listed, f"{name} is not listed in docs/examples.md"


def test_quickstart_offline_answers_over_a_folder(tmp_path: Path) -> None:
    notes = tmp_path / "notes"
    notes.mkdir()
    (notes / "keys.md").write_text(
        "# API keys\n\nRotate the API keys every 90 days with `deployctl secrets rotate`.\n"
    )
    (notes / "lunch.md").write_text("# Lunch\n\nThe canteen opens at noon.\n")
    out = run_example(
        "quickstart_offline.py", tmp_path, str(notes), "How do I rotate the API keys?"
    )
    assert "2 source(s): 2 new" in out
    assert "deployctl secrets rotate" in out
    assert "[1] API keys" in out
    assert "extractive (offline, no LLM)" in out


def _line(out: str, prefix: str) -> str:
    [line] = [line for line in out.splitlines() if line.startswith(prefix)]
    return line.removeprefix(prefix).strip()


def test_mem0_memory_learns_for_one_user_only(tmp_path: Path) -> None:
    out = run_example("mem0_memory.py", tmp_path)
    fact = _line(out, "fact chosen for memory:")
    assert "backup" in fact and "snapshot" in fact  # the user's word and the corpus's word
    assert "'landed': 2" in out and "'failed': 0" in out  # the fact and the exchange
    recalled = _line(out, "alice recalled:")
    assert "backup" in recalled and "snapshot" in recalled
    assert "  [search_fact] " in out  # the fact, and what she asked before, dated
    assert "  [conversation] user: How long is a backup kept?" in out
    # only the documents' word is searched for: the user's word is absent from the corpus
    assert _line(out, "memory terms added to BM25:").startswith("snapshot")
    assert _line(out, "bob recalled:") == "(nothing)"


def test_store_memory_sync_and_async(tmp_path: Path) -> None:
    out = run_example("store_memory.py", tmp_path)
    stored = _line(out, "stored for alice:")
    assert "backup" in stored and "snapshot" in stored
    assert _line(out, "alice recalled (async):") == stored
    assert _line(out, "said by alice:").startswith("user: How long is a backup kept?")
    assert "How long is a backup kept?" in _line(out, "alice's earlier exchange (async):")
    assert _line(out, "carol recalled (async):") == "-"


def test_streaming_nodes_then_tokens(tmp_path: Path) -> None:
    out = run_example("streaming.py", tmp_path)
    lines = out.splitlines()
    assert lines[0] == "[node] prepare"
    assert "[node] fuse (3 passages)" in out
    assert "LF-409" in out
    assert "[result] 3 sources" in out
    [async_line] = [line for line in lines if line.startswith("[async nodes] ")]
    nodes = async_line.removeprefix("[async nodes] ").split(" -> ")
    assert nodes[0] == "prepare" and nodes[-3:] == ["generate", "final_grade", "write_memory"]
    assert set(nodes[1:4]) == {"read_memory", "dense_search", "lexical_search"}
    assert nodes.index("read_memory") < nodes.index("lexical_search")


def test_custom_model_and_embeddings(tmp_path: Path) -> None:
    out = run_example("custom_model_and_embeddings.py", tmp_path)
    assert "written by: llm:FirstSentenceModel" in out
    assert "answer: The vault is the encrypted folder" in out
    assert (
        "streamed: ['A ', 'snapshot ', 'is ', 'taken ', 'every ', 'six ', 'hours. ', '[1]']" in out
    )


def test_postgres_persistence_resumes_in_a_new_process(tmp_path: Path, postgres_url: str) -> None:
    thread = f"example-{uuid.uuid4().hex[:12]}"
    first = run_example("postgres_persistence.py", tmp_path, postgres_url, thread)
    assert "turn 1: How often is a snapshot taken?" in first
    second = run_example("postgres_persistence.py", tmp_path, postgres_url, thread)
    assert "turn 2: How long is it kept?" in second
    assert "thirty days" in second
    assert second.count("human:") == 2 and second.count("ai:") == 2
    assert f"('{thread}', 'How often is a snapshot taken?', 4)" in second


def test_postgres_persistence_says_how_to_run_it(tmp_path: Path) -> None:
    proc = subprocess.run(
        [sys.executable, str(EXAMPLES / "postgres_persistence.py")],
        cwd=tmp_path,
        env=example_env(tmp_path),
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
    )
    assert proc.returncode != 0
    assert "usage:" in proc.stderr


# -- the FastAPI example -------------------------------------------------------------------


def load_fastapi_example() -> ModuleType:
    sys.path.insert(0, str(EXAMPLES))
    try:
        spec = importlib.util.spec_from_file_location(
            "fastapi_example", EXAMPLES / "fastapi_app.py"
        )
        assert spec and spec.loader
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
    finally:
        sys.path.remove(str(EXAMPLES))
    return module


@pytest.fixture
def api(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    from fastapi.testclient import TestClient

    monkeypatch.setenv("RAG_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.delenv("RAG_MODEL", raising=False)
    monkeypatch.delenv("EXAMPLE_DOCS", raising=False)
    module = load_fastapi_example()
    with TestClient(module.app) as client:
        yield client


def test_fastapi_example_keeps_users_and_threads_apart(api: Any) -> None:
    first = api.post(
        "/ask",
        json={"question": "How long is a snapshot kept?", "user_id": "alice", "thread_id": "a1"},
    )
    assert first.status_code == 200
    body = first.json()
    assert "thirty days" in body["answer"] and body["thread_id"] == "a1"
    assert body["sources"][0]["headings"] == ["Snapshots"]

    follow = api.post(
        "/ask", json={"question": "How do I restore a file?", "user_id": "alice", "thread_id": "a1"}
    ).json()
    assert "lantern restore" in follow["answer"]

    fresh = api.post("/ask", json={"question": "What is LF-409?", "user_id": "bob"}).json()
    assert fresh["thread_id"] != "a1" and len(fresh["thread_id"]) == 32

    alice_threads = api.get("/threads/alice").json()
    assert [(t["thread_id"], t["message_count"]) for t in alice_threads] == [("a1", 4)]
    assert alice_threads[0]["title"] == "How long is a snapshot kept?"
    assert [t["thread_id"] for t in api.get("/threads/bob").json()] == [fresh["thread_id"]]
    assert api.get("/threads/bob/a1").status_code == 404  # not bob's conversation
    roles = [m["role"] for m in api.get("/threads/alice/a1").json()]
    assert roles == ["human", "ai", "human", "ai"]

    bad = api.post("/ask", json={"question": "", "user_id": "alice"})
    assert bad.status_code == 422


def test_fastapi_example_streams_server_sent_events(api: Any) -> None:
    with api.stream(
        "POST", "/ask/stream", json={"question": "What does LF-409 mean?", "user_id": "carol"}
    ) as response:
        assert response.headers["content-type"].startswith("text/event-stream")
        text = "".join(response.iter_text())
    kinds = [line.split(": ", 1)[1] for line in text.splitlines() if line.startswith("event: ")]
    assert kinds[0] == "node" and kinds[-1] == "result" and "token" in kinds
    assert kinds.index("token") > kinds.index("node")
    assert '"answer": ' in text and "LF-409" in text


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_fastapi_example_serves_over_http(tmp_path: Path) -> None:
    """``python examples/fastapi_app.py --port N`` serves real HTTP requests."""
    port = _free_port()
    proc = subprocess.Popen(
        [sys.executable, str(EXAMPLES / "fastapi_app.py"), "--port", str(port)],
        cwd=tmp_path,
        env=example_env(tmp_path),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        base = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + TIMEOUT
        while True:
            assert proc.poll() is None, (
                f"server exited:\n{proc.stdout.read() if proc.stdout else ''}"
            )
            try:
                if httpx.get(f"{base}/health", timeout=2).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            assert time.monotonic() < deadline, "the example server did not start"
            time.sleep(0.3)
        reply = httpx.post(
            f"{base}/ask",
            json={
                "question": "How often is a snapshot taken?",
                "user_id": "dave",
                "thread_id": "d",
            },
            timeout=60,
        )
        assert reply.status_code == 200
        assert "every six hours" in reply.json()["answer"]
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()

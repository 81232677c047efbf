"""Conversations outlive their process: one process answers two turns and exits, a new one
resumes the thread with both turns in view, answers a third and is SIGKILLed the moment it
returns — and the third turn is still there (SQLite file and PostgreSQL)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from tests.support.persistence import SMALL_DOCS

pytestmark = pytest.mark.timeout(180)

ROOT = Path(__file__).resolve().parents[1]

WORKER = textwrap.dedent(
    """
    import json, sys, time
    mode, backend, conn, data_dir, docs = sys.argv[1:6]
    from retrievalagent import init_agent
    if backend == "sqlite":
        from langgraph.checkpoint.sqlite import SqliteSaver
        checkpointer = SqliteSaver.from_conn_string(conn)
    else:
        from langgraph.checkpoint.postgres import PostgresSaver
        checkpointer = PostgresSaver.from_conn_string(conn)
        checkpointer.setup()
    rag = init_agent("restart", checkpointer=checkpointer, data_dir=data_dir)
    config = {"configurable": {"thread_id": "conversation-1", "user_id": "alice"}}
    if mode == "first":
        rag.add_documents(json.loads(docs))
        rag.invoke("How are snapshots restored?", config)
        rag.invoke("How often are snapshots taken?", config)
        rag.close()
        print(json.dumps({"done": True}), flush=True)
    else:
        before = [m.type for m in rag.get_history("conversation-1")]
        state = rag.invoke("How many snapshots may a tenant keep?", config)
        generate = [e for e in state.trace if e["node"] == "generate"][0]
        threads = [t.to_dict() for t in rag.list_threads("alice")]
        print(json.dumps({"before": before, "sent": generate["history_messages"],
                          "threads": threads}), flush=True)
        time.sleep(120)   # the test kills us here, right after the turn returned
    """
)


def start(mode: str, backend: str, conn: str, data_dir: Path) -> subprocess.Popen[str]:
    docs = json.dumps(SMALL_DOCS) if mode == "first" else "[]"
    return subprocess.Popen(
        [sys.executable, "-c", WORKER, mode, backend, conn, str(data_dir), docs],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def finish_first(proc: subprocess.Popen[str]) -> None:
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, err[-3000:]
    assert json.loads(out.strip().splitlines()[-1]) == {"done": True}


def kill_after_turn(proc: subprocess.Popen[str]) -> dict[str, Any]:
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()  # blocks until the third turn has returned
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(30)
    finally:
        if proc.poll() is None:  # pragma: no cover - only when the readline failed
            proc.kill()
            proc.wait(30)
    assert proc.returncode == -signal.SIGKILL
    assert line, proc.stderr.read()[-3000:] if proc.stderr else "no output"
    return json.loads(line)


def stored_messages(backend: str, conn: str) -> list[str]:
    """The thread's messages as the database has them after the kill."""
    config = {"configurable": {"thread_id": "conversation-1", "checkpoint_ns": ""}}
    if backend == "sqlite":
        from langgraph.checkpoint.sqlite import SqliteSaver

        with SqliteSaver.from_conn_string(conn) as saver:
            tup = saver.get_tuple(config)
    else:
        from langgraph.checkpoint.postgres import PostgresSaver

        with PostgresSaver.from_conn_string(conn) as saver:
            tup = saver.get_tuple(config)
    assert tup is not None
    return [m.type for m in tup.checkpoint["channel_values"]["messages"]]


def test_restart_resumes_and_sigkill_loses_no_turn(tmp_path: Path, pg_schema_url: str) -> None:
    """SQLite and PostgreSQL side by side (their processes run in parallel, to save time)."""
    setups = {
        "sqlite": (str(tmp_path / "conversations.db"), tmp_path / "sqlite-data"),
        "postgres": (pg_schema_url, tmp_path / "postgres-data"),  # data dir: the index, on disk
    }
    firsts = [start("first", b, conn, data) for b, (conn, data) in setups.items()]
    for proc in firsts:
        finish_first(proc)

    resumers = {b: start("resume", b, conn, data) for b, (conn, data) in setups.items()}
    for backend, proc in resumers.items():
        resumed = kill_after_turn(proc)
        assert resumed["before"] == ["human", "ai", "human", "ai"], backend  # both turns
        assert resumed["sent"] == 4, backend  # ... and both reached the model's history
        (thread,) = resumed["threads"]
        assert thread["thread_id"] == "conversation-1" and thread["message_count"] == 6
        assert thread["title"] == "How are snapshots restored?"
        # SIGKILL right after the third turn returned: the turn is committed.
        assert stored_messages(backend, setups[backend][0]) == ["human", "ai"] * 3, backend

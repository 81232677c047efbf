"""PostgreSQL restarted between two turns: the next turn succeeds once the pool has
reconnected, and nothing committed before the restart is lost.

The test restarts the local cluster (``pg_ctlcluster ... restart``, fast mode: clients are
disconnected at once), so every pooled connection of the agents dies under them. It always
leaves the server running, and restarts it once for the sync and the async agent together
to keep the window short (other tests share the server). Marked slow: it runs in the
separate CI step, away from other suites that may be using the server locally.
"""

from __future__ import annotations

import asyncio
import shutil
import subprocess
import time
import uuid
from pathlib import Path
from typing import Any

import pytest

from retrievalagent.memory import StoreBackend
from tests.support.chat import ScriptedChatModel

pytestmark = [pytest.mark.postgres, pytest.mark.slow]

DOCS = ["Lanternfish listens on port 7311 by default; change it with --port."]
QUESTION = "Which port does Lanternfish listen on?"


def _cluster() -> list[str]:
    """``[version, name]`` of the local cluster on port 5432, or skip."""
    if shutil.which("pg_ctlcluster") is None or shutil.which("pg_lsclusters") is None:
        pytest.skip("pg_ctlcluster is not installed: cannot restart the server here")
    for line in subprocess.run(
        ["pg_lsclusters", "--no-header"], capture_output=True, text=True, check=True
    ).stdout.splitlines():
        version, name, port, *_ = line.split()
        if port == "5432":
            return [version, name]
    pytest.skip("no local cluster on port 5432")


def _ready() -> bool:
    return subprocess.run(["pg_isready", "-h", "127.0.0.1", "-p", "5432", "-q"]).returncode == 0


def _wait_ready(timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while not _ready():
        assert time.monotonic() < deadline, "PostgreSQL did not come back"
        time.sleep(0.2)


def _ctl(cluster: list[str], action: str) -> None:
    subprocess.run(
        ["pg_ctlcluster", "--skip-systemctl-redirect", *cluster, action],
        check=True, capture_output=True, timeout=120,
    )  # fmt: skip


def _grade(messages: Any) -> dict[str, Any]:
    turn = "second" if "second" in "\n".join(str(m.content) for m in messages) else "first"
    return {
        "sufficient": True,
        "confidence": 0.9,
        "memory_worth_storing": True,
        "memory_confidence": 0.95,
        "memory_fact": f'"{turn} port" is called "port" in these documents',
    }


def _agent(make_agent: Any, saver: Any, store: Any, name: str) -> Any:
    model = ScriptedChatModel(replies=["Lanternfish listens on port 7311 [1]."], grades=[_grade])
    rag = make_agent(
        name, model=model, checkpointer=saver, memory_store=store, thread_title="question",
        memory_relevance_threshold=0.5,
    )  # fmt: skip
    rag.add_documents(DOCS, progress=False)
    return rag


async def test_turns_survive_a_postgresql_restart(
    make_agent: Any, postgres_url: str, tmp_path: Path
) -> None:
    from retrievalagent.persistence import (
        apostgres_checkpointer,
        apostgres_store,
        postgres_checkpointer,
        postgres_store,
    )

    cluster = _cluster()
    run = uuid.uuid4().hex[:8]
    sync_saver, sync_store = postgres_checkpointer(postgres_url), postgres_store(postgres_url)
    async_saver = await apostgres_checkpointer(postgres_url)
    async_store = await apostgres_store(postgres_url)
    sync_rag = _agent(make_agent, sync_saver, sync_store, "restart-sync")
    async_rag = _agent(make_agent, async_saver, async_store, "restart-async")
    sync_cfg = {"configurable": {"thread_id": f"{run}-sync", "user_id": f"{run}-ann"}}
    async_cfg = {"configurable": {"thread_id": f"{run}-async", "user_id": f"{run}-bob"}}
    try:
        sync_rag.invoke(f"{QUESTION} (first)", sync_cfg)
        await async_rag.ainvoke(f"{QUESTION} (first)", async_cfg)
        # each turn: its fact and its exchange (conversation memory)
        assert sync_rag.drain_background(timeout=30)["landed"] == 2
        assert (await async_rag.adrain_background(timeout=30))["landed"] == 2

        started = time.monotonic()
        try:
            _ctl(cluster, "restart")  # every pooled connection is now dead
        finally:
            _wait_ready()
        down = time.monotonic() - started

        states = [
            await asyncio.to_thread(sync_rag.invoke, f"{QUESTION} (second)", sync_cfg),
            await async_rag.ainvoke(f"{QUESTION} (second)", async_cfg),
        ]
        for rag, state, cfg in zip(
            (sync_rag, async_rag), states, (sync_cfg, async_cfg), strict=True
        ):
            assert state.answer.startswith("Lanternfish listens on port 7311")
            (read,) = [e for e in state.trace if e["node"] == "read_memory"]
            assert "error" not in read, read  # the store's pool reconnected too
            assert any("first port" in m["text"] for m in state.memories)  # written before
            thread = cfg["configurable"]["thread_id"]
            history = (
                await rag.aget_history(thread) if rag is async_rag else rag.get_history(thread)
            )
            assert [m.type for m in history] == ["human", "ai", "human", "ai"]  # none lost
            assert "(first)" in history[0].content and "(second)" in history[2].content
        # two turns each, every one with its fact and its exchange: all landed
        assert sync_rag.drain_background(timeout=30) == {"landed": 4, "failed": 0, "pending": 0}
        assert await async_rag.adrain_background(timeout=30) == {
            "landed": 4,
            "failed": 0,
            "pending": 0,
        }
        print(f"\nrestart took {down:.1f}s; both agents answered the next turn")
    finally:
        if not _ready():  # whatever happened, leave the server running
            _ctl(cluster, "start")
            _wait_ready()
        for user in (f"{run}-ann", f"{run}-bob"):
            for kind in ("memories", "conversations", "memory_vectors", "memory_stamps"):
                ns = StoreBackend.namespace(user, kind)
                for item in sync_store.search(ns, limit=100):
                    sync_store.delete(ns, item.key)
        sync_saver.delete_thread(f"{run}-sync")
        await async_saver.adelete_thread(f"{run}-async")
        sync_rag.close()
        async_rag.close()
        sync_saver.conn.close()
        sync_store.conn.close()
        await async_saver.conn.close()
        await async_store.conn.close()

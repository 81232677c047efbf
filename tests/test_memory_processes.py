"""Two processes sharing one PostgreSQL store: one user's memory writes take turns.

A write reads what it replaces before it writes (a fact's older version, the stamps), so
two workers writing one user's memory at once could each miss the other's. On PostgreSQL
the user's lock is also taken in the database; here a second process's write of the same
user waits for the first process's write to end, and another user's does not.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from langchain_core.embeddings import Embeddings

pytestmark = pytest.mark.timeout(240)

CHILD = textwrap.dedent(
    """
    import asyncio, sys, time
    mode, url, data = sys.argv[1], sys.argv[2], sys.argv[3]
    from retrievalagent import init_agent

    def said(who):
        return [{"role": "user", "content": f"{who} runs PostgreSQL 13 on Debian 11."}]

    def report(what):
        print(what, repr(time.time()), flush=True)

    def write_bob_then_alice(store):
        rag = init_agent("procs", backend_url=":memory:", data_dir=data, memory_store=store)
        rag.recall("warm up", user_id="carol")
        report("ready")
        sys.stdin.readline()
        rag.remember(said("Bob"), user_id="bob", thread_id="b")
        report("bob")
        rag.remember(said("Alice"), user_id="alice", thread_id="child")
        report("alice")
        rag.close()

    if mode == "sync":
        from langgraph.store.postgres import PostgresStore

        with PostgresStore.from_conn_string(url) as store:
            write_bob_then_alice(store)
    elif mode == "blocking-on-async":  # sync calls on an AsyncPostgresStore, from a thread
        import threading
        from langgraph.store.postgres import AsyncPostgresStore

        loop = asyncio.new_event_loop()
        threading.Thread(target=loop.run_forever, daemon=True).start()
        opened = AsyncPostgresStore.from_conn_string(url)

        async def enter():
            return await opened.__aenter__()

        write_bob_then_alice(asyncio.run_coroutine_threadsafe(enter(), loop).result())
    else:
        from langgraph.store.postgres import AsyncPostgresStore

        async def main():
            async with AsyncPostgresStore.from_conn_string(url) as store:
                rag = init_agent(
                    "procs", backend_url=":memory:", data_dir=data, memory_store=store
                )
                await rag.arecall("warm up", user_id="carol")
                report("ready")
                await asyncio.to_thread(sys.stdin.readline)
                await rag.aremember(said("Bob"), user_id="bob", thread_id="b")
                report("bob")
                await rag.aremember(said("Alice"), user_id="alice", thread_id="child")
                report("alice")
                await rag.adrain_background(10)
                rag.close()

        asyncio.run(main())
    """
)


class SlowEmbeddings(Embeddings):
    """The real embedder, which takes ``delay`` seconds over what a write stores: the
    write holds its user's lock that long."""

    def __init__(self, inner: Any, delay: float) -> None:
        self.inner, self.delay = inner, delay
        self.dimension, self.model_name = inner.dimension, inner.model_name
        self.slowing = threading.Event()

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        return self.inner.embed_documents(texts)

    def embed_query(self, text: str) -> list[float]:
        return self.inner.embed_query(text)

    def embed_spans(self, texts: list[str], spans: Any) -> Any:
        self.slowing.set()
        time.sleep(self.delay)
        return self.inner.embed_spans(texts, spans)

    async def aembed_spans(self, texts: list[str], spans: Any) -> Any:
        return self.embed_spans(texts, spans)


def _times(lines: list[str]) -> dict[str, float]:
    return {line.split()[0]: float(line.split()[1]) for line in lines if line.strip()}


@pytest.mark.parametrize("mode", ["sync", "async", "blocking-on-async"])
def test_one_users_writes_take_turns_across_processes(
    pg_schema_url: str, tmp_path: Path, minilm_model: Any, make_agent: Any, mode: str
) -> None:
    from langgraph.store.postgres import PostgresStore

    slow = SlowEmbeddings(minilm_model, delay=2.0)
    with PostgresStore.from_conn_string(pg_schema_url) as store:
        store.setup()
        rag = make_agent("procs", memory_store=store, embeddings=slow)
        child = subprocess.Popen(
            [sys.executable, "-c", CHILD, mode, pg_schema_url, str(tmp_path / "child")],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            text=True, env={**os.environ, "MEM0_TELEMETRY": "False"},
        )  # fmt: skip
        try:
            assert child.stdout is not None and child.stdin is not None
            assert child.stdout.readline().startswith("ready"), child.stderr
            done: dict[str, float] = {}

            def write() -> None:
                messages = [{"role": "user", "content": "Alice moved the cluster to Debian 12."}]
                rag.remember(messages, user_id="alice", thread_id="parent")
                done["parent"] = time.time()

            writer = threading.Thread(target=write)
            writer.start()
            assert slow.slowing.wait(30)  # the parent's write of alice holds her lock now
            child.stdin.write("go\n")
            child.stdin.flush()
            writer.join(60)
            out, err = child.communicate(timeout=120)
        finally:
            if child.poll() is None:
                child.kill()
        assert child.returncode == 0, err
        times = _times(out.splitlines())
        # bob's write went ahead; alice's waited for the parent's to end
        assert times["bob"] < done["parent"] <= times["alice"], (times, done, err)
        texts = [m["text"] for m in rag.list_memories("alice")]
        assert any("Debian 12" in t for t in texts) and any("Debian 11" in t for t in texts)


def _advisory_locks(url: str) -> list[Any]:
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        return conn.execute(
            "SELECT pid, classid, objid FROM pg_locks WHERE locktype = 'advisory' AND granted "
            "AND database = (SELECT oid FROM pg_database WHERE datname = current_database())"
        ).fetchall()


async def test_a_cancelled_write_never_keeps_a_user_locked(
    pg_schema_url: str, make_agent: Any
) -> None:
    """Writes of one user cancelled at every point of their course (waiting for the lock,
    asking for it, holding it): afterwards nothing is held in the database, and the next
    write of that user goes straight through."""
    import asyncio

    from langgraph.store.postgres import AsyncPostgresStore

    async with AsyncPostgresStore.from_conn_string(pg_schema_url) as store:
        await store.setup()
        rag = make_agent("procs", memory_store=store)
        said = [{"role": "user", "content": "I keep the backups on a NAS in the attic."}]
        await rag.aremember(said, user_id="alice", thread_id="warm")
        for step in range(40):
            write = asyncio.ensure_future(
                rag.aremember(said, user_id="alice", thread_id=f"cancelled-{step}")
            )
            await asyncio.sleep(0.002 * (step % 10))
            write.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await write
        await asyncio.sleep(0.5)  # a lock got while being cancelled is given back meanwhile
        assert _advisory_locks(pg_schema_url) == []
        started = time.monotonic()
        await rag.aremember(said, user_id="alice", thread_id="after")
        assert time.monotonic() - started < 5
        await rag.adrain_background(10)


async def test_a_write_cancelled_while_every_backend_thread_hangs_gives_its_lock_back(
    pg_schema_url: str, make_agent: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """All 256 threads for backend calls are taken (a backend that hangs, when timeouts
    and cancelled requests pile up) from the moment a write gets its user's lock: cancelled,
    it still gives the lock back at once (its unlock once waited for a free thread, and a
    second cancel left the lock held for every other worker)."""
    import asyncio
    import threading

    from langgraph.store.postgres import AsyncPostgresStore

    from retrievalagent import _threads
    from retrievalagent.memory import _shared_locks

    got = threading.Event()
    ask = _shared_locks.SharedLocks._ask

    def asking(self: Any, key: int, unlock: bool) -> bool:
        answer = ask(self, key, unlock)
        if answer and not unlock:
            got.set()
        return answer

    monkeypatch.setattr(_shared_locks.SharedLocks, "_ask", asking)
    taken: list[int] = []
    done = threading.Event()

    def hang_every_thread() -> None:  # each thread taken as soon as it is free
        got.wait(10)
        while not done.is_set() and len(taken) < 256:
            if _threads._IN_FLIGHT.acquire(timeout=0.001):
                taken.append(1)

    async with AsyncPostgresStore.from_conn_string(pg_schema_url) as store:
        await store.setup()
        rag = make_agent("procs", memory_store=store)
        said = [{"role": "user", "content": "I keep the backups on a NAS in the attic."}]
        hog = threading.Thread(target=hang_every_thread, daemon=True)
        hog.start()
        write = asyncio.ensure_future(rag.aremember(said, user_id="alice", thread_id="hung"))
        try:
            await asyncio.sleep(2)
            assert len(taken) == 256 and not write.done()  # stuck in its locked section
            for _ in range(2):  # a cancelled request, then asyncio.run shutting down
                write.cancel()
                await asyncio.sleep(0.3)
            with contextlib.suppress(asyncio.CancelledError):
                await write
            await asyncio.sleep(0.3)
            assert _advisory_locks(pg_schema_url) == []
        finally:
            done.set()
            hog.join(5)
            for _ in taken:
                _threads._IN_FLIGHT.release()


def test_a_store_written_through_is_let_go_with_the_agent(
    pg_schema_url: str, tmp_path: Path, minilm: Any
) -> None:
    """The locks kept per store do not keep the store (and its connection) alive."""
    import gc
    import weakref

    from langgraph.store.postgres import PostgresStore

    from retrievalagent import init_agent

    with PostgresStore.from_conn_string(pg_schema_url) as store:
        store.setup()
        rag = init_agent(
            "procs", backend_url=":memory:", data_dir=tmp_path, embeddings=minilm,
            memory_store=store,
        )  # fmt: skip
        said = [{"role": "user", "content": "I keep the backups on a NAS in the attic."}]
        rag.remember(said, user_id="alice", thread_id="t")
        rag.forget("alice", thread_id="t")
        rag.close()
    gone = weakref.ref(store)
    del store, rag
    gc.collect()
    assert gone() is None


def test_a_pooled_store_serves_many_users_writing_at_once(
    pg_schema_url: str, make_agent: Any
) -> None:
    """The locks never take the connections the store's own calls need: six users'
    writes at once on a pool of two all land (holding each lock on a pooled connection
    left none for the writes: every one timed out)."""
    from langgraph.store.postgres import PostgresStore
    from psycopg.rows import dict_row
    from psycopg_pool import ConnectionPool

    kwargs = {"autocommit": True, "prepare_threshold": 0, "row_factory": dict_row}
    with ConnectionPool(pg_schema_url, min_size=1, max_size=2, timeout=5, kwargs=kwargs) as pool:
        store = PostgresStore(pool)
        store.setup()
        rag = make_agent("procs", memory_store=store)
        errors: list[BaseException] = []

        def write(i: int) -> None:
            said = [{"role": "user", "content": f"User {i} keeps backups on a NAS."}]
            try:
                rag.remember(said, user_id=f"u{i}", thread_id="t")
            except BaseException as exc:  # reported below
                errors.append(exc)

        threads = [threading.Thread(target=write, args=(i,)) for i in range(6)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(60)
        assert errors == []
        assert all(rag.list_memories(f"u{i}") for i in range(6))
        assert _advisory_locks(pg_schema_url) == []

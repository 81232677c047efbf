"""The pooled PostgreSQL helpers: right connection settings, setup once (also when several
callers race), and a turn that follows a killed server connection just works."""

from __future__ import annotations

import threading
import uuid
from collections.abc import Callable
from typing import Any

import pytest
from qdrant_client import QdrantClient

from retrievalagent.memory import MemoryRecord
from retrievalagent.persistence import (
    apostgres_checkpointer,
    apostgres_store,
    postgres_checkpointer,
    postgres_store,
)
from tests.support.persistence import SMALL_DOCS

pytestmark = pytest.mark.timeout(120)


def terminate(url: str, app: str) -> int:
    """Kill every server connection of ``app`` (what a restarted server or proxy does)."""
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        rows = conn.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = %s",
            (app,),
        ).fetchall()
    return len(rows)


def app_name() -> str:
    return f"ra_pool_{uuid.uuid4().hex[:8]}"


@pytest.fixture
def build(make_agent: Callable[..., Any]) -> Callable[..., Any]:
    def factory(**kwargs: Any) -> Any:
        rag = make_agent("pool", qdrant_client=QdrantClient(":memory:"), **kwargs)
        rag.add_documents(SMALL_DOCS)
        return rag

    return factory


def cfg(thread: str) -> dict[str, Any]:
    return {"configurable": {"thread_id": thread, "user_id": "alice"}}


def test_pool_connections_are_configured_for_langgraph(pg_schema_url: str) -> None:
    saver = postgres_checkpointer(pg_schema_url, application_name=app_name(), max_size=3)
    try:
        pool = saver.conn
        assert (pool.min_size, pool.max_size, pool.max_idle, pool.max_lifetime) == (1, 3, 300, 1800)
        with pool.connection() as conn:
            assert conn.autocommit and conn.prepare_threshold == 0
            assert conn.execute("SELECT 1 AS one").fetchone() == {"one": 1}  # dict rows
            tables = conn.execute(
                "SELECT count(*) AS n FROM information_schema.tables "
                "WHERE table_schema = current_schema() AND table_name LIKE 'checkpoint%%'"
            ).fetchone()
        assert tables["n"] >= 4  # setup() ran
    finally:
        saver.conn.close()


def test_killed_connection_is_replaced_before_the_next_turn(
    pg_schema_url: str, build: Callable[..., Any]
) -> None:
    app = app_name()
    saver = postgres_checkpointer(pg_schema_url, application_name=app)
    try:
        rag = build(checkpointer=saver)
        rag.invoke("How are snapshots restored?", cfg("t"))
        assert terminate(pg_schema_url, app) >= 1
        state = rag.invoke("How often are snapshots taken?", cfg("t"))  # no error
        assert len(state.messages) == 4
        assert state.events("generate")[0]["history_messages"] == 2
    finally:
        saver.conn.close()


async def test_killed_connection_is_replaced_async(
    pg_schema_url: str, build: Callable[..., Any]
) -> None:
    app = app_name()
    saver = await apostgres_checkpointer(pg_schema_url, application_name=app)
    try:
        rag = build(checkpointer=saver)
        await rag.ainvoke("How are snapshots restored?", cfg("t"))
        assert terminate(pg_schema_url, app) >= 1
        state = await rag.ainvoke("How often are snapshots taken?", cfg("t"))
        assert len(state.messages) == 4
        assert [t.thread_id for t in await rag.alist_threads("alice")] == ["t"]
    finally:
        await saver.conn.close()


def test_store_survives_a_killed_connection(pg_schema_url: str, build: Callable[..., Any]) -> None:
    app = app_name()
    store = postgres_store(pg_schema_url, application_name=app)
    try:
        rag = build(memory_store=store, memory_relevance_threshold=0.2)
        rag.memory.add(
            MemoryRecord(
                "a backup copy is called a snapshot",
                "How do I restore a backup copy?",
                "a",
                "alice",
            )
        )
        assert terminate(pg_schema_url, app) >= 1
        state = rag.invoke("How do I restore a backup copy?", cfg("t"))
        assert state.events("read_memory")[0]["n_kept"] == 1
    finally:
        store.conn.close()


async def test_async_store_helper(pg_schema_url: str, build: Callable[..., Any]) -> None:
    app = app_name()
    store = await apostgres_store(pg_schema_url, application_name=app)
    try:
        rag = build(memory_store=store, memory_relevance_threshold=0.2)
        await rag.memory.aadd(
            MemoryRecord(
                "a backup copy is called a snapshot",
                "How do I restore a backup copy?",
                "a",
                "alice",
            )
        )
        assert terminate(pg_schema_url, app) >= 1
        state = await rag.ainvoke("How do I restore a backup copy?", cfg("t"))
        assert state.events("read_memory")[0]["n_kept"] == 1
    finally:
        await store.conn.close()


def test_setup_is_safe_when_callers_race(pg_schema_url: str) -> None:
    """Several processes starting at once: setup() is serialised by an advisory lock."""
    savers: list[Any] = []
    errors: list[BaseException] = []

    def start() -> None:
        try:
            savers.append(postgres_checkpointer(pg_schema_url, max_size=2))
        except BaseException as exc:  # pragma: no cover - the failure being tested for
            errors.append(exc)

    threads = [threading.Thread(target=start) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    try:
        assert errors == [] and len(savers) == 4
        saver = savers[0]
        assert saver.get_tuple(cfg("nothing")) is None  # the tables exist and answer
    finally:
        for saver in savers:
            saver.conn.close()

"""The documentation's checkpointer / store examples, run as written, and the
``from_conn_string`` compatibility layer that makes them work (real PostgreSQL and SQLite).

Hosted models are replaced by the local OpenAI-compatible server (``openai_server``);
``localhost:6333`` by the Qdrant REST shim; the PostgreSQL URL by the test database.
"""

from __future__ import annotations

import contextlib
import json
import subprocess
import sys
import textwrap
import uuid
from pathlib import Path
from typing import Any

import pytest

from retrievalagent import init_agent
from retrievalagent.persistence import (
    AsyncLazyConnection,
    LazyConnection,
    patch_from_conn_string,
    unpatch_from_conn_string,
)
from tests.support.persistence import SMALL_DOCS

pytestmark = pytest.mark.timeout(120)


def backends_of(url: str, app: str) -> int:
    """How many server connections carry ``application_name=app``."""
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        row = conn.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE application_name = %s", (app,)
        ).fetchone()
    return int(row[0]) if row else 0


def backends_after_close(url: str, app: str, timeout: float = 5.0) -> int:
    """``backends_of`` once closed connections are gone: a server backend exits a moment
    after its client hangs up (longer on a loaded machine), so wait for it up to ``timeout``."""
    import time

    deadline = time.monotonic() + timeout
    while (count := backends_of(url, app)) and time.monotonic() < deadline:
        time.sleep(0.05)
    return count


def with_app(url: str, app: str) -> str:
    return f"{url}&application_name={app}" if "?" in url else f"{url}?application_name={app}"


@pytest.fixture
def in_tmp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Relative paths such as "./memory.db" and the default data dir land in tmp_path."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("RAG_DATA_DIR", str(tmp_path / "data"))
    return tmp_path


# -- the import hook ----------------------------------------------------------------------------
def test_import_patches_lazily_and_never_loads_psycopg() -> None:
    script = textwrap.dedent(
        """
        import json, sys
        import langgraph.checkpoint.sqlite as sqlite_mod   # imported before retrievalagent
        import retrievalagent
        lazy = sqlite_mod.SqliteSaver.from_conn_string(":memory:")
        out = {"psycopg_loaded": "psycopg" in sys.modules,
               "sqlite_patched": [isinstance(lazy, sqlite_mod.SqliteSaver), lazy.is_open]}
        from langgraph.checkpoint.postgres import PostgresSaver       # imported afterwards
        from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver
        from langgraph.store.postgres import AsyncPostgresStore, PostgresStore
        url = "postgresql://nobody@127.0.0.1:1/none"                  # never connected
        out["kinds"] = [[type(c.from_conn_string(url)).__name__, c.from_conn_string(url).is_open]
                        for c in (PostgresSaver, AsyncPostgresSaver, PostgresStore,
                                  AsyncPostgresStore)]
        import inspect
        out["source_readable"] = "class PostgresSaver" in inspect.getsource(PostgresSaver)
        print(json.dumps(out))
        """
    )
    proc = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=60, check=True
    )
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert out == {
        "psycopg_loaded": False,
        "sqlite_patched": [True, False],
        "kinds": [
            ["LazyPostgresSaver", False],
            ["LazyAsyncPostgresSaver", False],
            ["LazyPostgresStore", False],
            ["LazyAsyncPostgresStore", False],
        ],
        "source_readable": True,
    }


def test_unpatch_restores_langgraph_and_patch_is_idempotent() -> None:
    from langgraph.checkpoint.sqlite import SqliteSaver

    unpatch_from_conn_string()
    try:
        original = SqliteSaver.from_conn_string(":memory:")
        assert isinstance(original, contextlib.AbstractContextManager)
        assert not isinstance(original, LazyConnection)
    finally:
        patch_from_conn_string()
        patch_from_conn_string()
    assert isinstance(SqliteSaver.from_conn_string(":memory:"), LazyConnection)
    patched = SqliteSaver.__dict__["from_conn_string"].__func__
    original = patched.__retrievalagent_original__.__func__
    assert not hasattr(original, "__retrievalagent_original__")  # patched once, not twice


# -- `with` behaves exactly as before ------------------------------------------------------------
def test_with_yields_the_real_objects(pg_schema_url: str, tmp_path: Path) -> None:
    from langgraph.checkpoint.postgres import PostgresSaver
    from langgraph.checkpoint.sqlite import SqliteSaver
    from langgraph.store.postgres import PostgresStore

    with PostgresSaver.from_conn_string(pg_schema_url) as saver:
        assert type(saver) is PostgresSaver
        saver.setup()
        conn = saver.conn
    assert conn.closed
    with PostgresStore.from_conn_string(pg_schema_url) as store:
        assert type(store) is PostgresStore
    with SqliteSaver.from_conn_string(str(tmp_path / "a.db")) as sqlite_saver:
        assert type(sqlite_saver) is SqliteSaver


async def test_async_with_yields_the_real_objects(pg_schema_url: str) -> None:
    from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver
    from langgraph.store.postgres import AsyncPostgresStore

    async with AsyncPostgresSaver.from_conn_string(pg_schema_url) as saver:
        assert type(saver) is AsyncPostgresSaver
        await saver.setup()
        conn = saver.conn
    assert conn.closed
    async with AsyncPostgresStore.from_conn_string(pg_schema_url) as store:
        assert type(store) is AsyncPostgresStore
    with pytest.raises(TypeError, match="async with"):
        with AsyncPostgresStore.from_conn_string(pg_schema_url):
            pass


# -- the documentation's examples, as written -------------------------------------------------------
def test_doc_postgres_checkpointer_example(
    pg_schema_url: str, openai_server: Any, in_tmp: Path
) -> None:
    app = f"ra_doc_{uuid.uuid4().hex[:8]}"
    url = with_app(pg_schema_url, app)

    from langgraph.checkpoint.postgres import PostgresSaver

    from retrievalagent import init_agent

    checkpointer = PostgresSaver.from_conn_string(url)
    checkpointer.setup()  # creates the checkpoint tables on first run

    rag = init_agent("docs", model="openai:gpt-5.4", backend="qdrant", checkpointer=checkpointer)

    config = {"configurable": {"thread_id": "user-alice"}}
    state = rag.invoke("What is hybrid search?", config=config)

    assert state.answer.startswith("Echo:") and state.llm_used
    assert backends_of(pg_schema_url, app) == 1
    rag.close()  # the last agent using the lazily opened connection closes it
    assert backends_after_close(pg_schema_url, app) == 0 and not checkpointer.is_open

    again = init_agent("docs", model="openai:gpt-5.4", checkpointer=checkpointer)  # reopens
    state = again.invoke("Give me an example.", config=config)
    assert [m.type for m in state.messages] == ["human", "ai", "human", "ai"]
    again.close()
    assert backends_after_close(pg_schema_url, app) == 0


def test_doc_sqlite_with_example(openai_server: Any, qdrant_server_6333: Any, in_tmp: Path) -> None:
    from langgraph.checkpoint.sqlite import SqliteSaver

    from retrievalagent import init_agent

    with SqliteSaver.from_conn_string("./memory.db") as checkpointer:
        rag = init_agent(
            "docs",
            model="openai:gpt-5.4",
            backend="qdrant",
            backend_url="http://localhost:6333",
            checkpointer=checkpointer,
        )

        config = {"configurable": {"thread_id": "user-alice"}}
        state = rag.invoke("What is hybrid search?", config=config)
        assert state.answer.startswith("Echo:")
        rag.close()
    assert (in_tmp / "memory.db").exists()


def test_doc_sqlite_passed_straight_with_store(
    openai_server: Any, in_tmp: Path, minilm: Any
) -> None:
    from langgraph.checkpoint.sqlite import SqliteSaver
    from langgraph.store.memory import InMemoryStore

    rag = init_agent(
        "docs",
        model="openai:gpt-5.4",
        backend="qdrant",
        checkpointer=SqliteSaver.from_conn_string("./memory.db"),
        memory_store=InMemoryStore(),
        embeddings=minilm,
    )

    config = {"configurable": {"thread_id": "session-1", "user_id": "alice"}}
    state = rag.invoke("What is hybrid search?", config=config)

    recalled = [step for step in state.trace if step["node"] == "read_memory"]
    assert recalled and recalled[0]["backend"] == "store"
    saver = rag.checkpointer
    rag.close()
    with pytest.raises(Exception, match="closed"):  # init_agent opened it, close() closed it
        saver.get_tuple(config)

    with SqliteSaver.from_conn_string("./memory.db") as reopened:  # the turn survived
        rag = init_agent("docs", checkpointer=reopened, embeddings=minilm)
        assert len(rag.get_history("session-1")) == 2
        rag.close()


async def test_doc_async_postgres_store_example(
    pg_schema_url: str, openai_server: Any, in_tmp: Path, minilm: Any
) -> None:
    from langgraph.store.postgres import AsyncPostgresStore

    store = AsyncPostgresStore.from_conn_string(pg_schema_url)
    await store.setup()  # creates tables on first run

    rag = init_agent("docs", model="openai:gpt-5.4", memory_store=store, embeddings=minilm)

    state = await rag.ainvoke("What is hybrid search?", {"configurable": {"user_id": "alice"}})
    (event,) = [e for e in state.trace if e["node"] == "read_memory"]
    assert event["backend"] == "store" and event["skipped"] == "no_memories"
    assert isinstance(store, AsyncPostgresStore) and isinstance(store, AsyncLazyConnection)
    assert store.is_open
    await rag.adrain_background()  # the turn's conversation write lands before closing
    await store.aclose()
    assert not store.is_open
    rag.close()


async def test_async_saver_used_directly(pg_schema_url: str, make_agent: Any) -> None:
    from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver

    checkpointer = AsyncPostgresSaver.from_conn_string(pg_schema_url)
    await checkpointer.setup()
    rag = make_agent("compat", checkpointer=checkpointer)
    rag.add_documents(SMALL_DOCS)
    config = {"configurable": {"thread_id": "t", "user_id": "alice"}}
    await rag.ainvoke("How are snapshots restored?", config)
    await rag.ainvoke("How often are snapshots taken?", config)
    assert len(await rag.aget_history("t")) == 4
    assert [t.thread_id for t in await rag.alist_threads("alice")] == ["t"]
    await checkpointer.aclose()


def test_async_store_first_used_from_sync_code(pg_schema_url: str, make_agent: Any) -> None:
    """No event loop at all: the store opens on a private loop; its sync methods work."""
    from langgraph.store.postgres import AsyncPostgresStore, PostgresStore

    with PostgresStore.from_conn_string(pg_schema_url) as ready:
        ready.setup()
    store = AsyncPostgresStore.from_conn_string(pg_schema_url)
    rag = make_agent("compat", memory_store=store, memory_relevance_threshold=0.2)
    rag.add_documents(SMALL_DOCS)
    store.put(("memories", "alice"), "k1", {"text": "a backup copy is called a snapshot"})
    state = rag.invoke("How do I restore a backup copy?", {"configurable": {"user_id": "alice"}})
    (event,) = state.events("read_memory")
    assert event["n_kept"] == 1 and "snapshot" in event["memories"]
    rag.close()
    assert not store.is_open


async def test_async_class_first_used_synchronously_in_async_code(pg_schema_url: str) -> None:
    from langgraph.store.postgres import AsyncPostgresStore

    from retrievalagent import ConfigError

    store = AsyncPostgresStore.from_conn_string(pg_schema_url)
    with pytest.raises(ConfigError, match=r"await x\.setup"):
        init_agent("compat", backend_url=":memory:", memory_store=store)
    assert not store.is_open


def test_a_lazy_store_passed_as_checkpointer_is_named_and_left_closed() -> None:
    from langgraph.store.postgres import PostgresStore

    from retrievalagent import ConfigError

    store = PostgresStore.from_conn_string("postgresql://nobody@127.0.0.1:1/none")
    with pytest.raises(
        ConfigError, match=r"checkpointer must be a LangGraph .*, not PostgresStore"
    ):
        init_agent("compat", backend_url=":memory:", checkpointer=store)
    assert not store.is_open

"""What ``from_conn_string(...)`` returns without ``with`` is a real LangGraph saver/store.

LangGraph's own checkpoint conformance suite runs against it (real SQLite and PostgreSQL),
plain LangGraph code (``StateGraph.compile``) accepts it, and it opens its connection only
when first used. See tests/support/conformance.py for how the suite reaches the sync savers.
"""

from __future__ import annotations

import json
import operator
import os
import subprocess
import sys
import textwrap
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Annotated, Any, TypedDict

import pytest
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.store.base import BaseStore

import retrievalagent  # noqa: F401 - installs the from_conn_string patch
from tests.support.conformance import detected, run_suite, summary, sync_methods_awaited

pytestmark = pytest.mark.timeout(180)

BASE = {"put", "put_writes", "get_tuple", "list", "delete_thread"}


class Said(TypedDict):
    said: Annotated[list[str], operator.add]


def echo_graph() -> Any:
    from langgraph.graph import END, START, StateGraph

    builder = StateGraph(Said)
    builder.add_node("echo", lambda state: {"said": [f"heard {len(state['said'])}"]})
    builder.add_edge(START, "echo")
    builder.add_edge("echo", END)
    return builder


# -- plain LangGraph accepts it ---------------------------------------------------------------
def test_plain_compile_takes_a_lazy_sqlite_saver_and_it_persists(tmp_path: Path) -> None:
    from langgraph.checkpoint.sqlite import SqliteSaver

    path = tmp_path / "graph.db"
    saver = SqliteSaver.from_conn_string(str(path))
    assert isinstance(saver, SqliteSaver) and isinstance(saver, BaseCheckpointSaver)

    graph = echo_graph().compile(checkpointer=saver)
    assert not path.exists()  # compiling opens nothing: the first run does
    thread = {"configurable": {"thread_id": "t1"}}
    graph.invoke({"said": ["hi"]}, thread)
    out = graph.invoke({"said": ["again"]}, thread)
    assert out["said"] == ["hi", "heard 1", "again", "heard 3"]
    assert saver.is_open

    saver.close()
    assert not saver.is_open
    with SqliteSaver.from_conn_string(str(path)) as reopened:  # the file holds the thread
        kept = echo_graph().compile(checkpointer=reopened).get_state(thread)
    assert kept.values["said"] == ["hi", "heard 1", "again", "heard 3"]
    assert graph.get_state(thread).values == kept.values  # a closed one reopens on use
    saver.close()


def test_lazy_savers_and_stores_are_instances_of_their_class(pg_schema_url: str) -> None:
    from langgraph.checkpoint.postgres import PostgresSaver
    from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver
    from langgraph.store.postgres import AsyncPostgresStore, PostgresStore

    for cls, base in (
        (PostgresSaver, BaseCheckpointSaver),
        (AsyncPostgresSaver, BaseCheckpointSaver),
        (PostgresStore, BaseStore),
        (AsyncPostgresStore, BaseStore),
    ):
        lazy = cls.from_conn_string(pg_schema_url)
        assert isinstance(lazy, cls) and isinstance(lazy, base), cls.__name__
        assert not lazy.is_open


def test_lazy_postgres_store_reaches_a_graph_node(pg_schema_url: str) -> None:
    from langgraph.graph import END, START, StateGraph
    from langgraph.store.postgres import PostgresStore

    store = PostgresStore.from_conn_string(pg_schema_url)
    assert isinstance(store, PostgresStore)
    store.setup()
    store.put(("memories", "alice"), "k1", {"text": "prefers short answers"})

    def recall(state: Said, *, store: BaseStore) -> dict[str, list[str]]:
        item = store.get(("memories", "alice"), "k1")
        return {"said": [item.value["text"] if item else "nothing"]}

    builder = StateGraph(Said)
    builder.add_node("recall", recall)
    builder.add_edge(START, "recall")
    builder.add_edge("recall", END)
    out = builder.compile(store=store).invoke({"said": []})
    assert out["said"] == ["prefers short answers"]
    store.close()
    assert not store.is_open


async def test_lazy_async_postgres_store_opens_on_the_callers_loop(pg_schema_url: str) -> None:
    from langgraph.store.postgres import AsyncPostgresStore

    store = AsyncPostgresStore.from_conn_string(pg_schema_url)
    assert isinstance(store, AsyncPostgresStore) and not store.is_open
    await store.setup()
    await store.aput(("memories", "bob"), "k1", {"text": "uses the CLI"})
    item = await store.aget(("memories", "bob"), "k1")
    assert item is not None and item.value == {"text": "uses the CLI"}
    assert [i.key for i in await store.asearch(("memories", "bob"))] == ["k1"]
    await store.aclose()
    assert not store.is_open


# -- LangGraph's checkpoint conformance suite ----------------------------------------------------
def fresh_lazy(cls: Any, conn: str, *, sync: bool) -> Callable[[], AsyncIterator[Any]]:
    """The suite's factory: a lazy saver never used before, one per capability, closed
    afterwards (a sync saver is reached through its sync methods)."""

    async def factory() -> AsyncIterator[Any]:
        saver = cls.from_conn_string(conn)
        assert isinstance(saver, cls) and not saver.is_open
        yield sync_methods_awaited(saver) if sync else saver
        if sync:
            saver.close()
        else:
            await saver.aclose()

    return factory


async def test_conformance_lazy_sqlite_saver(tmp_path: Path) -> None:
    from langgraph.checkpoint.sqlite import SqliteSaver

    path = str(tmp_path / "conformance.db")
    with SqliteSaver.from_conn_string(path) as real:
        assert detected(SqliteSaver.from_conn_string(path)) == detected(real)

    report = await run_suite("lazy SqliteSaver", fresh_lazy(SqliteSaver, path, sync=True))
    assert report.passed_all_base(), report.to_dict()
    assert set(summary(report)) == BASE
    assert all(failed == 0 for _, failed in summary(report).values())


async def test_conformance_lazy_postgres_saver(pg_schema_url: str) -> None:
    from langgraph.checkpoint.postgres import PostgresSaver

    with PostgresSaver.from_conn_string(pg_schema_url) as real:
        real.setup()
        assert detected(PostgresSaver.from_conn_string(pg_schema_url)) == detected(real)

    factory = fresh_lazy(PostgresSaver, pg_schema_url, sync=True)
    report = await run_suite("lazy PostgresSaver", factory)
    assert report.passed_all_base(), report.to_dict()
    assert set(summary(report)) == BASE | {"prune"}


async def test_conformance_lazy_async_postgres_saver(pg_schema_url: str) -> None:
    """No adapter: the suite calls the lazy saver's own async methods."""
    from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver

    async with AsyncPostgresSaver.from_conn_string(pg_schema_url) as real:
        await real.setup()
        assert detected(AsyncPostgresSaver.from_conn_string(pg_schema_url)) == detected(real)

    factory = fresh_lazy(AsyncPostgresSaver, pg_schema_url, sync=False)
    report = await run_suite("lazy AsyncPostgresSaver", factory)
    assert report.passed_all_base() and report.passed_all(), report.to_dict()
    assert set(summary(report)) == BASE | {"prune"}


class XorCipher:
    """A toy cipher (LangGraph's CipherProtocol), so checkpoints are unreadable without it."""

    def encrypt(self, plaintext: bytes) -> tuple[str, bytes]:
        return "xor", bytes(b ^ 0x5A for b in plaintext)

    def decrypt(self, ciphername: str, ciphertext: bytes) -> bytes:
        assert ciphername == "xor"
        return bytes(b ^ 0x5A for b in ciphertext)


def test_a_serde_set_on_a_lazy_saver_is_the_one_it_writes_with(tmp_path: Path) -> None:
    from langgraph.checkpoint.serde.encrypted import EncryptedSerializer
    from langgraph.checkpoint.sqlite import SqliteSaver

    path = str(tmp_path / "secret.db")
    saver = SqliteSaver.from_conn_string(path)
    saver.serde = EncryptedSerializer(XorCipher())
    thread = {"configurable": {"thread_id": "t1"}}
    echo_graph().compile(checkpointer=saver).invoke({"said": ["hi"]}, thread)
    saver.close()

    with SqliteSaver.from_conn_string(path) as plain:  # LangGraph's default serde
        with pytest.raises(Exception):  # noqa: B017 - whatever the plain serde makes of it
            plain.get_tuple(thread)
        plain.serde = EncryptedSerializer(XorCipher())
        kept = echo_graph().compile(checkpointer=plain).get_state(thread)
    assert kept.values == {"said": ["hi", "heard 1"]}


def test_strict_msgpack_allowlist_reaches_a_lazy_saver(tmp_path: Path) -> None:
    """With LANGGRAPH_STRICT_MSGPACK=true, LangGraph copies the saver with the graph's own
    types allowed (``with_allowlist``); the copy of a lazy saver must read with that."""
    script = textwrap.dedent(
        """
        import json, operator, sys
        from dataclasses import dataclass
        from typing import Annotated, TypedDict
        import retrievalagent
        from langgraph.checkpoint.sqlite import SqliteSaver
        from langgraph.graph import END, START, StateGraph

        @dataclass
        class Note:
            text: str

        class Notes(TypedDict):
            notes: Annotated[list[Note], operator.add]

        builder = StateGraph(Notes)
        builder.add_node("n", lambda state: {"notes": [Note(f"seen {len(state['notes'])}")]})
        builder.add_edge(START, "n")
        builder.add_edge("n", END)
        graph = builder.compile(checkpointer=SqliteSaver.from_conn_string(sys.argv[1]))
        thread = {"configurable": {"thread_id": "t"}}
        graph.invoke({"notes": [Note("a")]}, thread)
        out = graph.invoke({"notes": [Note("b")]}, thread)
        print(json.dumps([type(note).__name__ for note in out["notes"]]))
        """
    )
    env = {**os.environ, "LANGGRAPH_STRICT_MSGPACK": "true"}
    proc = subprocess.run(
        [sys.executable, "-c", script, str(tmp_path / "strict.db")],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        check=True,
    )
    assert json.loads(proc.stdout.splitlines()[-1]) == ["Note"] * 4, proc.stderr

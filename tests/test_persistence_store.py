"""Long-term memory in PostgreSQL: ``memory_store=PostgresStore(...)`` / ``AsyncPostgresStore``
without pgvector (scored by the agent), and with pgvector's index where a PostgreSQL that has
it can be started from the ``pgserver`` package."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from langchain_core.messages import BaseMessage, SystemMessage
from qdrant_client import QdrantClient

from retrievalagent.models import SEARCH_FACTS_PREFIX
from retrievalagent.persistence import postgres_store
from retrievalagent.types import Grade
from tests.support.chat import ScriptedChatModel, by_kind
from tests.support.persistence import SMALL_DOCS

pytestmark = pytest.mark.timeout(180)

FACT = '"backup copy" is called "snapshot" in these documents'


def learner() -> ScriptedChatModel:
    """A model whose grader proposes one search fact worth storing."""
    return ScriptedChatModel(
        replies=[by_kind(lambda kind, messages: f"{kind} reply {len(messages)}")],
        grades=[
            lambda m: Grade(
                sufficient=True,
                confidence=0.9,
                memory_worth_storing=True,
                memory_confidence=0.95,
                memory_fact=FACT,
            )
        ],
    )


def cfg(user: str) -> dict[str, Any]:
    return {"configurable": {"user_id": user}}


@pytest.fixture
def build(make_agent: Callable[..., Any]) -> Callable[..., Any]:
    def factory(**kwargs: Any) -> Any:
        kwargs.setdefault("memory_relevance_threshold", 0.3)
        rag = make_agent("store", qdrant_client=QdrantClient(":memory:"), **kwargs)
        rag.add_documents(SMALL_DOCS)
        return rag

    return factory


def system_prompt(messages: list[BaseMessage]) -> str:
    return next(str(m.content) for m in messages if isinstance(m, SystemMessage))


def check_learned(first: Any, second: Any, stranger: Any, model: ScriptedChatModel) -> None:
    assert first.events("write_memory")[0]["scheduled"] is True
    recall = second.events("read_memory")[0]
    assert recall["backend"] == "store" and recall["n_facts"] == 1 and FACT in recall["memories"]
    answers = model.inputs("answer")  # first, second, stranger
    assert system_prompt(answers[1]).startswith(SEARCH_FACTS_PREFIX)
    assert not system_prompt(answers[2]).startswith(SEARCH_FACTS_PREFIX)
    assert stranger.events("read_memory")[0]["skipped"] == "no_memories"  # per user


def test_postgres_store_without_pgvector(pg_schema_url: str, build: Callable[..., Any]) -> None:
    from langgraph.store.postgres import PostgresStore

    with PostgresStore.from_conn_string(pg_schema_url) as store:
        store.setup()
        model = learner()
        rag = build(model=model, memory_store=store)
        assert rag.memory.indexed is False  # PostgreSQL 15 here has no pgvector
        first = rag.invoke("How do I restore a backup copy?", cfg("alice"))
        assert rag.drain_background(10)["landed"] == 2  # the fact and the exchange
        second = rag.invoke("Where is my backup copy kept?", cfg("alice"))
        stranger = rag.invoke("Where is my backup copy kept?", cfg("bob"))
        check_learned(first, second, stranger, model)
        (item,) = store.search(("memories", "alice"))
        (vector,) = store.search(("memory_vectors", "alice"))
        assert item.value["text"] == FACT and len(vector.value["embedding"]) == 384
        assert vector.key == item.key


async def test_async_postgres_store_without_pgvector(
    pg_schema_url: str, build: Callable[..., Any]
) -> None:
    from langgraph.store.postgres import AsyncPostgresStore

    async with AsyncPostgresStore.from_conn_string(pg_schema_url) as store:
        await store.setup()
        model = learner()
        rag = build(model=model, memory_store=store)
        first = await rag.ainvoke("How do I restore a backup copy?", cfg("alice"))
        assert (await rag.adrain_background(10))["landed"] == 2  # the fact and the exchange
        second = await rag.ainvoke("Where is my backup copy kept?", cfg("alice"))
        stranger = await rag.ainvoke("Where is my backup copy kept?", cfg("bob"))
        check_learned(first, second, stranger, model)


# -- pgvector, from a PostgreSQL 16 started by the pgserver package -----------------------------
@pytest.fixture(scope="session")
def pgvector_url() -> Iterator[str]:
    pgserver = pytest.importorskip(
        "pgserver", reason="pip install pgserver to test the pgvector-indexed PostgresStore"
    )
    os.environ.setdefault("XDG_RUNTIME_DIR", tempfile.gettempdir())
    data = tempfile.mkdtemp(prefix="ra-pgvector-")
    server = pgserver.get_server(data, cleanup_mode="delete")
    try:
        import psycopg

        with psycopg.connect(server.get_uri(), autocommit=True) as conn:
            conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
        yield server.get_uri()
    finally:
        server.cleanup()


def test_indexed_postgres_store_with_pgvector(
    pgvector_url: str, build: Callable[..., Any], minilm: Any
) -> None:
    index = {"dims": 384, "embed": minilm, "fields": ["text"]}
    store = postgres_store(pgvector_url, index=index)
    try:
        model = learner()
        rag = build(model=model, memory_store=store)
        assert rag.memory.indexed is True  # the store ranks memories itself
        first = rag.invoke("How do I restore a backup copy?", cfg("alice"))
        assert rag.drain_background(10)["landed"] == 2  # the fact and the exchange
        second = rag.invoke("Where is my backup copy kept?", cfg("alice"))
        stranger = rag.invoke("Where is my backup copy kept?", cfg("bob"))
        check_learned(first, second, stranger, model)
        (item,) = store.search(("memories", "alice"), query="backup copy")
        assert "embedding" not in item.value and item.score is not None and item.score > 0.3
    finally:
        store.conn.close()

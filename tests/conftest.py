"""Shared fixtures: one embedder per session, throwaway agents, local servers, PostgreSQL
and its fresh schemas, one checkpointer per kind."""

from __future__ import annotations

import os

os.environ.setdefault("MEM0_TELEMETRY", "False")  # before anything imports mem0

import threading
import uuid
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import settings as hypothesis_settings
from langchain_core.embeddings import Embeddings

from tests.servers.fixtures import (  # noqa: F401 - fixtures, found by pytest by name
    openai_server,
    openai_server_session,
    qdrant_server,
    qdrant_server_6333,
    qdrant_server_6333_session,
    qdrant_server_session,
)
from tests.support.persistence import schema_url

SAMPLE_DOCS = Path(__file__).resolve().parents[1] / "retrievalagent" / "sample_docs"

# CI draws the same property-test examples on every run, so a red CI means a change broke
# something rather than a lucky draw; local runs keep exploring new examples.
hypothesis_settings.register_profile("ci", derandomize=True)
if os.environ.get("CI", "").lower() in ("1", "true", "yes"):
    hypothesis_settings.load_profile("ci")


@pytest.fixture(scope="session", autouse=True)
def _isolated_data_dir(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """Nothing a test does lands in the user's real data dir."""
    path = tmp_path_factory.mktemp("rag-data")
    old = os.environ.get("RAG_DATA_DIR")
    os.environ["RAG_DATA_DIR"] = str(path)
    yield path
    if old is None:
        os.environ.pop("RAG_DATA_DIR", None)
    else:
        os.environ["RAG_DATA_DIR"] = old


class MemoEmbeddings(Embeddings):
    """The real packaged model, remembering vectors it already computed in this session.

    Many tests index the same sample docs; the vectors are the model's own either way.
    """

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.dimension = inner.dimension
        self.model_name = inner.model_name
        self._memo: dict[str, list[float]] = {}
        self._lock = threading.Lock()

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        with self._lock:
            missing = list(dict.fromkeys(t for t in texts if t not in self._memo))
        if missing:
            vectors = self.inner.embed_documents(missing)
            with self._lock:
                self._memo.update(zip(missing, vectors, strict=True))
        with self._lock:
            return [list(self._memo[t]) for t in texts]

    def embed_query(self, text: str) -> list[float]:
        return self.embed_documents([text])[0]

    # Memories' clause vectors as the packaged model makes them, from its runs of their
    # texts (not memoized: what tests check of them is the model's own way).
    def embed_spans(self, texts: list[str], spans: Any) -> Any:
        return self.inner.embed_spans(texts, spans)

    async def aembed_spans(self, texts: list[str], spans: Any) -> Any:
        return await self.inner.aembed_spans(texts, spans)


@pytest.fixture(scope="session")
def minilm_model() -> Any:
    """The real packaged embedder, loaded once, without any memo."""
    from retrievalagent.embeddings import MiniLMEmbeddings

    return MiniLMEmbeddings().load()


@pytest.fixture(scope="session")
def minilm(minilm_model: Any) -> Any:
    """The real packaged embedder (loaded once) with a per-session vector memo."""
    return MemoEmbeddings(minilm_model)


@pytest.fixture
def make_agent(minilm: Any, tmp_path: Path) -> Iterator[Callable[..., Any]]:
    """Build agents on a throwaway index with the real embedder; all are closed afterwards."""
    from retrievalagent import init_agent

    made: list[Any] = []

    def factory(collection: str = "test", **kwargs: Any) -> Any:
        kwargs.setdefault("backend_url", ":memory:")
        kwargs.setdefault("embeddings", minilm)
        kwargs.setdefault("data_dir", tmp_path / "data")
        agent = init_agent(collection, **kwargs)
        made.append(agent)
        return agent

    yield factory
    for agent in made:
        agent.close()


@pytest.fixture(scope="session")
def sample_docs() -> Path:
    return SAMPLE_DOCS


@pytest.fixture
def postgres_url() -> str:
    """A reachable PostgreSQL URL, or skip (fail when CI=true)."""
    url = os.environ.get("RAG_TEST_POSTGRES_URL", "postgresql://postgres@127.0.0.1:5432/test")
    try:
        import psycopg

        with psycopg.connect(url, connect_timeout=3) as conn:
            conn.execute("select 1")
    except Exception as exc:
        message = (
            f"PostgreSQL not reachable at {url} ({exc}); set RAG_TEST_POSTGRES_URL to a "
            "database you can write to to run these tests"
        )
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(message)
        pytest.skip(message)
    return url


@pytest.fixture
def pg_schema_url(postgres_url: str) -> Iterator[str]:
    """A fresh schema in the test database, first on the search path, so LangGraph's tables
    of one test never meet another's (dropped afterwards)."""
    import psycopg

    schema = f"ra_test_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(postgres_url, autocommit=True) as conn:
        conn.execute(f'CREATE SCHEMA "{schema}"')
    try:
        yield schema_url(postgres_url, schema)
    finally:
        with psycopg.connect(postgres_url, autocommit=True) as conn:
            conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


# -- checkpointers, one per kind, like langgraph's own conftest_checkpointer.py ---------------
@pytest.fixture(params=["memory", "sqlite", "postgres"])
def saver(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Any]:
    """Each sync checkpointer kind in turn, for ``invoke``."""
    kind = request.param
    if kind == "memory":
        from langgraph.checkpoint.memory import MemorySaver

        yield MemorySaver()
    elif kind == "sqlite":
        from langgraph.checkpoint.sqlite import SqliteSaver

        with SqliteSaver.from_conn_string(str(tmp_path / "checkpoints.db")) as cp:
            yield cp
    else:
        from langgraph.checkpoint.postgres import PostgresSaver

        url = request.getfixturevalue("pg_schema_url")
        with PostgresSaver.from_conn_string(url) as cp:
            cp.setup()
            yield cp


@pytest.fixture(params=["memory", "sqlite_async", "postgres_async"])
async def asaver(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Any]:
    """Each async checkpointer kind in turn, for ``ainvoke``."""
    kind = request.param
    if kind == "memory":
        from langgraph.checkpoint.memory import MemorySaver

        yield MemorySaver()
    elif kind == "sqlite_async":
        from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver

        async with AsyncSqliteSaver.from_conn_string(str(tmp_path / "checkpoints.db")) as cp:
            yield cp
    else:
        from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver

        url = request.getfixturevalue("pg_schema_url")
        async with AsyncPostgresSaver.from_conn_string(url) as cp:
            await cp.setup()
            yield cp

"""Shared pieces of the persistence / conversation tests (no tests of its own).

* ``RecordingChat`` — a fake chat model: it says what a script says and records every input
  (answer, grade, rewrite and title calls are told apart by their system prompt).
* ``pg_schema_url`` — the test PostgreSQL with a fresh schema first on the search path, so
  LangGraph's tables of one test never meet another's (dropped afterwards).
* ``saver`` / ``asaver`` — one checkpointer per kind, like langgraph's own
  ``conftest_checkpointer.py``: sync kinds for ``invoke``, async kinds for ``ainvoke``.
* ``small_docs`` — a tiny corpus, quick to embed in every test.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest
from langchain_core.callbacks import CallbackManagerForLLMRun
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, SystemMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.runnables import Runnable, RunnableLambda
from pydantic import Field

from retrievalagent.types import Grade

__all__ = [
    "ASYNC_SAVERS",
    "SMALL_DOCS",
    "SYNC_SAVERS",
    "RecordingChat",
    "asaver",
    "pg_schema_url",
    "saver",
    "schema_url",
]

SYNC_SAVERS = ["memory", "sqlite", "postgres"]
ASYNC_SAVERS = ["memory", "sqlite_async", "postgres_async"]

SMALL_DOCS = [
    "# Snapshots\nA snapshot is a point-in-time copy of the Lanternfish database. Snapshots "
    "are taken every six hours and kept for fourteen days.",
    "# Restoring\nTo restore a snapshot, stop the ingest workers, run `lf restore <id>` and "
    "start the workers again. A restore takes about ten minutes per terabyte.",
    "# Quotas\nEach tenant may keep at most forty snapshots. Older snapshots are pruned "
    "first when the quota is reached.",
    "# Alerts\nThe on-call engineer is paged when replication lag exceeds thirty seconds "
    "for more than five minutes.",
]


def kind_of(messages: list[BaseMessage]) -> str:
    """Which role a model call plays, from its system prompt."""
    system = next((str(m.content) for m in messages if isinstance(m, SystemMessage)), "")
    if system.startswith("Name a conversation"):
        return "title"
    if system.startswith("A search over the user's documents"):
        return "rewrite"
    if system.startswith("You check an answer"):
        return "grade"
    return "answer"


class RecordingChat(BaseChatModel):
    """A fake chat model that records its inputs.

    ``reply(kind, messages) -> str`` writes the words; ``grade(messages) -> Grade`` answers
    the structured grade (sufficient by default).
    """

    reply: Callable[[str, list[BaseMessage]], str] = Field(
        default=lambda kind, messages: f"{kind} reply {len(messages)}"
    )
    grade: Callable[[list[BaseMessage]], Grade] = Field(
        default=lambda messages: Grade(sufficient=True, confidence=0.9)
    )
    calls: list[tuple[str, list[BaseMessage]]] = Field(default_factory=list)

    @property
    def _llm_type(self) -> str:
        return "recording-fake"

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        kind = kind_of(messages)
        self.calls.append((kind, list(messages)))
        return ChatResult(
            generations=[ChatGeneration(message=AIMessage(self.reply(kind, messages)))]
        )

    def with_structured_output(self, schema: Any, **kwargs: Any) -> Runnable:  # type: ignore[override]
        def run(messages: Any) -> Grade:
            msgs = list(messages.to_messages() if hasattr(messages, "to_messages") else messages)
            self.calls.append(("grade", msgs))
            return self.grade(msgs)

        return RunnableLambda(run)

    def inputs(self, kind: str) -> list[list[BaseMessage]]:
        return [msgs for k, msgs in self.calls if k == kind]


# -- PostgreSQL ------------------------------------------------------------------------------
def schema_url(url: str, schema: str) -> str:
    """``url`` with ``schema`` first on the search path (libpq ``options``)."""
    sep = "&" if "?" in url else "?"
    return f"{url}{sep}options={quote(f'-csearch_path={schema}')}"


@pytest.fixture
def pg_schema_url(postgres_url: str) -> Iterator[str]:
    """A fresh schema in the test database (dropped afterwards)."""
    import psycopg

    schema = f"ra_test_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(postgres_url, autocommit=True) as conn:
        conn.execute(f'CREATE SCHEMA "{schema}"')
    try:
        yield schema_url(postgres_url, schema)
    finally:
        with psycopg.connect(postgres_url, autocommit=True) as conn:
            conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


# -- checkpointers, one per kind --------------------------------------------------------------
@pytest.fixture(params=SYNC_SAVERS)
def saver(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Any]:
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


@pytest.fixture(params=ASYNC_SAVERS)
async def asaver(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Any]:
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

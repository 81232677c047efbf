"""Conversation memory, the third kind of long-term memory: what a user said in one
conversation reaches the prompt of their later ones, dated, and only theirs.

Tried as a new user would, on every backend a user has (``InMemoryStore``, PostgreSQL's
``PostgresStore`` / ``AsyncPostgresStore``, mem0 ``Memory`` / ``AsyncMemory`` with the offline
config, the embedded ``memory=True``), sync and async. What is checked is what a user sees:
the turn's ``memory_context`` and the answer prompt a model receives, what ``recall`` and
``list_memories`` show, what ``forget`` erases, what reaches the storage itself. The only
fake is the chat model's words (``ScriptedChatModel``).
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import decimal
import enum
import json
import logging
import pickle
import re
import threading
import time
import uuid
import warnings
from collections.abc import AsyncIterator, Callable, Iterator
from datetime import date, datetime, timedelta, timezone
from datetime import time as dt_time
from functools import partial
from pathlib import Path
from typing import Any

import pytest
from langchain_core.embeddings import Embeddings
from langchain_core.messages import (
    AIMessage,
    AIMessageChunk,
    HumanMessage,
    HumanMessageChunk,
    SystemMessage,
    ToolMessage,
)
from langgraph.checkpoint.memory import MemorySaver
from langgraph.store.base import GetOp, PutOp
from langgraph.store.memory import InMemoryStore

from retrievalagent import ConfigError
from retrievalagent.memory import Mem0Backend
from retrievalagent.memory._locks import UserLocks
from retrievalagent.types import Grade
from tests.faults import FaultPlan, FaultyAsyncMem0, FaultyStore
from tests.support.chat import ScriptedChatModel, prompt_text, question_of, system_text
from tests.support.memory import CountingEmbeddings, learned_grade, mem0_config

pytestmark = pytest.mark.timeout(240)

#: A tiny corpus about what the example user asks.
PG_DOCS = [
    "# Backups\nPostgreSQL backups: pg_dump writes a logical backup of one database; "
    "pg_basebackup copies the whole cluster for point-in-time recovery with WAL archiving.",
    "# Upgrades\nTo upgrade a PostgreSQL database to a new major version, run pg_upgrade or "
    "dump and restore; a minor version only needs the new packages and a restart.",
    "# Monitoring\nWatch the replication lag and the disk usage of each database server.",
]
STATEMENT = "My cluster runs PostgreSQL 13 on Debian 11. How do backups work?"
#: A model's answer to it, as a real one reads (it names the database).
REPLY = "Back up the whole cluster with pg_basebackup, or one database with pg_dump [1]."
FOLLOW_UP = "How should I upgrade my database?"
SAID = "PostgreSQL 13 on Debian 11"
#: How the answer prompt introduces what the user said in earlier conversations.
SECTION = "From this user's earlier conversations"

SYNC_BACKENDS = ["store", "postgres", "mem0", "mem0_async", "memory"]
ASYNC_BACKENDS = ["store", "postgres", "postgres_async", "mem0", "mem0_async", "memory"]


def cfg(user: str, thread: str | None = None, now: Any = None) -> dict[str, Any]:
    configurable: dict[str, Any] = {"user_id": user}
    if thread is not None:
        configurable["thread_id"] = thread
    if now is not None:
        configurable["now"] = now
    return {"configurable": configurable}


def day_label(moment: datetime) -> str:
    """A date as the prompt shows it: ``2026-03-14 (Sat)``."""
    return moment.strftime("%Y-%m-%d (%a)")


def conversation_lines(context: str) -> list[str]:
    """The dated lines of the conversation section of a memory context."""
    if SECTION not in context:
        return []
    section = context.split(SECTION, 1)[1].split("\n\n", 1)[0]
    return [line for line in section.splitlines()[1:] if line.startswith("- ")]


def said(memories: list[Any]) -> list[Any]:
    return [m for m in memories if m["kind"] == "conversation"]


# -- backends ---------------------------------------------------------------------------------
@pytest.fixture
def pg_store(pg_schema_url: str) -> Iterator[Any]:
    from langgraph.store.postgres import PostgresStore

    with PostgresStore.from_conn_string(pg_schema_url) as store:
        store.setup()
        yield store


@pytest.fixture
def memory_of(request: pytest.FixtureRequest, tmp_path: Path, minilm: Any) -> Callable[..., Any]:
    """``init_agent`` arguments giving the named memory backend (a fresh one each call,
    except the PostgreSQL schema of the test)."""
    made = iter(range(1000))
    # PostgreSQL is set up before the agents (``build`` asks for this fixture first), so
    # it is torn down after they are closed and their last writes have landed
    kind = getattr(getattr(request.node, "callspec", None), "params", {}).get("kind")
    if kind in ("postgres", "postgres_async"):
        request.getfixturevalue("pg_store" if kind == "postgres" else "pg_schema_url")

    def make(kind: str) -> dict[str, Any]:
        if kind == "store":
            return {"memory_store": InMemoryStore()}
        if kind == "postgres":
            return {"memory_store": request.getfixturevalue("pg_store")}
        if kind == "memory":
            return {"memory": True}
        from mem0 import AsyncMemory, Memory

        flavour = AsyncMemory if kind == "mem0_async" else Memory
        config = mem0_config(tmp_path / f"mem0-{next(made)}", minilm)
        return {"mem0_memory": flavour.from_config(config)}

    return make


@pytest.fixture
def build(memory_of: Callable[..., Any], make_agent: Callable[..., Any]) -> Callable[..., Any]:
    """An agent over PG_DOCS with the named memory backend."""

    def factory(kind: str = "store", docs: list[str] = PG_DOCS, **kwargs: Any) -> Any:
        if not any(k in kwargs for k in ("memory_store", "mem0_memory", "memory")):
            kwargs.update(memory_of(kind))
        rag = make_agent("conv", **kwargs)
        if docs:
            rag.add_documents(docs)
        return rag

    return factory


@pytest.fixture
async def abuild(
    build: Callable[..., Any], request: pytest.FixtureRequest
) -> AsyncIterator[Callable[..., Any]]:
    """``build`` for async tests: ``postgres_async`` is an ``AsyncPostgresStore`` opened on
    the test's own event loop."""
    made: list[Any] = []
    async with contextlib.AsyncExitStack() as stack:

        async def factory(kind: str = "store", **kwargs: Any) -> Any:
            if kind == "postgres_async":
                from langgraph.store.postgres import AsyncPostgresStore

                url = request.getfixturevalue("pg_schema_url")
                store = await stack.enter_async_context(AsyncPostgresStore.from_conn_string(url))
                await store.setup()
                kwargs["memory_store"] = store
            made.append(build(kind, **kwargs))
            return made[-1]

        yield factory
        for rag in made:  # the last turn's writes land before the store closes
            await rag.adrain_background(10)


def check_example(second: Any, memories: list[Any], before: datetime) -> None:
    """Turn 2 of the issue's example carries turn 1's statement, dated today, and the
    user's memory lists it as a conversation memory of thread 1."""
    days = {day_label(before), day_label(datetime.now(timezone.utc))}
    assert second.memory_context.startswith(SECTION), second.memory_context
    (line,) = [line for line in conversation_lines(second.memory_context) if SAID in line]
    assert any(line.startswith(f"- [{day}") for day in days), line
    assert any(f"today is {day}" in second.memory_context for day in days)
    first = [m for m in said(memories) if m["thread_id"] == "t1"]
    assert first and SAID in first[0]["text"] and first[0]["form"] == "exchange"
    assert first[0]["at"][:10] in {d[:10] for d in days}


# -- 1. the issue's example -----------------------------------------------------------------
@pytest.mark.parametrize("kind", SYNC_BACKENDS)
def test_the_postgresql_13_example_offline(build: Callable[..., Any], kind: str) -> None:
    rag = build(kind)
    before = datetime.now(timezone.utc)
    rag.invoke(STATEMENT, cfg("alice", "t1"))
    second = rag.invoke(FOLLOW_UP, cfg("alice", "t2"))
    check_example(second, rag.list_memories("alice"), before)
    # the offline answer quotes it, as a model would use it
    assert SAID in second.answer


@pytest.mark.parametrize("kind", ASYNC_BACKENDS)
async def test_the_postgresql_13_example_offline_async(
    abuild: Callable[..., Any], kind: str
) -> None:
    rag = await abuild(kind)
    before = datetime.now(timezone.utc)
    await rag.ainvoke(STATEMENT, cfg("alice", "t1"))
    second = await rag.ainvoke(FOLLOW_UP, cfg("alice", "t2"))
    check_example(second, await rag.alist_memories("alice"), before)
    assert (await rag.adrain_background(10))["failed"] == 0


#: Documents that say nothing of databases: the offline reply to the statement then names
#: none either, and only the statement itself can link it to the follow-up.
OTHER_DOCS = [
    "# Sourdough\nFeed the starter twice a day; dry a thin layer on parchment to keep a spare.",
    "# Ovens\nTo update the oven's firmware, hold the light button until it beeps twice.",
]


@pytest.mark.parametrize("docs", [OTHER_DOCS, []], ids=["other-docs", "no-docs"])
@pytest.mark.parametrize("kind", SYNC_BACKENDS)
def test_the_example_offline_whatever_the_documents_say(
    build: Callable[..., Any], kind: str, docs: list[str]
) -> None:
    """The follow-up names the kind ("my database"), the statement the name ("PostgreSQL
    13"): they share no word, and the packaged embedder finds them no closer than the
    question and a car. Before names were searched by their kind too, the example worked
    offline only over documents whose quoted answer said "database"."""
    rag = build(kind, docs=docs)
    before = datetime.now(timezone.utc)
    rag.invoke(STATEMENT, cfg("alice", "t1"))
    rag.invoke("My car is a 2012 Honda Civic and the brakes squeak.", cfg("alice", "t3"))
    second = rag.invoke(FOLLOW_UP, cfg("alice", "t2"))
    check_example(second, rag.list_memories("alice"), before)
    # the offline answer quotes it, also when no passage is found
    assert SAID in second.answer, second.answer
    if not docs:  # and the reply that found nothing is not kept as something said
        assert all("indexed documents" not in m["text"] for m in rag.list_memories("alice"))
    assert not any("Civic" in line for line in conversation_lines(second.memory_context))
    for question in ("What OS is my server on?", "Which Postgres release am I on?"):
        hits = rag.recall(question, user_id="alice", k=1)
        assert hits and SAID in hits[0]["text"], (question, hits)
    assert rag.recall(FOLLOW_UP, user_id="bob") == []  # and only alice's


@pytest.mark.parametrize("kind", ["postgres_async", "mem0_async"])
async def test_the_example_offline_whatever_the_documents_say_async(
    abuild: Callable[..., Any], kind: str
) -> None:
    rag = await abuild(kind, docs=OTHER_DOCS)
    before = datetime.now(timezone.utc)
    await rag.ainvoke(STATEMENT, cfg("alice", "t1"))
    second = await rag.ainvoke(FOLLOW_UP, cfg("alice", "t2"))
    check_example(second, await rag.alist_memories("alice"), before)
    assert (await rag.adrain_background(10))["failed"] == 0


@pytest.mark.parametrize("kind", ["store", "postgres", "mem0"])
def test_the_example_reaches_the_models_answer_prompt(build: Callable[..., Any], kind: str) -> None:
    model = ScriptedChatModel(replies=[REPLY, "Run pg_upgrade from PostgreSQL 13 [2]."])
    rag = build(kind, model=model)
    before = datetime.now(timezone.utc)
    rag.invoke(STATEMENT, cfg("alice", "t1"))
    rag.invoke(FOLLOW_UP, cfg("alice", "t2"))
    first, second = model.inputs("answer")
    assert SECTION not in system_text(first)  # nothing was said before turn 1
    lines = conversation_lines(system_text(second))
    days = {day_label(before), day_label(datetime.now(timezone.utc))}
    assert any(SAID in line and line[3:19] in days for line in lines), lines


async def test_the_example_reaches_the_answer_prompt_async(build: Callable[..., Any]) -> None:
    model = ScriptedChatModel(replies=[REPLY, "Run pg_upgrade [2]."])
    rag = build("mem0_async", model=model)
    await rag.ainvoke(STATEMENT, cfg("alice", "t1"))
    await rag.ainvoke(FOLLOW_UP, cfg("alice", "t2"))
    assert any(SAID in line for line in conversation_lines(system_text(model.inputs("answer")[1])))


# -- 2. remember / aremember -------------------------------------------------------------------
AT = datetime(2026, 1, 5, 9, 30, tzinfo=timezone(timedelta(hours=1)))
HISTORY: list[dict[str, Any]] = [
    {
        "role": "user",
        "name": "alice",
        "content": "Our staging cluster runs PostgreSQL 13 on Debian 11.",
        "metadata": {"slack_ts": "1736065800.000100", "channel": "ops"},
    },
    {
        "role": "assistant",
        "content": "Noted: staging is on PostgreSQL 13.",
        "metadata": {"slack_ts": "1736065801.000200"},
    },
    {"role": "system", "content": "You are a helpful bot."},  # not something a person said
    {
        "role": "user",
        "name": "sam",
        "content": "Our nightly backups land in the S3 bucket ops-backups in eu-west-1.",
        "metadata": {"slack_ts": "1736065802.000300"},
    },
]


def check_remembered(
    stored: list[Any], hits: list[Any], again: list[Any], listed: list[Any]
) -> None:
    assert len(stored) == 2 and all(m["kind"] == "conversation" for m in stored), stored
    assert len(listed) == 2
    best = hits[0]
    assert best["kind"] == "conversation" and best["thread_id"] == "ops-2026-01-05"
    assert "PostgreSQL 13" in best["text"] and "alice" in best["text"]
    assert datetime.fromisoformat(best["at"]) == AT
    assert 0.0 < best["score"] <= 1.0
    # the metadata of the messages it came from, in order (the reply included)
    assert best["sources"] == [HISTORY[0]["metadata"], HISTORY[1]["metadata"]]
    assert all("S3 bucket" not in h["text"] for h in hits)  # not about the question
    (sam,) = [m for m in listed if "S3 bucket" in m["text"]]
    assert sam["sources"] == [HISTORY[3]["metadata"]] and datetime.fromisoformat(sam["at"]) == AT
    assert again == []  # importing it again stores nothing new
    # a hit reads as a dict and as a record, whichever a caller wrote for
    for item in (*stored, *hits, *listed):
        assert (item.kind, item.text, item.thread_id, item.at, item.sources) == (
            item["kind"],
            item["text"],
            item["thread_id"],
            item["at"],
            item["sources"],
        )
    assert best.score == best["score"]


def test_what_remember_and_recall_return_are_dicts_whose_fields_read_as_attributes(
    build: Callable[..., Any],
) -> None:
    rag = build()
    stored = rag.remember(HISTORY, user_id="alice", thread_id="ops-2026-01-05", at=AT)
    (hit, *_) = rag.recall("Which PostgreSQL version does staging run?", user_id="alice")
    (listed, *_) = rag.list_memories("alice")
    for item, kind in ((stored[0], "MemoryInfo"), (hit, "Recollection"), (listed, "MemoryInfo")):
        assert isinstance(item, dict) and json.loads(json.dumps(item)) == item
        assert pickle.loads(pickle.dumps(item)).text == item["text"]
        assert copy.deepcopy(item) == item and "sources" in dir(item)
        with pytest.raises(AttributeError, match=rf"{kind} has no field 'txt'.*\btext\b"):
            _ = item.txt
        with pytest.raises(AttributeError, match=r"set by key: \['text'\] = "):
            item.text = "changed"  # read-only as attributes: a dict to change by key
        assert item.copy().text == item["text"]  # a copy is the same kind of record
    assert hit.text == hit["text"] and "PostgreSQL 13" in hit.text


@pytest.mark.parametrize("kind", ["store", "postgres", "mem0", "memory"])
def test_remember_imports_a_conversation_with_its_sources(
    build: Callable[..., Any], kind: str
) -> None:
    rag = build(kind)
    stored = rag.remember(HISTORY, user_id="alice", thread_id="ops-2026-01-05", at=AT)
    hits = rag.recall("Which PostgreSQL version does staging run?", user_id="alice")
    again = rag.remember(HISTORY, user_id="alice", thread_id="ops-2026-01-05", at=AT)
    check_remembered(stored, hits, again, rag.list_memories("alice"))
    assert rag.recall("Which PostgreSQL version does staging run?", user_id="bob") == []


@pytest.mark.parametrize("kind", ["store", "postgres_async", "mem0_async"])
async def test_aremember_imports_a_conversation_with_its_sources(
    abuild: Callable[..., Any], kind: str
) -> None:
    rag = await abuild(kind)
    stored = await rag.aremember(
        HISTORY, user_id="alice", thread_id="ops-2026-01-05", at=AT.isoformat()
    )
    hits = await rag.arecall("Which PostgreSQL version does staging run?", user_id="alice")
    again = await rag.aremember(HISTORY, user_id="alice", thread_id="ops-2026-01-05", at=AT)
    check_remembered(stored, hits, again, await rag.alist_memories("alice"))


class _ReadsFail(InMemoryStore):
    """A store whose reads fail while its writes would still land (a timeout on a
    read-only replica, a lock held by another writer)."""

    down = True

    def batch(self, ops: Any) -> Any:
        ops = list(ops)
        if self.down and not any(isinstance(op, PutOp) for op in ops):
            raise ConnectionError("store read timed out")
        return super().batch(ops)

    async def abatch(self, ops: Any) -> Any:
        return self.batch(ops)


@pytest.mark.parametrize("use_async", [False, True])
async def test_remember_says_when_the_store_cannot_be_read_and_stores_nothing_half(
    build: Callable[..., Any], use_async: bool
) -> None:
    """``remember`` cannot tell what is stored already: it raises the store's error, not
    an empty list, and writes nothing; once the store answers, the same call stores it."""
    store = _ReadsFail()
    rag = build("store", memory_store=store)
    where: dict[str, Any] = {"user_id": "alice", "thread_id": "ops-2026-01-05", "at": AT}
    with pytest.raises(ConnectionError, match="read timed out"):
        if use_async:
            await rag.aremember(HISTORY, **where)
        else:
            rag.remember(HISTORY, **where)
    store.down = False
    assert rag.list_memories("alice") == []
    stored = await rag.aremember(HISTORY, **where) if use_async else rag.remember(HISTORY, **where)
    assert len(stored) == 2
    (hit, *_) = rag.recall("Which PostgreSQL version does staging run?", user_id="alice")
    assert "PostgreSQL" in hit["text"] and hit["thread_id"] == "ops-2026-01-05"


@pytest.mark.parametrize("kind", ["store", "mem0"])
def test_importing_the_same_history_twice_without_a_thread_or_time_stores_it_once(
    build: Callable[..., Any], kind: str
) -> None:
    """What the CLI's `memory import FILE` does when run twice on one file."""
    rag = build(kind)
    first = rag.remember(HISTORY, user_id="alice")
    assert len(first) == 2
    assert rag.remember(HISTORY, user_id="alice") == []
    assert len(rag.list_memories("alice")) == 2


# -- remember_many / aremember_many: a long history at once ---------------------------------
SESSIONS: list[Any] = [  # three conversations of one user; the last is its messages alone
    {"messages": HISTORY, "thread_id": "ops-2026-01-05", "at": AT},
    {
        "messages": [
            {"role": "user", "content": "I moved the reports job to Fridays at 06:00 UTC."},
            {"role": "assistant", "content": "Done: reports now run on Fridays."},
        ],
        "thread_id": "ops-2026-02-02",
        "at": "2026-02-02T10:00:00+00:00",
    },
    [{"role": "user", "content": "Grafana alerts go to the #oncall channel from now on."}],
]


def one_by_one(rag: Any, user: str) -> list[Any]:
    stored: list[Any] = []
    for conversation in SESSIONS:
        if isinstance(conversation, dict):
            where = {"thread_id": conversation["thread_id"], "at": conversation["at"]}
            stored += rag.remember(conversation["messages"], user_id=user, **where)
        else:
            stored += rag.remember(conversation, user_id=user)
    return stored


def as_stored(memories: list[Any]) -> list[tuple[Any, ...]]:
    """What a memory is, whoever it belongs to: its words, conversation, sources and (where
    the conversation had one) its time."""
    return sorted(
        (
            m["text"],
            m["thread_id"],
            json.dumps(m["sources"], sort_keys=True),
            m["at"] if m["thread_id"].startswith("ops-") else "",
        )
        for m in said(memories)
    )


@pytest.mark.parametrize("kind", ["store", "postgres", "mem0"])
def test_remember_many_stores_what_remembering_one_by_one_stores(
    build: Callable[..., Any], kind: str
) -> None:
    rag = build(kind)
    singly = one_by_one(rag, "ann")
    at_once = rag.remember_many(SESSIONS, user_id="bob")
    assert len(at_once) == 4 and as_stored(at_once) == as_stored(singly)
    assert as_stored(rag.list_memories("bob")) == as_stored(rag.list_memories("ann"))
    best = rag.recall("Which PostgreSQL version does staging run?", user_id="bob")[0]
    assert best["thread_id"] == "ops-2026-01-05" and "PostgreSQL 13" in best["text"]
    assert datetime.fromisoformat(best["at"]) == AT
    (friday,) = rag.recall("When does the reports job run?", user_id="bob", k=1)
    assert "Fridays at 06:00" in friday["text"] and friday["thread_id"] == "ops-2026-02-02"
    assert rag.remember_many(SESSIONS, user_id="bob") == []  # imported again: nothing new
    assert rag.remember_many([], user_id="bob") == []


@pytest.mark.parametrize("kind", ["store", "postgres_async", "mem0_async"])
async def test_aremember_many_stores_a_history_at_once(
    abuild: Callable[..., Any], kind: str
) -> None:
    rag = await abuild(kind)
    stored = await rag.aremember_many(SESSIONS, user_id="bob")
    assert len(stored) == 4 and len(said(await rag.alist_memories("bob"))) == 4
    best = (await rag.arecall("Which PostgreSQL version does staging run?", user_id="bob"))[0]
    assert best["thread_id"] == "ops-2026-01-05" and "PostgreSQL 13" in best["text"]
    assert await rag.aremember_many(SESSIONS, user_id="bob") == []
    assert await rag.arecall("Which PostgreSQL version does staging run?", user_id="ann") == []


@pytest.mark.parametrize(
    ("bad", "named"),
    [
        ([SESSIONS[0], [{"role": "wizard", "content": "x"}]], r"conversations\[1\]"),
        ([SESSIONS[1], {"messages": HISTORY, "thread": "t"}], r"conversations\[1\].*'thread'"),
        ([{"thread_id": "t"}], r"conversations\[0\]: no messages"),
        ([SESSIONS[1], {"messages": HISTORY, "at": "last Tuesday"}], r"conversations\[1\]"),
        (SESSIONS[0], "a list of conversations"),
        ("hello", "a list of conversations"),
        (HISTORY, "conversations\\[0\\] is a message: remember_many takes a list"),
        ([SESSIONS[1], None], r"conversations\[1\] is a NoneType"),
        (None, "got NoneType"),
    ],
)
def test_remember_many_checks_every_conversation_before_storing_any(
    build: Callable[..., Any], bad: Any, named: str
) -> None:
    rag = build("store")
    with pytest.raises(ConfigError, match=named):
        rag.remember_many(bad, user_id="ann")
    assert rag.list_memories("ann") == []  # the good ones before it were not stored either


def test_remember_many_embeds_a_history_together(build: Callable[..., Any], minilm: Any) -> None:
    """Why it exists: the embedder runs best on large batches, so forty conversations are
    one embedding call, not forty."""
    counting = CountingEmbeddings(minilm)
    calls = counting.calls
    rag = build("store", embeddings=counting)
    calls.clear()
    history = [
        {"messages": [{"role": "user", "content": f"Host web-{n:02d} runs nginx {n}.1."}]}
        for n in range(40)
    ]
    assert len(rag.remember_many(history, user_id="ann")) == 40
    assert calls == [40]
    (hit,) = rag.recall("Which nginx version is on web-17?", user_id="ann", k=1)
    assert "web-17" in hit["text"]


def test_remember_many_names_the_user_or_the_agent_not_a_conversation(
    build: Callable[..., Any], make_agent: Callable[..., Any]
) -> None:
    """A problem with the call itself is not blamed on its first conversation, and is
    found even with no conversations at all."""
    rag = build("store")
    for conversations in ([SESSIONS[1]], []):
        with pytest.raises(ConfigError, match=r"^user_id must not be empty"):
            rag.remember_many(conversations, user_id="")
    off = build("store", memory_conversations=False)
    with pytest.raises(ConfigError, match=r"^conversation memory is off"):
        off.remember_many([SESSIONS[1]], user_id="ann")
    with pytest.raises(ConfigError, match=r"^this agent has no long-term memory"):
        make_agent("no-memory").remember_many([], user_id="ann")


def test_remember_takes_langchain_messages(build: Callable[..., Any]) -> None:
    rag = build("store")
    messages = [
        SystemMessage("Be brief."),
        HumanMessage("Der Drucker im Büro 3 druckt nur noch 日本語 Zeichen 🖨️", id="m-1"),
        AIMessage("Prüfen Sie den Treiber.", id="m-2"),
        ToolMessage("driver ok", tool_call_id="call-1"),
        HumanMessage(
            [{"type": "text", "text": "Ticket ZX-4411 is about it."}],
            name="sam",
            id="m-3",
            additional_kwargs={"metadata": {"ticket": "ZX-4411"}},
        ),
    ]
    stored = rag.remember(messages, user_id="ünïcode-user", thread_id="drucker")
    assert [m["sources"] for m in stored] == [
        [{"message_id": "m-1", "role": "user"}, {"message_id": "m-2", "role": "assistant"}],
        [{"ticket": "ZX-4411"}],
    ]
    (hit, *_) = rag.recall("Welche Zeichen druckt der Drucker?", user_id="ünïcode-user")
    assert "日本語 Zeichen 🖨️" in hit["text"] and hit["thread_id"] == "drucker"
    (ticket, *_) = rag.recall("What was ticket ZX-4411 about?", user_id="ünïcode-user")
    assert "sam: Ticket ZX-4411" in ticket["text"]


def test_roles_are_read_in_any_case_as_chat_history_reads_them() -> None:
    """ "User", "HUMAN", "Assistant": what chat(history=...) accepts, remember accepts."""
    rag = make_offline_store_agent()
    stored = rag.remember(
        [
            {"role": "User", "content": "My cluster runs PostgreSQL 13."},
            {"role": "ASSISTANT", "content": "Noted."},
            {"role": " Human ", "content": "It is on Debian 11."},
            {"role": "System", "content": "Be brief."},
        ],
        user_id="cased",
    )
    assert [m["text"] for m in stored] == [
        "user: My cluster runs PostgreSQL 13.\nassistant: Noted.",
        "user: It is on Debian 11.",
    ]


@pytest.mark.parametrize("kind", ["store", "postgres"])
def test_text_no_store_can_take_is_cleaned_and_a_history_stores_whole(
    build: Callable[..., Any], kind: str
) -> None:
    """A NUL (PostgreSQL refuses it), a lone surrogate (UTF-8 cannot encode it) or an
    invisible character in what was said is cleaned as a question's is; a long history
    with one such message at its end stores every conversation, not the first chunk."""
    rag = build(kind)
    history = [
        [{"role": "user", "content": f"Backup job {i} runs at 0{i % 10}:00."}] for i in range(600)
    ]
    history.append([{"role": "user", "content": "The \x00replica \ud800is on\u200b Debian 12."}])
    rag.remember_many(history, user_id="alice")
    memories = rag.list_memories("alice")
    assert len(memories) == 601
    (hit, *_) = rag.recall("Which Debian does the replica run?", user_id="alice")
    assert hit["text"] == "user: The replica \ufffdis on Debian 12."


@pytest.mark.parametrize("kind", ["store", "mem0"])
def test_memories_list_newest_said_first_whatever_order_they_came_in(
    build: Callable[..., Any], kind: str
) -> None:
    rag = build(kind)
    for year in (2025, 2010, 2020):  # imported out of order, as histories are
        rag.remember(
            [{"role": "user", "content": f"In {year} the backups ran on tape."}],
            user_id="o",
            thread_id=f"y{year}",
            at=f"{year}-01-01T09:00:00+00:00",
        )
    listed = [m["text"] for m in rag.list_memories("o")]
    assert [next(y for y in ("2025", "2020", "2010") if y in t) for t in listed] == [
        "2025",
        "2020",
        "2010",
    ]


def test_streamed_langchain_messages_are_remembered(build: Callable[..., Any]) -> None:
    rag = build("store")
    reply = AIMessageChunk(content="Nice") + AIMessageChunk(content=" city.")
    stored = rag.remember(
        [HumanMessageChunk(content="I live in Oslo."), reply], user_id="c", thread_id="s"
    )
    assert [m["text"] for m in stored] == ["user: I live in Oslo.\nassistant: Nice city."]


def _inside_itself() -> dict[str, Any]:
    loop: dict[str, Any] = {}
    loop["me"] = loop
    return loop


def _nested(levels: int) -> dict[str, Any]:
    value: dict[str, Any] = {}
    for _ in range(levels):
        value = {"a": value}
    return value


@pytest.mark.parametrize(
    ("metadata", "problem"),
    [
        ({"a": [{"b": (1, float("nan"))}]}, r"metadata\['a'\]\[0\]\['b'\]\[1\] is not JSON: nan"),
        ({"a": {(1, 2): "x"}}, r"metadata\['a'\] has the key \(1, 2\): keys must be strings"),
        ({"a": ["ok", "x\x00y"]}, r"metadata\['a'\]\[1\] holds a NUL character"),
        ({"a\x00": 1}, r"metadata key 'a\\x00' holds a NUL character"),
        (_inside_itself(), r"metadata\['me'\] holds itself"),
        (_nested(500), r"metadata\['a'\].* is nested more than 64 levels deep"),
    ],
)
def test_metadata_json_cannot_hold_is_refused_naming_where_it_is(
    metadata: dict[str, Any], problem: str
) -> None:
    """Not a RecursionError, nor an error that names no key: each names the place in the
    message's metadata, and nothing is stored."""
    rag = make_offline_store_agent()
    with pytest.raises(ConfigError, match=rf"message 0's {problem}"):
        rag.remember([{"role": "user", "content": "hi", "metadata": metadata}], user_id="ann")
    assert rag.list_memories("ann") == []
    kept = {"a": _nested(40)}  # deep, but within the bound: kept whole
    rag.remember([{"role": "user", "content": "hi", "metadata": kept}], user_id="ann")
    assert rag.list_memories("ann")[0]["sources"] == [kept]


@pytest.mark.parametrize("kind", ["store", "postgres", "mem0"])
@pytest.mark.parametrize(
    ("messages", "at", "problem"),
    [
        ("My cluster runs PostgreSQL 13.", None, "must be a list"),
        ({"role": "user", "content": "hi"}, None, "must be a list"),
        ([], None, "no text"),
        ([{"role": "user", "content": "   "}], None, "no text"),
        ([{"role": "bot", "content": "hi"}], None, "role 'bot'"),
        ([{"role": "user", "content": "hi"}, 42], None, "message 1"),
        ([{"role": "user", "content": "hi", "metadata": "ops"}], None, "metadata must be a dict"),
        ([{"role": "user", "content": "hi"}, {"role": "user", "content": 42}], None, "content"),
        ([{"role": "user", "content": {"text": "hi"}}], None, "message 0's content"),
        ([{"role": "user", "content": [1, "hi"]}], None, "content list holds a int"),
        ([{"role": "user", "content": "hi", "name": {"a": 1}}], None, "name must be text"),
        ([{"role": "user", "content": "hi", "id": ["m1"]}], None, "id must be text or a n"),
        (
            [{"role": "user", "content": "hi", "metadata": {"raw": [b"\x89PNG"]}}],
            None,
            r"message 0's metadata\['raw'\]\[0\] is not JSON: a value of type bytes",
        ),
        (
            [{"role": "user", "content": "hi", "metadata": {"who": object()}}],
            None,
            r"message 0's metadata\['who'\] is not JSON: a value of type object",
        ),
        ([{"role": "user", "content": "hi"}], "yesterday", "at='yesterday'"),
        ([{"role": "user", "content": "hi"}], 20260105, "at must be a datetime"),
        # what PostgreSQL's jsonb refuses is refused on every backend, before anything is stored
        ([{"role": "user", "content": "hi", "metadata": {"x": float("nan")}}], None, "not JSON"),
        ([{"role": "user", "content": "hi", "metadata": {"x": "a\x00b"}}], None, "NUL"),
        ([{"role": "user", "content": "hi", "metadata": {"x": "\ud800"}}], None, "surrogate"),
        # JSON makes every key a string: 1 and "1" would become one key, one value lost
        ([{"role": "user", "content": "hi", "metadata": {1: "a", "1": "b"}}], None, "key 1:"),
        ([{"role": "user", "content": "hi", "metadata": {"x": [{2: "a"}]}}], None, "key 2:"),
        # invisible characters alone are no text, as in a question
        ([{"role": "user", "content": "\u200b\u2060\ufeff"}], None, "no text"),
        # nor the letters that show as blank, a chat app's "blank message"
        ([{"role": "user", "content": "\u2800"}], None, "no text"),
        ([{"role": "user", "content": "\u3164 \u115f"}], None, "no text"),
        # a transcript in another shape: what it has is named, and what was expected
        (
            [{"speaker": "Caroline", "text": "I went to the support group."}],
            None,
            r"message 0 has no 'role' \(it has 'speaker', 'text'\); expected OpenAI-style",
        ),
        ([{"role": None, "content": "hi"}], None, r"message 0 has an empty 'role' \(None\)"),
        # a message's own time that cannot be read is refused, not dated today
        (
            [{"role": "user", "content": "hi", "timestamp": "last tuesday"}],
            None,
            "message 0's timestamp='last tuesday' is not an ISO 8601",
        ),
        (
            [{"role": "assistant", "content": "hi"}, {"role": "user", "content": "x", "at": 5}],
            None,
            "message 1's at must be a datetime",
        ),
        ([{"role": "user", "content": "hi", "create_time": 20260105}], None, "from 1990 on"),
        ([{"role": "user", "content": "hi", "created_at": float("nan")}], None, "is not a time"),
        ([{"role": "user", "content": "hi", "created_at": "2999-01-01"}], None, "in the future"),
    ],
)
def test_remember_refuses_bad_input_naming_the_problem(
    build: Callable[..., Any], messages: Any, at: Any, problem: str, kind: str
) -> None:
    rag = build(kind)
    with pytest.raises(ConfigError, match=problem):
        rag.remember(messages, user_id="alice", at=at)
    assert rag.list_memories("alice") == []  # nothing half-stored


@pytest.mark.parametrize(
    ("where", "problem"),
    [
        ({"user_id": " alice"}, "user_id=' alice'.*whitespace"),
        ({"user_id": "alice\n"}, "user_id"),
        ({"user_id": ""}, "user_id must not be empty"),
        ({"user_id": None}, "user_id must be a string"),
        ({"user_id": "alice", "thread_id": "t1 "}, "thread_id='t1 '"),
    ],
)
async def test_padded_or_invalid_ids_are_refused(
    build: Callable[..., Any], where: dict[str, Any], problem: str
) -> None:
    rag = build("store")
    with pytest.raises(ConfigError, match=problem):
        rag.remember(HISTORY, **where)
    with pytest.raises(ConfigError, match=problem.split("=")[0].split(" ")[0]):
        await rag.aremember(HISTORY, **where)
    if where.get("thread_id") is None:
        with pytest.raises(ConfigError, match=problem.split("=")[0].split(" ")[0]):
            rag.recall("PostgreSQL", user_id=where["user_id"])
    assert rag.list_memories("alice") == []


def test_a_huge_message_is_stored_bounded_and_still_found(build: Callable[..., Any]) -> None:
    rag = build("store")
    log = " ".join(f"line {i}: replication slot lag ok" for i in range(40_000))  # ~1.3 MB
    huge = f"Our primary is PostgreSQL 13 and here is the whole log: {log}"
    rag.remember([{"role": "user", "content": huge}], user_id="alice", thread_id="log")
    (stored,) = rag.list_memories("alice")
    assert len(stored["text"]) < 5_000
    hit = rag.recall("What is our primary database?", user_id="alice")[0]
    assert "PostgreSQL 13" in hit["text"] and len(hit["text"]) < 1_000
    state = rag.invoke("What version is our primary on?", cfg("alice", "t2"))
    assert "PostgreSQL 13" in state.memory_context and len(state.memory_context) < 2_500


# -- 3. recall: every kind, best first, bounded; the time a question names -------------------
ALIAS_FACT = '"backup copy" is called "backup" in these documents'


def teaching_grade(messages: list[Any]) -> Grade:
    """A grader that learns a preference from one statement and a search fact from one
    question (any other turn: nothing worth storing)."""
    question = question_of(messages)
    if question == "I prefer answers in German.":
        return learned_grade("Answer in German.", "language", "preference")
    if "backup copy" in question:
        return learned_grade(ALIAS_FACT, "backup copy")
    return Grade(sufficient=True, confidence=0.9)


@pytest.mark.parametrize("kind", ["store", "memory"])
def test_recall_returns_every_kind_best_first_within_k(
    build: Callable[..., Any], kind: str
) -> None:
    model = ScriptedChatModel(replies=[REPLY], grades=[teaching_grade])
    rag = build(kind, model=model)
    rag.invoke("I prefer answers in German.", cfg("alice", "t0"))
    rag.invoke("How do I take a backup copy of one database?", cfg("alice", "t1"))
    rag.invoke(STATEMENT, cfg("alice", "t2"))
    question = "Where should the backup copy of my PostgreSQL 13 cluster go?"
    hits = rag.recall(question, user_id="alice")
    kinds = {h["kind"] for h in hits}
    assert kinds == {"search_fact", "preference", "conversation"}, hits
    found = [h["score"] for h in hits if h["kind"] != "preference"]
    assert found == sorted(found, reverse=True)  # no time named: by score alone
    # then the preference, which the question is not about
    assert [h["kind"] for h in hits[len(found) :]] == ["preference"]
    assert any(SAID in h["text"] for h in hits if h["kind"] == "conversation")
    assert [h["text"] for h in hits if h["kind"] == "search_fact"] == [ALIAS_FACT]
    assert len(rag.recall(question, user_id="alice", k=2)) == 2
    assert rag.recall(question, user_id="alice", k=1) == hits[:1]
    with pytest.raises(ConfigError, match="k"):
        rag.recall(question, user_id="alice", k=0)
    with pytest.raises(ConfigError):
        rag.recall("   ", user_id="alice")
    with pytest.raises(ConfigError, match="now='yesterday'"):
        rag.recall(question, user_id="alice", now="yesterday")
    with pytest.raises(ConfigError, match="now must be a datetime"):
        rag.recall(question, user_id="alice", now=20260105)
    with pytest.raises(ConfigError, match=r"now is in the future \(2099-01-01.*check the year"):
        rag.recall(question, user_id="alice", now="2099-01-01")
    # what recall shows is what the next turn's prompt gets
    state = rag.invoke(question, cfg("alice", "t3"))
    assert SAID in state.memory_context and "Answer in German." in state.memory_context
    assert ALIAS_FACT in state.memory_context


NOW = datetime(2026, 3, 18, 15, 0, tzinfo=timezone.utc)  # a Wednesday
PRINTER = [
    # two months ago, the best-worded match for the question
    (NOW - timedelta(days=60), "old", "The printer on floor 2 keeps jamming on double-sided A3."),
    # last week (Tuesday the 10th), fewer of the question's words
    (NOW - timedelta(days=8), "last-week", "That printer jammed again, on A3 sheets this time."),
    (NOW - timedelta(days=1), "yesterday", "Lunch at the canteen was fine."),
]


def remember_printer(rag: Any, user: str = "alice") -> None:
    for at, thread, text in PRINTER:
        rag.remember([{"role": "user", "content": text}], user_id=user, thread_id=thread, at=at)


@pytest.mark.parametrize("kind", ["store", "mem0"])
def test_a_question_naming_a_time_recalls_what_was_said_then_first(
    build: Callable[..., Any], kind: str
) -> None:
    rag = build(kind)
    remember_printer(rag)
    question = "What did I say last week about the printer jamming on double-sided A3?"
    undated = rag.recall(question.replace(" last week", ""), user_id="alice", now=NOW)
    assert undated[0]["thread_id"] == "old"  # better worded: first when no time is named
    dated = rag.recall(question, user_id="alice", now=NOW)
    assert dated[0]["thread_id"] == "last-week", dated
    assert any(h["thread_id"] == "old" for h in dated)  # still there, after it
    # "two sessions ago": the conversation before the latest one
    earlier = rag.recall("What did I say two sessions ago?", user_id="alice", now=NOW)
    assert earlier[0]["thread_id"] == "last-week"
    # the prompt puts it first too, dated, with today's date to reckon from
    state = rag.invoke(question, cfg("alice", "t-now", now=NOW.isoformat()))
    lines = conversation_lines(state.memory_context)
    assert lines[0].startswith("- [2026-03-10 (Tue)") and "jammed again" in lines[0], lines
    assert "today is 2026-03-18 (Wed)" in state.memory_context
    # that turn is the latest conversation now, so "two sessions ago" is yesterday's
    latest = rag.recall("What did I say two sessions ago?", user_id="alice", now=NOW)
    assert latest[0]["thread_id"] == "yesterday"


@pytest.mark.parametrize(
    ("question", "day"),
    [
        ("What did I buy in March 2024?", "2024-03-10"),
        ("what did i buy in march, 2025?", "2025-03-10"),
        ("What did I buy on 10 March 2024?", "2024-03-10"),
        ("What did I buy on March 10, 2024?", "2024-03-10"),
        ("What did I buy in early March 2025?", "2025-03-10"),
        ("What did I buy in July 2024?", "2024-07-04"),
        ("What did I buy in 2025?", "2025-03-10"),
        ("What did I buy in March?", "2026-03-10"),  # no year: the latest March
    ],
)
def test_a_year_the_question_names_is_the_year_it_asks_about(question: str, day: str) -> None:
    """ "in March 2024" is March 2024, not the latest March (before, the year was not
    read, and what was said in March 2026 and 2025 came first)."""
    rag = make_offline_store_agent()
    for at, thing in [
        ("2024-03-10", "a red bicycle"),
        ("2025-03-10", "a green kayak"),
        ("2026-03-10", "a blue tent"),
        ("2024-07-04", "a yellow lamp"),
    ]:
        rag.remember([{"role": "user", "content": f"I bought {thing}."}], user_id="bob", at=at)
    found = rag.recall(question, user_id="bob", k=2, now="2026-11-28T12:00:00Z")
    assert found[0]["at"][:10] == day, (question, found)


async def test_a_time_in_the_question_counts_under_arecall_and_ainvoke(
    build: Callable[..., Any],
) -> None:
    rag = build("mem0_async")
    for at, thread, text in PRINTER:
        await rag.aremember(
            [{"role": "user", "content": text}], user_id="alice", thread_id=thread, at=at
        )
    question = "What did I say last week about the printer jamming on double-sided A3?"
    assert (await rag.arecall(question, user_id="alice", now=NOW))[0]["thread_id"] == "last-week"
    state = await rag.ainvoke(question, cfg("alice", "t-now", now=NOW))
    assert "jammed again" in conversation_lines(state.memory_context)[0]


def test_a_second_phrasing_recalls_the_same_statement(build: Callable[..., Any]) -> None:
    rag = build("store")
    rag.invoke(STATEMENT, cfg("alice", "t1"))
    rag.invoke("Is Ruby faster than Python for scripting?", cfg("alice", "t2"))
    for question in (
        "Which PostgreSQL version do I run?",
        "What operating system is my database server on?",
        "remind me: which postgres release was my cluster on again",
    ):
        (best, *_) = rag.recall(question, user_id="alice")
        assert SAID in best["text"], (question, best)


#: What a freelancer said in five conversations; the first answers "How much do I charge
#: per hour now?" in one clause of a message that says more ("small win", "Koala said yes").
RATE_TALK = [
    "small win: raised my rate to 110 AUD an hour from 1 July, Koala said yes without a fight",
    "the gym is open 24 hours now, so I go at 6am before the first client call",
    "booked the flights to Perth for the conference, the fare went up by 90 AUD since last week",
    "my laptop charger died, ordered a new one, arrives in two days",
    "I billed 38 hours to Koala in June, a new record",
]


@pytest.mark.parametrize("kind", ["store", "postgres"])
def test_the_clause_that_answers_is_found_in_a_message_that_says_more(
    build: Callable[..., Any], kind: str
) -> None:
    """A message's one vector dilutes the clause that answers (the rate message above is
    0.19 similar to the question as a whole, 0.49 by its clause about the rate): its
    clauses are embedded too. Without them the gym's opening hours ranked above it. The
    clauses' vectors are stored: a second agent over the same store, as another process
    would be, ranks the same, and they never show in what a user lists."""
    rag = build(kind)
    for i, words in enumerate(RATE_TALK):
        rag.remember(
            [{"role": "user", "content": words}, {"role": "assistant", "content": "Noted."}],
            user_id="ollie",
            thread_id=f"t{i}",
            at=f"2026-01-{11 + i}T10:00:00Z",
        )
    question, now = "How much do I charge per hour now?", "2026-02-01T10:00:00Z"
    first = [h["text"] for h in rag.recall(question, user_id="ollie", k=2, now=now)]
    assert any("raised my rate to 110 AUD" in text for text in first), first
    again = build(kind, memory_store=rag.memory_store) if kind == "store" else build(kind)
    second = [h["text"] for h in again.recall(question, user_id="ollie", k=2, now=now)]
    assert second == first
    listed = json.dumps(again.list_memories("ollie"), default=str)
    assert "part_vectors" not in listed and "vector" not in listed


@pytest.mark.parametrize("kind", ["store", "postgres"])
def test_what_a_process_whose_clock_runs_behind_remembers_is_recalled_by_the_others(
    build: Callable[..., Any], kind: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Another process reads what is new by when it was written. A writer whose clock runs
    ten minutes behind wrote memories that a process already holding the user's index never
    recalled, though list_memories showed them: a write now comes after the last one,
    whatever the writer's clock says."""
    from retrievalagent.memory import _store

    reader = build(kind)
    said = "The staging database lives on host db-stage-01."
    reader.remember([{"role": "user", "content": said}], user_id="kim", thread_id="a")
    assert reader.recall("Where does the staging database live?", user_id="kim")  # loaded
    writer = build(kind, memory_store=reader.memory_store)

    class Behind(datetime):
        @classmethod
        def now(cls, tz: Any = None) -> Any:
            return datetime.now(tz) - timedelta(minutes=10)

    with monkeypatch.context() as patch:
        patch.setattr(_store, "datetime", Behind)
        said = "The nightly backups go to the bucket acme-nightly."
        writer.remember([{"role": "user", "content": said}], user_id="kim", thread_id="b")
    assert len(reader.list_memories("kim")) == 2
    found = reader.recall("Which bucket do the nightly backups go to?", user_id="kim")
    assert any("acme-nightly" in h["text"] for h in found), found
    # the same after a write of a version that did not number them: its stamp's time counts
    stamp = {"token": "from-an-earlier-version", "at": datetime.now(timezone.utc).isoformat()}
    reader.memory_store.put(("memory_stamps", "kim"), "added", stamp, index=False)
    assert reader.recall("Where does the staging database live?", user_id="kim")
    with monkeypatch.context() as patch:
        patch.setattr(_store, "datetime", Behind)
        said = "The weekly reports go to the bucket acme-weekly."
        writer.remember([{"role": "user", "content": said}], user_id="kim", thread_id="c")
    found = reader.recall("Which bucket do the weekly reports go to?", user_id="kim")
    assert any("acme-weekly" in h["text"] for h in found), found


@pytest.mark.parametrize("kind", ["store", "postgres"])
def test_remember_runs_the_model_once_over_each_text_it_stores(
    build: Callable[..., Any], kind: str, minilm_model: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The clauses recall ranks by are pooled from the run of the message they are in: the
    model reads each stored text once, not again clause by clause (that was 1.7 times the
    texts, and most of what ``remember`` took), and the clause still answers."""
    rag = build(kind)
    rows: list[int] = []
    run = minilm_model._hidden

    def counted(encodings: list[Any]) -> Any:
        rows.append(len(encodings))
        return run(encodings)

    monkeypatch.setattr(minilm_model, "_hidden", counted)
    rag.remember(
        [
            {"role": "user", "content": RATE_TALK[0]},
            {"role": "assistant", "content": "Noted."},
            {"role": "user", "content": RATE_TALK[1] + ", and the pool closes at 9pm."},
            {"role": "assistant", "content": "Good to know."},
        ],
        user_id="ollie",
        thread_id="t0",
        at="2026-01-11T10:00:00Z",
    )
    assert sum(rows) == 2, rows
    hits = rag.recall("How much do I charge per hour now?", user_id="ollie", k=1)
    assert "raised my rate to 110 AUD" in hits[0]["text"]


@pytest.mark.parametrize("kind", ["store", "postgres"])
def test_a_stored_vector_that_does_not_read_back_is_embedded_again(
    build: Callable[..., Any], kind: str
) -> None:
    """Vectors in a store can be cut or hand-edited: a clause vector holding infinities
    hid its memory and the next one in the conversation (NaN similarity, carried on by
    context), and an empty vector on the first memory loaded set the width every other one
    was scored at (zero: recall by words alone). A fresh agent now ranks as the writer."""
    import base64

    import numpy as np

    rag = build(kind)
    rag.remember(
        [
            {
                "role": "user",
                "content": "My printer jams on tray 3, the toner is low, and it beeps.",
            },
            {"role": "assistant", "content": "Noted."},
            {
                "role": "user",
                "content": "Also our office moved to Lisbon in March, near the river.",
            },
            {"role": "assistant", "content": "Nice."},
        ],
        user_id="vera",
        thread_id="t1",
        at="2026-07-01T10:00:00Z",
    )
    rag.remember(
        [{"role": "user", "content": "My cat is called Miso and she likes tuna."}],
        user_id="vera",
        thread_id="t2",
        at="2026-07-02T10:00:00Z",
    )
    question = "Where is our office?"

    def ranked(agent: Any) -> list[tuple[str, float]]:
        hits = agent.recall(question, user_id="vera", k=3)
        return [(h["text"], round(h["score"], 4)) for h in hits]

    expected = ranked(rag)
    assert "office moved to Lisbon" in expected[0][0], expected
    store = rag.memory_store
    items = {it.value["text"]: it for it in store.search(("conversations", "vera"))}
    printer = next(it for text, it in items.items() if "printer" in text)
    cat = next(it for text, it in items.items() if "Miso" in text)
    size = len(base64.b64decode(printer.value["part_vectors"])) // 2
    infinite = base64.b64encode(np.full(size, np.inf, dtype="<f2").tobytes()).decode()
    store.put(printer.namespace, printer.key, {**printer.value, "part_vectors": infinite})
    store.put(cat.namespace, cat.key, {**cat.value, "vector": ""})
    fresh = build(kind, memory_store=store) if kind == "store" else build(kind)
    assert ranked(fresh) == expected


def dev_people(*user_ids: str) -> list[dict[str, Any]]:
    """People of the conversation bench's dev half (bench/memory/data), our own set."""
    from bench.memory.conversations import load

    people = [u for u in load()["users"] if u["user_id"] in user_ids]
    assert [u["split"] for u in people] == ["dev"] * len(user_ids)
    return people


def recall_misses(rag: Any, people: list[dict[str, Any]], questions: set[str]) -> list[Any]:
    """Remember every session of ``people``, then ask ``questions``: the evidence turns each
    question's ten best recalled memories do not cover."""
    misses = []
    for person in people:
        user = person["user_id"]
        for session in person["sessions"]:
            at, thread = session["at"], session["thread_id"]
            rag.remember(session["messages"], user_id=user, thread_id=thread, at=at)
        for q in (q for q in person["questions"] if q["id"] in questions):
            hits = rag.recall(q["question"], user_id=user, k=10, now=q["asked_at"])
            found = {str(s.get("turn")) for h in hits for s in h["sources"]}
            if not set(q["evidence"]) <= found:
                misses.append((q["id"], q["question"], [h["text"][:60] for h in hits]))
    return misses


@pytest.mark.parametrize("kind", ["store", "postgres"])
def test_a_follow_up_is_found_by_what_it_answers(build: Callable[..., Any], kind: str) -> None:
    """A follow-up rarely repeats its topic: "passed all his phase 4 exams" answers the
    assistant's "How did Seán do?" after "Seán is back from college". Asked about his time
    at college later, recall finds the follow-up in its ten best."""
    assert recall_misses(build(kind), dev_people("marcus"), {"marcus-q07"}) == []


def test_an_answer_comes_with_its_question_and_the_trace_shows_why(
    build: Callable[..., Any],
) -> None:
    """ "Passed all his phase 4 exams" names neither Seán nor college, but answers "How did
    Seán do this year?": asked how Seán is getting on, recall brings it with its question.
    The trace shows the relevance the bar read (``relevance``: an answer's is its
    question's) beside ``score``, which orders recall (the question first)."""
    rag = build("store")
    remember_odds_and_ends(rag)  # what else ann said
    rag.remember(
        [
            {"role": "user", "content": "Seán is back from college for the summer."},
            {"role": "assistant", "content": "How did Seán do this year?"},
            {"role": "user", "content": "Passed all his phase 4 exams, delighted."},
            {"role": "assistant", "content": "Congratulations to him."},
        ],
        user_id="ann",
        thread_id="june",
        at="2026-06-20T18:00:00Z",
    )
    state = rag.invoke("How is Seán getting on at college?", cfg("ann", "t2"))
    (read,) = state.events("read_memory")
    said = [i for i in read["items"] if i["kind"] == "conversation"]
    assert [("phase 4" in i["text"]) for i in said] == [False, True], said
    question, answer = said
    assert answer["relevance"] == question["relevance"] > answer["score"]
    assert read["best_conversation"] == question["relevance"]
    assert "phase 4 exams" in state.memory_context


def test_a_correction_in_the_next_message_comes_with_what_it_corrects(
    build: Callable[..., Any],
) -> None:
    """ "Sorry, I meant Milan." names no city the question asks about, but corrects "I live
    in Rome.": asked in another conversation, recall brings both (the correction was under
    the bar, and the prompt said Rome; a hostile pass). A follow-up that corrects nothing
    ("Sorry to bother you, ...") is not brought along."""
    rag = build("store")
    remember_odds_and_ends(rag)
    rag.remember(
        [
            {"role": "user", "content": "I live in Rome."},
            {"role": "assistant", "content": "Got it, you live in Rome."},
            {"role": "user", "content": "Sorry, I meant Milan."},
            {"role": "assistant", "content": "Thanks, Milan it is."},
            {"role": "user", "content": "Sorry to bother you, how do I rotate nginx logs?"},
            {"role": "assistant", "content": "Use logrotate."},
        ],
        user_id="ann",
        thread_id="march",
        at="2026-03-01T10:00:00Z",
    )
    shown = rag.invoke("Where do I live?", cfg("ann", "t2")).memory_context
    assert "I live in Rome." in shown and "Sorry, I meant Milan." in shown, shown
    assert "nginx" not in shown, shown


def test_a_question_about_the_past_recalls_its_paraphrase(build: Callable[..., Any]) -> None:
    """ "Why couldn't I leave the shutter open for long with my original setup?" shares no
    word with "anything past about 15 seconds gets arcs at the edges", and "How long are my
    individual subs these days?" none with "60 × 180 s": once the question is plainly about
    the user's past, such a memory is recalled although its relevance alone is under the
    bar. A question about nothing they said still recalls nothing."""
    rag = build("store")
    assert recall_misses(rag, dev_people("raj"), {"raj-q01", "raj-q11"}) == []
    assert rag.recall("What is the boiling point of ethanol?", user_id="raj") == []


#: One exchange each about unrelated things in a user's life.
ODDS_AND_ENDS = [
    "My sister Clara is moving to Lisbon in June.",
    "The dentist appointment is on Tuesday at 3pm.",
    "I'm allergic to penicillin.",
    "Our wifi password changed.",
    "I started learning the cello.",
    "The quarterly report is due Friday.",
    "My cat Miso hates the vacuum cleaner.",
    "We booked a cabin in Norway for August.",
    "I ran a half marathon in 1:52.",
    "The kitchen tap is leaking again.",
    "Our team lead is Priya now.",
    "I switched my phone plan to Vodafone.",
]


def remember_odds_and_ends(rag: Any, month: int = 1, first_day: int = 1) -> None:
    """``ODDS_AND_ENDS``, one a day from ``first_day`` of a month of 2026 (January unless
    told), each in a conversation of its own."""
    for day, said_then in enumerate(ODDS_AND_ENDS, start=first_day):
        rag.remember(
            [{"role": "user", "content": said_then}, {"role": "assistant", "content": "Noted."}],
            user_id="ann",
            thread_id=f"odds-{month:02d}-{day:02d}",
            at=f"2026-{month:02d}-{day:02d}T09:00:00Z",
        )


def test_a_borderline_match_does_not_bring_every_memory_along(build: Callable[..., Any]) -> None:
    """A question that barely matches one memory is not plainly about the user's past: it
    must not open the gate for everything else they said (an allergy in a prompt about
    work). One that plainly is brings what else bears on it."""
    rag = build("store")
    remember_odds_and_ends(rag)
    context = rag.invoke("what's going on at work?", cfg("ann", "new")).memory_context
    assert len(conversation_lines(context)) <= 1, context
    assert "penicillin" not in context
    both = rag.recall("Where is Clara moving, and what about the tap?", user_id="ann")
    texts = " ".join(h["text"] for h in both)
    assert "Lisbon" in texts and "kitchen tap" in texts, both
    assert "penicillin" not in texts


def test_a_time_in_the_question_does_not_lower_the_bar_for_other_times(
    build: Callable[..., Any],
) -> None:
    """ "What did I buy last week?" gets last week's exchanges, whatever their relevance,
    and nothing from January that falls short of the bar: what was said in the window must
    not set the bar for the rest."""
    rag = build("store")
    remember_odds_and_ends(rag)
    for day, said_then in (
        (10, "We watched a documentary about whales."),
        (11, "I bought new running shoes."),
    ):
        rag.remember(
            [{"role": "user", "content": said_then}, {"role": "assistant", "content": "Nice."}],
            user_id="ann",
            thread_id=f"mar-{day}",
            at=f"2026-03-{day}T09:00:00Z",
        )
    hits = rag.recall("What did I buy last week?", user_id="ann", now="2026-03-16T12:00:00Z")
    assert {h["thread_id"] for h in hits} == {"mar-10", "mar-11"}, hits


def test_what_others_asked_for_in_a_shared_chat_stays_recalled(build: Callable[..., Any]) -> None:
    """Only the user's own preferences live in the preference kind: Bob's "Answer in
    Spanish." in a group chat is something Bob said, recalled as such even though the user
    has a language preference of their own."""
    rag = build("store")
    rag.invoke("I prefer answers in German.", cfg("ann", "t1"))
    chat = [
        {"role": "user", "name": "Bob", "content": "Answer in Spanish."},
        {"role": "assistant", "content": "Vale."},
        {"role": "user", "name": "Bob", "content": "Our offsite is in Porto on May 3rd."},
    ]
    rag.remember(chat, user_id="ann", thread_id="team", at="2026-01-05T09:00:00Z")
    hits = rag.recall("Which language did Bob ask for?", user_id="ann")
    assert any("Bob: Answer in Spanish." in h["text"] for h in hits), hits


def test_a_threshold_of_zero_recalls_every_memory_and_fails_nothing(
    build: Callable[..., Any],
) -> None:
    """``conversation_relevance_threshold=0`` (recall everything) works for a user with no
    conversation memory yet and for one with some."""
    rag = build("store", conversation_relevance_threshold=0.0)
    assert rag.recall("What did I say about the printer?", user_id="nobody") == []
    state = rag.invoke("What did I say about the printer?", cfg("nobody", "t1"))
    assert not state.events("read_memory")[0].get("error_type")
    remember_printer(rag, "ann")
    assert len(rag.recall("Anything about lunch?", user_id="ann", now=NOW)) == len(PRINTER)


@pytest.mark.parametrize("kind", ["store", "postgres", "mem0", "memory"])
def test_a_preference_stated_in_an_imported_history_applies_as_if_said_to_the_agent(
    build: Callable[..., Any], kind: str
) -> None:
    """``remember`` stores a conversation as if the user had had it with the agent: "I
    prefer answers in German." said there becomes a standing preference that reaches every
    answer's prompt (and ``remember`` says it stored it), once however often the history
    is imported; a message that says more than a preference is still recalled as said;
    Bob's "Answer in Spanish." in a group chat is Bob's, not the user's."""
    rag = build(kind)
    history = [
        {"role": "user", "content": "I prefer answers in German."},
        {"role": "assistant", "content": "Sure."},
        {"role": "user", "content": "Answer in German / my flight to Oslo leaves at 9:40 Friday"},
        {"role": "assistant", "content": "Have a good trip."},
        {"role": "user", "name": "Bob", "content": "Answer in Spanish."},
    ]
    stored = rag.remember(history, user_id="ann", thread_id="t1", at="2026-01-05T09:00:00Z")
    (learned,) = [m for m in stored if m["kind"] == "preference"]
    assert learned["text"] == "Answer in German." and learned["thread_id"] == "t1"
    assert rag.remember(history, user_id="ann", thread_id="t1", at="2026-01-05T09:00:00Z") == []
    listed = [m for m in rag.list_memories("ann") if m["kind"] == "preference"]
    assert [m["text"] for m in listed] == ["Answer in German."]
    state = rag.invoke("How do I take a backup?", cfg("ann", "t2"))
    assert "Answer in German." in state.memory_context and "Spanish" not in state.memory_context
    flight = rag.recall("When does my flight to Oslo leave?", user_id="ann")
    assert any("9:40" in h["text"] for h in flight), flight
    assert rag.recall("When does my flight to Oslo leave?", user_id="bob") == []


@pytest.mark.parametrize("kind", ["store", "postgres", "mem0"])
def test_an_older_imported_preference_does_not_replace_a_newer_one_and_forget_erases_it(
    build: Callable[..., Any], kind: str
) -> None:
    """Last year's chat imported after this week's turn: its "Answer in Spanish." joins the
    history of the preference said since ("Answer in French."), which stays; forgetting
    the conversation of the newer brings back the last one said before it."""
    rag = build(kind)
    rag.remember(
        [{"role": "user", "content": "Answer in German."}],
        user_id="ann",
        thread_id="jan",
        at="2026-01-05T09:00:00Z",
    )
    rag.invoke("Answer in French.", cfg("ann", "live"))
    rag.drain_background(10)
    stored = rag.remember(
        [{"role": "user", "content": "Answer in Spanish."}],
        user_id="ann",
        thread_id="older",
        at="2025-01-05T09:00:00Z",
    )
    assert [m["kind"] for m in stored] == ["conversation"]  # it joined a history
    prefs = [m for m in rag.list_memories("ann") if m["kind"] == "preference"]
    assert [m["text"] for m in prefs] == ["Answer in French."], prefs
    assert rag.forget("ann", thread_id="live") >= 1
    prefs = [m for m in rag.list_memories("ann") if m["kind"] == "preference"]
    assert [m["text"] for m in prefs] == ["Answer in German."], prefs
    rag.forget("ann", thread_id="jan")
    prefs = [m for m in rag.list_memories("ann") if m["kind"] == "preference"]
    assert [m["text"] for m in prefs] == ["Answer in Spanish."], prefs


def _user_lines_as_facts(messages: list[Any]) -> str:
    """mem0's LLM (its words only): each user line of the new messages becomes a memory."""
    new = prompt_text(messages).rsplit("## New Messages", 1)[-1]
    lines = re.findall(r"^user: (.+)$", new.split("## Observation Date", 1)[0], re.MULTILINE)
    return json.dumps({"memory": [{"id": str(i), "text": t} for i, t in enumerate(lines)]})


def test_an_imported_history_goes_through_mem0s_own_extraction(
    build: Callable[..., Any], tmp_path: Path, minilm: Any
) -> None:
    """With mem0 and its LLM (``infer=True``), ``remember`` hands the conversation to mem0's
    extraction as a turn does, once: importing it again asks mem0's model nothing."""
    from mem0 import Memory

    llm = ScriptedChatModel(replies=[_user_lines_as_facts])
    memory = Memory.from_config(mem0_config(tmp_path / "mem0-infer", minilm, llm))
    rag = build(mem0_memory=Mem0Backend(memory, infer=True))
    said = [{"role": "user", "content": STATEMENT}, {"role": "assistant", "content": "Noted."}]
    rag.remember(said, user_id="alice", thread_id="ops", at="2026-01-05T09:00:00Z")
    assert len(llm.prompts) == 1, llm.prompts
    facts = [m for m in rag.list_memories("alice") if m["form"] == "fact"]
    assert [m["text"] for m in facts] == [STATEMENT] and facts[0]["thread_id"] == "ops"
    rag.remember(said, user_id="alice", thread_id="ops", at="2026-01-05T09:00:00Z")
    assert len(llm.prompts) == 1


class _StopsAtTheFirstPreference(InMemoryStore):
    """Ctrl-C as the first preference is written (the exchanges are stored by then)."""

    armed = True

    def batch(self, ops: Any) -> Any:
        ops = list(ops)
        wrote = any(isinstance(o, PutOp) and o.namespace[:1] == ("memories",) for o in ops)
        if self.armed and wrote:
            self.armed = False
            raise KeyboardInterrupt
        return super().batch(ops)


@pytest.mark.parametrize("how", ["remember", "remember_many"])
def test_an_import_stopped_before_its_preferences_stores_them_when_run_again(
    build: Callable[..., Any], how: str
) -> None:
    """Running an interrupted import again "imports the rest, storing nothing twice": its
    exchanges are not new then, and its preferences are stored all the same, once."""
    rag = build(memory_store=_StopsAtTheFirstPreference())
    history = [
        {"role": "user", "content": "I prefer answers in German."},
        {"role": "assistant", "content": "Sure."},
        {"role": "user", "content": "Keep answers short. My flight leaves Friday."},
    ]

    def run() -> list[Any]:
        if how == "remember":
            return list(rag.remember(history, user_id="ann", thread_id="t1"))
        return list(rag.remember_many([{"messages": history, "thread_id": "t1"}], user_id="ann"))

    with pytest.raises(KeyboardInterrupt):
        run()
    assert [m["kind"] for m in rag.list_memories("ann")] == ["conversation", "conversation"]
    again = run()
    assert sorted(m["text"] for m in again) == ["Answer in German.", "Keep answers short."]
    assert run() == []
    state = rag.invoke("How do I take a backup?", cfg("ann", "t2"))
    assert "Answer in German." in state.memory_context


class _StopsAtAPreference(InMemoryStore):
    """Ctrl-C as the ``stop_at``-th preference is written."""

    def __init__(self, stop_at: int) -> None:
        super().__init__()
        self.left = stop_at

    def batch(self, ops: Any) -> Any:
        ops = list(ops)
        if any(isinstance(o, PutOp) and o.namespace[:1] == ("memories",) for o in ops):
            self.left -= 1
            if self.left == 0:
                raise KeyboardInterrupt
        return super().batch(ops)


def _language(rag: Any) -> tuple[str, str, list[tuple[str, str]]]:
    (held,) = [m for m in rag.list_memories("ann") if m["key"] == "language"]
    return held["text"], held["at"][:10], [(e["text"], e["at"][:10]) for e in held["history"]]


@pytest.mark.parametrize("stop_at", [1, 2, 3])
def test_a_preference_said_again_later_in_one_conversation_survives_a_stopped_import(
    build: Callable[..., Any], stop_at: int
) -> None:
    """German, then French, then German again: the second German is a statement of its
    own, not one already held, so an import stopped at any of the three writes and run
    again ends as an uninterrupted one does; and each preference is reported once (saying
    "Keep answers short." twice in a row is one statement, as a turn would store it)."""
    history = [
        {"role": "user", "content": "Answer in German.", "timestamp": "2026-01-01T09:00:00Z"},
        {"role": "user", "content": "Answer in French.", "timestamp": "2026-01-02T09:00:00Z"},
        {"role": "user", "content": "Keep answers short.", "timestamp": "2026-01-02T10:00:00Z"},
        {"role": "user", "content": "Keep answers short.", "timestamp": "2026-01-02T11:00:00Z"},
        {"role": "user", "content": "Answer in German.", "timestamp": "2026-01-03T09:00:00Z"},
    ]
    whole = build()
    stored = [m["text"] for m in whole.remember(history, user_id="ann", thread_id="t")]
    assert sorted(t for t in stored if not t.startswith("user:")) == [
        "Answer in German.",
        "Keep answers short.",
    ]
    rag = build(memory_store=_StopsAtAPreference(stop_at))
    with pytest.raises(KeyboardInterrupt):
        rag.remember(history, user_id="ann", thread_id="t")
    rag.remember(history, user_id="ann", thread_id="t")
    assert rag.remember(history, user_id="ann", thread_id="t") == []
    expected = (
        "Answer in German.",
        "2026-01-03",
        [("Answer in German.", "2026-01-01"), ("Answer in French.", "2026-01-02")],
    )
    assert _language(whole) == _language(rag) == expected


@pytest.mark.parametrize("kind", ["store", "postgres", "memory"])
def test_importing_an_undated_history_again_changes_nothing(
    build: Callable[..., Any], kind: str
) -> None:
    """German, French, German, French with no times: each statement stands in the
    preference it led to (a history drops an entry whose words a newer one repeats), so
    importing the history again finds every one held, reports nothing and leaves French
    current (it flipped to German and back on each import), also imported with no time
    (dated now); the grown export of the thread, German again at its end, is news."""
    rag = build(kind)
    said = ["Answer in German.", "Answer in French.", "Answer in German.", "Answer in French."]
    history = [{"role": "user", "content": text} for text in said]
    first = rag.remember(history, user_id="ann", thread_id="t", at="2026-01-05T09:00:00Z")
    assert [m["text"] for m in first if m["kind"] == "preference"] == ["Answer in French."]
    before = _language(rag)
    for _ in range(3):
        assert rag.remember(history, user_id="ann", thread_id="t", at="2026-01-05T09:00:00Z") == []
        assert rag.remember(history, user_id="ann", thread_id="t") == []  # dated now
        assert _language(rag) == before
    grown = [*history, {"role": "user", "content": "Answer in German."}]
    stored = rag.remember(grown, user_id="ann", thread_id="t", at="2026-01-06T09:00:00Z")
    assert [m["text"] for m in stored if m["kind"] == "preference"] == ["Answer in German."]
    assert _language(rag)[:2] == ("Answer in German.", "2026-01-06")


class _SlowConversations(InMemoryStore):
    """Conversation writes take a while (a slow database)."""

    def batch(self, ops: Any) -> Any:
        ops = list(ops)
        if any(isinstance(o, PutOp) and o.namespace[:1] == ("conversations",) for o in ops):
            time.sleep(0.8)
        return super().batch(ops)


def test_forgetting_a_conversation_while_it_is_imported_leaves_no_preference_of_it(
    build: Callable[..., Any],
) -> None:
    rag = build(memory_store=_SlowConversations())
    history = [{"role": "user", "content": "I prefer answers in German."}]
    done: list[Any] = []
    importing = threading.Thread(
        target=lambda: done.append(rag.remember(history, user_id="ann", thread_id="t1"))
    )
    importing.start()
    time.sleep(0.3)
    rag.forget("ann", thread_id="t1")
    importing.join(10)
    assert rag.list_memories("ann") == [] and all(m["kind"] != "preference" for m in done[0])
    state = rag.invoke("How do I take a backup?", cfg("ann", "t2"))
    assert "German" not in state.memory_context


def test_each_preference_of_an_imported_history_is_learned_in_the_order_said(
    build: Callable[..., Any],
) -> None:
    """As its turns would have: "Answer in French." then "Actually, answer in Spanish." two
    days later leaves Spanish, with French in its history (forgetting nothing brings it
    back); lines named as the user (an export naming every speaker) are the user's."""
    rag = build()
    history = [
        {"role": "user", "name": "Ann", "content": "Answer in French.", "at": "2026-01-01"},
        {"role": "assistant", "content": "D'accord."},
        {
            "role": "user",
            "name": "Ann",
            "content": "Actually, answer in Spanish.",
            "at": "2026-01-03",
        },
    ]
    stored = rag.remember(history, user_id="ann", thread_id="t1")
    assert [m["text"] for m in stored if m["kind"] == "preference"] == ["Answer in Spanish."]
    (current,) = [m for m in rag.list_memories("ann") if m["kind"] == "preference"]
    assert current["text"] == "Answer in Spanish."
    assert [e["text"] for e in current["history"]] == ["Answer in French."]


async def test_aremember_stores_an_imported_preference(abuild: Callable[..., Any]) -> None:
    rag = await abuild("store")
    stored = await rag.aremember(
        [{"role": "user", "content": "Please keep answers short."}], user_id="ann"
    )
    assert [(m["kind"], m["text"]) for m in stored if m["kind"] == "preference"] == [
        ("preference", "Keep answers short.")
    ]
    state = await rag.ainvoke("How do I take a backup?", cfg("ann", "t2"))
    assert "Keep answers short." in state.memory_context


def test_the_offline_answer_quotes_only_what_the_user_said(build: Callable[..., Any]) -> None:
    """The offline answer reminds the user of what they said before ("Earlier ... you said:
    ..."): never of what a named assistant ("Aria: I run nightly backups") said."""
    rag = build("store")
    question = "How do backups of my PostgreSQL cluster work?"
    rag.remember(
        [
            {"role": "user", "content": "What is the best way to back up PostgreSQL?"},
            {
                "role": "assistant",
                "name": "Aria",
                "content": "I run nightly backups of my PostgreSQL clusters with pg_basebackup.",
            },
        ],
        user_id="ann",
        thread_id="t1",
        at="2026-01-05T09:00:00Z",
    )
    answer = rag.invoke(question, cfg("ann", "t2")).answer
    assert "you said" not in answer and "nightly" not in answer, answer
    rag.remember(
        [{"role": "user", "content": STATEMENT}, {"role": "assistant", "content": "Noted."}],
        user_id="bob",
        thread_id="t1",
        at="2026-01-05T09:00:00Z",
    )
    answer = rag.invoke(question, cfg("bob", "t2")).answer
    assert "(Earlier on 2026-01-05 you said: “My cluster runs PostgreSQL 13" in answer, answer


@pytest.mark.parametrize("kind", ["store", "memory"])
def test_the_offline_answer_quotes_the_users_statement_that_bears_on_the_question(
    build: Callable[..., Any], kind: str
) -> None:
    """From a hostile pass: a request ("Tell me my dog's name.") was quoted as something the
    user said; every personal sentence of an exchange was quoted, the diagnosis beside the
    city asked about; and a user's own lines named by their id (an export that names every
    speaker) were never quoted."""
    rag = build(kind)
    rag.remember(
        [{"role": "user", "content": "My dog is called Biscuit."}],
        user_id="u",
        thread_id="t0",
        at="2026-01-10T09:00:00Z",
    )
    rag.invoke("Tell me my dog's name.", cfg("u", "t1"))
    rag.drain_background()
    answer = rag.invoke("What is my dog's name?", cfg("u", "t2")).answer
    assert "you said: “My dog is called Biscuit.”" in answer, answer
    for n, (told, asked, quoted) in enumerate(
        [
            (
                "I got a puppy last week. I named him Rex.",
                "What's my dog called?",
                "I named him Rex.",
            ),
            ("Tell you what, I'm allergic to peanuts.", "What am I allergic to?", "peanuts"),
        ]
    ):
        rag.remember([{"role": "user", "content": told}], user_id=f"q{n}", at="2026-01-10")
        answer = rag.invoke(asked, cfg(f"q{n}", "t1")).answer
        assert quoted in answer.partition("you said:")[2], answer
    said = "I live in Berlin. I was diagnosed with asthma last year. How fast is shipping?"
    for user, name in [("v", None), ("w", "w")]:
        message = {"role": "user", "content": said} | ({"name": name} if name else {})
        rag.remember(
            [message, {"role": "assistant", "content": "Two days."}],
            user_id=user,
            thread_id="t1",
            at="2026-11-01T09:00:00Z",
        )
        answer = rag.invoke("Which city do I live in?", cfg(user, "t2")).answer
        assert "(Earlier on 2026-11-01 you said: “I live in Berlin.”)" in answer, (user, answer)
        assert "asthma" not in answer


@pytest.mark.parametrize("kind", ["store", "memory"])
def test_a_replaced_preference_stays_out_when_the_assistant_had_a_name(
    build: Callable[..., Any], kind: str
) -> None:
    """An imported history whose assistant has a name ("Aria: Sure.") is read as the
    user's words and a reply: a preference stated there and replaced by a newer one since
    does not come back beside it."""
    rag = build(kind)
    history = [
        {"role": "user", "content": "I prefer answers in German."},
        {"role": "assistant", "name": "Aria", "content": "Sure."},
    ]
    rag.remember(history, user_id="ann", thread_id="t1", at="2026-01-05T09:00:00Z")
    rag.invoke("Please answer in French from now on.", cfg("ann", "t2"))
    state = rag.invoke("Which language should you answer in?", cfg("ann", "t3"))
    assert "Answer in French." in state.memory_context
    assert "German" not in state.memory_context, state.memory_context


def test_a_conversation_imported_in_two_parts_at_one_time_keeps_its_order(
    build: Callable[..., Any],
) -> None:
    """Two ``remember`` calls for one thread at one time: the second part follows the
    first, so its follow-up is found by what it answers, as when imported whole."""
    questions = {"marcus-q07"}
    (marcus,) = dev_people("marcus")
    split = []
    for session in marcus["sessions"]:
        half = len(session["messages"]) // 2
        for part in (session["messages"][:half], session["messages"][half:]):
            if part:
                split.append({**session, "messages": part})
    assert recall_misses(build("store"), [{**marcus, "sessions": split}], questions) == []
    # the same parts in one remember_many call: they share its write, so their places count on
    rag = build("store")
    rag.remember_many(
        [{"messages": p["messages"], "thread_id": p["thread_id"], "at": p["at"]} for p in split],
        user_id="marcus",
    )
    assert recall_misses(rag, [{**marcus, "sessions": []}], questions) == [], "remember_many"


# -- 4. isolation ---------------------------------------------------------------------------
BOB_SAID = "MySQL 8 on Ubuntu 22.04"
BOB_STATEMENT = f"Our fleet runs {BOB_SAID}. How do backups work?"


def check_isolated(rag: Any, others: list[str], context: str) -> None:
    """Nothing alice said reaches another user: not their prompt, recall or list."""
    assert SAID not in context
    for other in others:
        assert all(SAID not in h["text"] for h in rag.recall(STATEMENT, user_id=other))
        assert all(SAID not in m["text"] for m in rag.list_memories(other))


@pytest.mark.parametrize("kind", SYNC_BACKENDS)
def test_another_user_never_sees_a_conversation_memory(
    build: Callable[..., Any], kind: str
) -> None:
    rag = build(kind)
    rag.invoke(STATEMENT, cfg("alice", "t1"))
    # ids a store might read as a pattern or a prefix of alice's
    others = ["bob", "Alice", "alic", "*", "%", "alice.x", "alice/t1"]
    rag.invoke(BOB_STATEMENT, cfg("bob", "t1"))
    context = rag.invoke(FOLLOW_UP, cfg("bob", "t2")).memory_context
    assert BOB_SAID in context  # bob's own, and only his
    assert SAID not in context
    for other in others[1:]:
        assert SECTION not in rag.invoke(FOLLOW_UP, cfg(other, "t2")).memory_context
    check_isolated(rag, others, "")
    assert SAID in rag.invoke(FOLLOW_UP, cfg("alice", "t2")).memory_context  # still hers


@pytest.mark.parametrize("kind", ["store", "postgres_async", "mem0_async", "memory"])
async def test_concurrent_turns_of_two_users_never_mix(
    abuild: Callable[..., Any], kind: str
) -> None:
    rag = await abuild(kind)
    await asyncio.gather(
        rag.ainvoke(STATEMENT, cfg("alice", "a1")),
        rag.ainvoke(BOB_STATEMENT, cfg("bob", "b1")),
    )
    turns = await asyncio.gather(
        *(
            rag.ainvoke(FOLLOW_UP, cfg(user, f"{user}-{i}"))
            for i in range(2)
            for user in ("alice", "bob")
        )
    )
    for state, user in zip(turns, ["alice", "bob"] * 2, strict=True):
        mine, theirs = (SAID, BOB_SAID) if user == "alice" else (BOB_SAID, SAID)
        assert mine in state.memory_context and theirs not in state.memory_context, user
    alice, bob = await asyncio.gather(rag.alist_memories("alice"), rag.alist_memories("bob"))
    assert all(BOB_SAID not in m["text"] for m in alice) and any(SAID in m["text"] for m in alice)
    assert all(SAID not in m["text"] for m in bob) and any(BOB_SAID in m["text"] for m in bob)
    assert (await rag.adrain_background(10))["failed"] == 0


# -- 5. erasure ---------------------------------------------------------------------------------
S3_SAID = "the S3 bucket ops-backups"
S3_STATEMENT = f"Our backups go to {S3_SAID}. How long are backups kept?"


def check_forget_thread(erased: int, left: list[Any], bobs: list[Any]) -> None:
    assert erased >= 1
    assert left and all(m["thread_id"] != "t1" for m in left)
    assert any(S3_SAID in m["text"] for m in left)  # the other conversation stays
    assert any(m["thread_id"] == "t1" for m in bobs)  # bob's conversation "t1" stays


@pytest.mark.parametrize("kind", SYNC_BACKENDS)
def test_forget_erases_one_conversation_then_all(build: Callable[..., Any], kind: str) -> None:
    rag = build(kind)
    rag.invoke(STATEMENT, cfg("alice", "t1"))
    rag.invoke(S3_STATEMENT, cfg("alice", "t2"))
    rag.invoke(BOB_STATEMENT, cfg("bob", "t1"))
    erased = rag.forget("alice", thread_id="t1")
    check_forget_thread(erased, rag.list_memories("alice"), rag.list_memories("bob"))
    assert all(SAID not in h["text"] for h in rag.recall(STATEMENT, user_id="alice"))
    assert rag.forget("alice", thread_id="t1") == 0
    state = rag.invoke(FOLLOW_UP, cfg("alice", "t3"))
    assert SAID not in state.memory_context
    everything = len(rag.list_memories("alice"))
    assert rag.forget("alice") == everything
    assert rag.list_memories("alice") == []
    assert rag.recall(S3_STATEMENT, user_id="alice") == []
    state = rag.invoke("Where do my backups go?", cfg("alice", "t4"))
    assert S3_SAID not in state.memory_context and SECTION not in state.memory_context
    assert any(BOB_SAID in m["text"] for m in rag.list_memories("bob"))


@pytest.mark.parametrize("kind", ASYNC_BACKENDS)
async def test_aforget_erases_one_conversation_then_all(
    abuild: Callable[..., Any], kind: str
) -> None:
    rag = await abuild(kind)
    await rag.ainvoke(STATEMENT, cfg("alice", "t1"))
    await rag.ainvoke(S3_STATEMENT, cfg("alice", "t2"))
    await rag.ainvoke(BOB_STATEMENT, cfg("bob", "t1"))
    erased = await rag.aforget("alice", thread_id="t1")
    check_forget_thread(erased, await rag.alist_memories("alice"), await rag.alist_memories("bob"))
    assert all(SAID not in h["text"] for h in await rag.arecall(STATEMENT, user_id="alice"))
    state = await rag.ainvoke(FOLLOW_UP, cfg("alice", "t3"))
    assert SAID not in state.memory_context
    await rag.aforget("alice")
    assert await rag.alist_memories("alice") == []
    state = await rag.ainvoke("Where do my backups go?", cfg("alice", "t4"))
    assert SECTION not in state.memory_context


async def test_sync_recall_on_the_loop_of_an_async_store_fails_at_once_saying_await(
    abuild: Callable[..., Any],
) -> None:
    """``rag.recall`` (not ``arecall``) in async code over an ``AsyncPostgresStore`` waited
    10 s for the loop it blocked, then blamed the backend with a TimeoutError; it now fails
    at once, naming the call to make. From a worker thread it still works."""
    rag = await abuild("postgres_async")
    await rag.aremember([{"role": "user", "content": STATEMENT}], user_id="alice", thread_id="t1")
    started = time.monotonic()
    with pytest.raises(ConfigError, match=r"await rag\.arecall\(\.\.\.\)"):
        rag.recall("Which PostgreSQL do I run?", user_id="alice")
    assert time.monotonic() - started < 2
    hits = await asyncio.to_thread(rag.recall, "Which PostgreSQL do I run?", user_id="alice")
    assert any(SAID in h["text"] for h in hits)
    assert [
        h["text"] for h in await rag.arecall("Which PostgreSQL do I run?", user_id="alice")
    ] == [h["text"] for h in hits]
    # every blocking call that reaches the store says the same, at once: a turn too, which
    # waited out the memory timeout and answered without the user's memory
    calls = {
        "invoke": lambda: rag.invoke("How do backups work?", cfg("alice", "t9")),
        "stream": lambda: list(rag.stream("How do backups work?", cfg("alice", "t9"))),
        "chat": lambda: rag.chat("How do backups work?", config=cfg("alice")),
        "list_memories": lambda: rag.list_memories("alice"),
        "remember": lambda: rag.remember([{"role": "user", "content": "Hi."}], user_id="alice"),
        "remember_many": lambda: rag.remember_many(
            [[{"role": "user", "content": "Hi."}]], user_id="alice"
        ),
        "forget": lambda: rag.forget("alice", thread_id="t1"),
    }
    for name, call in calls.items():
        started = time.monotonic()
        with pytest.raises(ConfigError, match=rf"{name}\(\) was called .*await rag\.a{name}\("):
            call()
        assert time.monotonic() - started < 2, name
    assert len(await rag.alist_memories("alice")) == 1  # nothing was written or erased


def test_imports_with_the_same_words_by_two_people_are_two_threads() -> None:
    """Without a ``thread_id`` an import is named after what was said and who said it:
    Sam's "I quit today." and Ann's were one thread, and forgetting Sam's conversation
    erased Ann's too (a hostile pass). The same import given again is still one."""
    rag = make_offline_store_agent()
    (sam,) = rag.remember(
        [{"role": "user", "name": "Sam", "content": "I quit today."}], user_id="u"
    )
    (ann,) = rag.remember(
        [{"role": "user", "name": "Ann", "content": "I quit today."}], user_id="u"
    )
    assert sam["thread_id"] != ann["thread_id"]
    assert (
        rag.remember([{"role": "user", "name": "Ann", "content": "I quit today."}], user_id="u")
        == []
    )
    assert rag.forget("u", thread_id=sam["thread_id"]) == 1
    assert [m["thread_id"] for m in rag.list_memories("u")] == [ann["thread_id"]]


def _two_conversations(rag: Any) -> None:
    for thread, said_there in (("t1", STATEMENT), ("t2", S3_STATEMENT)):
        rag.remember([{"role": "user", "content": said_there}], user_id="alice", thread_id=thread)


@pytest.mark.parametrize("given", [{"thread_id": None}, {"memory_id": None}])
def test_forget_with_none_for_a_thread_or_memory_erases_nothing(given: dict[str, Any]) -> None:
    """``thread_id=None`` (a variable that happened to hold nothing) used to erase every
    memory of the user; it is refused, saying what it would have done and how to do that
    on purpose, and leaving the argument out still erases everything."""
    rag = make_offline_store_agent()
    _two_conversations(rag)
    name = next(iter(given))
    with pytest.raises(ConfigError, match=rf"{name}=None.*everything.*leave {name} out"):
        rag.forget("alice", **given)
    assert len(rag.list_memories("alice")) == 2
    with pytest.raises(ConfigError, match=r"memory_id=None"):
        rag.forget("alice", None)  # memory_id given by place
    assert len(rag.list_memories("alice")) == 2
    assert rag.forget("alice") == 2
    assert rag.list_memories("alice") == []


@pytest.mark.parametrize("given", [{"thread_id": None}, {"memory_id": None}])
async def test_aforget_with_none_for_a_thread_or_memory_erases_nothing(
    given: dict[str, Any],
) -> None:
    rag = make_offline_store_agent()
    _two_conversations(rag)
    name = next(iter(given))
    with pytest.raises(ConfigError, match=rf"{name}=None.*leave {name} out"):
        await rag.aforget("alice", **given)
    assert len(await rag.alist_memories("alice")) == 2
    assert await rag.aforget("alice", thread_id="t1") == 1
    assert await rag.aforget("alice") == 1


@pytest.mark.parametrize("kind", ["store", "memory"])
def test_forgetting_a_conversation_never_erases_a_preference(
    build: Callable[..., Any], kind: str
) -> None:
    model = ScriptedChatModel(replies=[REPLY], grades=[teaching_grade])
    rag = build(kind, model=model)
    rag.invoke("I prefer answers in German.", cfg("alice"))  # a turn without a thread
    rag.invoke(STATEMENT, cfg("alice", "t1"))
    kinds = sorted(m["kind"] for m in rag.list_memories("alice"))
    assert kinds == ["conversation", "conversation", "preference"]
    for blank in ("", "   "):
        with pytest.raises(ConfigError, match="thread_id"):
            rag.forget("alice", thread_id=blank)
    assert rag.forget("alice", thread_id="t1") == 1
    kinds = sorted(m["kind"] for m in rag.list_memories("alice"))
    assert kinds == ["conversation", "preference"]


@pytest.mark.parametrize("kind", ["store", "mem0"])
def test_chat_history_is_not_recalled_again_as_an_earlier_conversation(
    build: Callable[..., Any], kind: str
) -> None:
    """chat(question, history=...) shows the history's turns to the model: they are not
    recalled again as an earlier conversation (they come without message ids, and get new
    ones each call), while what was said in another conversation still is."""
    model = ScriptedChatModel(replies=[REPLY])
    rag = build(kind, model=model)
    rag.invoke(S3_STATEMENT, cfg("alice", "monday"))
    reply = rag.chat(STATEMENT, config=cfg("alice"))
    question = "What did I tell you about my backups and my PostgreSQL cluster?"
    rag.chat(question, history=[("user", STATEMENT), ("assistant", reply)], config=cfg("alice"))
    prompt = model.inputs("answer")[-1]
    assert STATEMENT in prompt_text(prompt)  # the history's turn is shown
    lines = conversation_lines(system_text(prompt))
    assert not any(SAID in line for line in lines), lines
    assert any(S3_SAID in line for line in lines), lines


@pytest.mark.parametrize("kind", ["store", "mem0"])
def test_chat_history_from_another_thread_is_not_recalled_again(
    build: Callable[..., Any], kind: str
) -> None:
    """The exchange was stored in thread t1; given again as ``chat``'s history, under
    another thread or none, the prompt shows it once, as history."""
    model = ScriptedChatModel(replies=[REPLY])
    rag = build(kind, model=model)
    rag.invoke(STATEMENT, cfg("alice", "t1"))
    history = [("user", STATEMENT), ("assistant", REPLY)]
    for config in (cfg("alice", "t9"), cfg("alice")):
        rag.chat(FOLLOW_UP, history=history, config=config)
        prompt = model.inputs("answer")[-1]
        assert STATEMENT in prompt_text(prompt)
        assert not any(SAID in line for line in conversation_lines(system_text(prompt)))


@pytest.mark.parametrize("kind", ["store", "postgres"])
def test_two_processes_over_one_store_see_each_others_writes_and_erasures(
    make_agent: Callable[..., Any], request: pytest.FixtureRequest, kind: str
) -> None:
    """Two agents, each with its own StoreBackend (its own in-process index), as two
    processes of one deployment would be."""
    if kind == "store":
        shared = InMemoryStore()
        stores = [shared, shared]
    else:
        from langgraph.store.postgres import PostgresStore

        url = request.getfixturevalue("pg_schema_url")
        stack = contextlib.ExitStack()
        request.addfinalizer(stack.close)
        stores = [stack.enter_context(PostgresStore.from_conn_string(url)) for _ in range(2)]
        stores[0].setup()
    a, b = (make_agent("conv", memory_store=store) for store in stores)
    a.add_documents(PG_DOCS)
    question = "Which PostgreSQL version does staging run?"
    assert b.recall(question, user_id="alice") == []  # b holds alice's (empty) index now
    a.remember(HISTORY, user_id="alice", thread_id="ops", at=AT)
    hits = b.recall(question, user_id="alice")
    assert (
        hits
        and "PostgreSQL 13" in hits[0]["text"]
        and hits[0]["sources"]
        == [
            HISTORY[0]["metadata"],
            HISTORY[1]["metadata"],
        ]
    )
    b.remember([{"role": "user", "content": "Staging moved to Debian 12."}], user_id="alice")
    assert any(
        "Debian 12" in h["text"]
        for h in a.recall("Which Debian does staging run?", user_id="alice")
    )
    assert a.forget("alice", thread_id="ops") == 2
    assert all("PostgreSQL 13" not in h["text"] for h in b.recall(question, user_id="alice"))
    assert b.forget("alice") == 1
    assert a.recall("Which Debian does staging run?", user_id="alice") == []


# -- 6. secrets -----------------------------------------------------------------------------------
API_KEY = "sk-proj-Q7x9LmN2pR4tV6wY8zA1bC3dE5fG7hJ9kL0"
PASSWORD = "hunter22"
LEAKY = f"my API key is {API_KEY} and the password: {PASSWORD}. Why does pg_dump fail?"
#: No part of them may be kept: a title cut from the question cuts the key too.
SECRET_BITS = (API_KEY[:12], API_KEY[-12:], PASSWORD)


def leaked(text: str) -> list[str]:
    return [bit for bit in SECRET_BITS if bit in text]


def files_holding(root: Path, *secrets: str) -> list[str]:
    """Every file under ``root`` whose bytes hold one of ``secrets``."""
    found = []
    for path in root.rglob("*"):
        if path.is_file():
            data = path.read_bytes()
            if any(s.encode() in data for s in secrets):
                found.append(str(path.relative_to(root)))
    return found


def store_items(store: Any) -> str:
    """Everything a LangGraph store holds, as one JSON text."""
    items = [
        it.value
        for ns in store.list_namespaces(limit=1000)
        for it in store.search(ns, limit=10_000)
    ]
    return json.dumps(items)


@pytest.mark.parametrize("kind", ["store", "postgres", "mem0", "memory"])
def test_secrets_never_reach_memory_or_a_later_prompt(
    build: Callable[..., Any], memory_of: Callable[..., Any], tmp_path: Path, kind: str
) -> None:

    def reply(messages: list[Any]) -> str:
        prompt = prompt_text(messages)
        if "Memory Extractor" in prompt:  # mem0's own extraction call (memory=True)
            return '{"memory": []}'
        if LEAKY in prompt:  # the model repeats the key in its reply, as models do
            return f"The key {API_KEY} is not the problem; check pg_hba.conf [1]."
        return "Run pg_upgrade [2]."

    model = ScriptedChatModel(replies=[reply])
    backend = memory_of(kind)
    rag = build(kind, model=model, **backend)
    state = rag.invoke(LEAKY, cfg("sec", "t1"))
    assert state.events("write_memory")[0]["conversation"]["secrets_masked"] >= 2
    rag.invoke(FOLLOW_UP, cfg("sec", "t2"))
    rag.drain_background(10)
    listed = json.dumps(rag.list_memories("sec"))
    assert "pg_dump" in listed  # the question is kept, without what it pasted
    assert leaked(listed) == []
    (later,) = [prompt_text(p) for p in model.inputs("answer") if FOLLOW_UP in prompt_text(p)]
    assert "pg_dump" in later and leaked(later) == []
    # only turn 1's own answer and grade saw them: not the calls that draw facts about the
    # user from it (the agent's, or mem0's with memory=True)
    seen = [c for c in model.calls if leaked(prompt_text(c.messages))]
    assert [(c.kind, LEAKY in prompt_text(c.messages)) for c in seen] == [
        ("answer", True),
        ("grade", True),
    ]
    recalled = json.dumps(rag.recall("Why does pg_dump fail?", user_id="sec"))
    assert "pg_dump" in recalled and leaked(recalled) == []
    if "memory_store" in backend:
        raw = store_items(backend["memory_store"])
        assert "pg_dump" in raw and leaked(raw) == []
    else:
        memory = rag.memory.memory
        raw = json.dumps(memory.get_all(filters={"user_id": "sec"}, top_k=1000), default=str)
        assert "pg_dump" in raw and leaked(raw) == []
        # nor mem0's files on disk (its vectors' payloads, its history database)
        assert files_holding(tmp_path, *SECRET_BITS) == []


# -- 7. turned off ----------------------------------------------------------------------------------
@pytest.mark.parametrize("how", ["env", "argument"])
@pytest.mark.parametrize("kind", ["store", "memory"])
def test_conversation_memory_turned_off_stores_and_recalls_nothing(
    build: Callable[..., Any],
    memory_of: Callable[..., Any],
    monkeypatch: pytest.MonkeyPatch,
    how: str,
    kind: str,
) -> None:
    backend = memory_of(kind)
    on = build(kind, **backend)
    on.remember(HISTORY, user_id="alice", thread_id="before", at=AT)  # said while it was on
    if how == "env":
        monkeypatch.setenv("RAG_MEMORY_CONVERSATIONS", "false")
        off = build(kind, **backend)
    else:
        off = build(kind, memory_conversations=False, **backend)
    before = len(off.list_memories("alice"))
    off.invoke(STATEMENT, cfg("alice", "t1"))
    state = off.invoke("Which PostgreSQL version does staging run?", cfg("alice", "t2"))
    assert SECTION not in state.memory_context
    assert state.events("write_memory")[0]["conversation"] == {"skipped": "off"}
    assert len(off.list_memories("alice")) == before  # nothing new stored
    assert all(m["thread_id"] == "before" for m in off.list_memories("alice"))
    assert off.recall("Which PostgreSQL version does staging run?", user_id="alice") == []
    with pytest.raises(ConfigError, match="conversation memory is off"):
        off.remember(HISTORY, user_id="alice")
    # what was stored before stays, for an agent that has it on (and forget still erases it)
    assert off.forget("alice") == before


# -- 8. the same thread -----------------------------------------------------------------------------
@pytest.mark.parametrize("kind", ["store", "mem0"])
def test_a_turn_of_the_same_thread_is_not_recalled_as_a_memory(
    build: Callable[..., Any], kind: str
) -> None:
    rag = build(kind, checkpointer=MemorySaver())
    rag.invoke(STATEMENT, cfg("alice", "t1"))
    same = rag.invoke(FOLLOW_UP, cfg("alice", "t1"))
    assert SAID not in same.memory_context  # the thread's history has it already
    assert len(rag.get_history("t1")) == 4
    other = rag.invoke(FOLLOW_UP, cfg("alice", "t2"))
    assert SAID in other.memory_context


async def test_a_turn_of_the_same_thread_is_not_recalled_under_ainvoke(
    build: Callable[..., Any],
) -> None:
    rag = build("mem0_async", checkpointer=MemorySaver())
    await rag.ainvoke(STATEMENT, cfg("alice", "t1"))
    assert SAID not in (await rag.ainvoke(FOLLOW_UP, cfg("alice", "t1"))).memory_context
    assert SAID in (await rag.ainvoke(FOLLOW_UP, cfg("alice", "t2"))).memory_context


def test_a_turn_the_thread_no_longer_holds_is_recalled_again(build: Callable[..., Any]) -> None:
    """Once the thread's history has dropped a turn (FIFO trimming), memory brings it back."""
    rag = build("store", checkpointer=MemorySaver(), max_thread_messages=2)
    rag.invoke(STATEMENT, cfg("alice", "t1"))
    rag.invoke("How do I watch replication lag?", cfg("alice", "t1"))
    assert all(SAID not in str(m.content) for m in rag.get_history("t1"))
    assert SAID in rag.invoke(FOLLOW_UP, cfg("alice", "t1")).memory_context


def test_a_turn_the_prompt_history_no_longer_shows_is_recalled_in_its_own_thread(
    build: Callable[..., Any],
) -> None:
    """A long thread keeps every turn, but the answer prompt shows only what fits
    ``history_tokens``: a turn trimmed from it is recalled like any earlier conversation."""
    rag = build("store", checkpointer=MemorySaver(), history_tokens=100)
    rag.invoke(STATEMENT, cfg("alice", "long"))
    for question in ("How do I watch replication lag?", "What does VACUUM FULL lock?") * 2:
        rag.invoke(question, cfg("alice", "long"))
    assert any(SAID in str(m.content) for m in rag.get_history("long"))  # the thread holds it
    assert SAID in rag.invoke(FOLLOW_UP, cfg("alice", "long")).memory_context
    roomy = build("store", checkpointer=MemorySaver())  # the whole thread fits its prompt
    roomy.invoke(STATEMENT, cfg("alice", "long"))
    roomy.invoke("How do I watch replication lag?", cfg("alice", "long"))
    assert SAID not in roomy.invoke(FOLLOW_UP, cfg("alice", "long")).memory_context


# -- 9. failures ----------------------------------------------------------------------------------
@pytest.mark.parametrize("fault", ["add", "search"])
def test_a_failing_store_never_fails_the_answer(build: Callable[..., Any], fault: str) -> None:
    plan = FaultPlan(seed=1)
    plan.forced = {"add": "ok", "search": "ok", fault: "raise"}
    rag = build("store", memory_store=FaultyStore(plan))
    first = rag.invoke(STATEMENT, cfg("alice", "t1"))
    second = rag.invoke(FOLLOW_UP, cfg("alice", "t2"))
    assert "pg_dump" in first.answer and "pg_upgrade" in second.answer
    report = rag.drain_background(10)
    if fault == "add":
        assert report["failed"] >= 2 and report["pending"] == 0 and rag.background.errors
        assert SECTION not in second.memory_context
    else:
        assert second.events("read_memory")[0]["skipped"] == "error"
        assert report["landed"] >= 2


async def test_a_failing_mem0_never_fails_an_async_answer(
    build: Callable[..., Any], tmp_path: Path, minilm: Any
) -> None:
    from mem0 import AsyncMemory

    plan = FaultPlan(seed=2)
    plan.forced = {"add": "raise", "search": "raise"}
    real = AsyncMemory.from_config(mem0_config(tmp_path / "faulty", minilm))
    rag = build(mem0_memory=Mem0Backend(FaultyAsyncMem0(real, plan), infer=False))
    first = await rag.ainvoke(STATEMENT, cfg("alice", "t1"))
    assert "pg_dump" in first.answer
    assert first.events("read_memory")[0]["skipped"] == "error"
    report = await rag.adrain_background(10)
    assert report["failed"] >= 1 and report["pending"] == 0


async def test_an_ainvoke_cancelled_halfway_loses_no_write_silently(
    build: Callable[..., Any],
) -> None:
    """Ctrl-C while the model answers: nothing half-done is stored, nothing is left
    pending; the turns before and after are kept."""
    release = threading.Event()

    def slow(messages: list[Any]) -> str:
        release.wait(5)
        return REPLY

    model = ScriptedChatModel(replies=["Use pg_dump [1].", slow, "Run pg_upgrade [2]."])
    rag = build("mem0_async", model=model)
    await rag.ainvoke(STATEMENT, cfg("alice", "t1"))
    turn = asyncio.create_task(rag.ainvoke("How do I restore a backup?", cfg("alice", "t2")))
    while not model.inputs("answer")[1:]:
        await asyncio.sleep(0.01)
    turn.cancel()
    release.set()
    with pytest.raises(asyncio.CancelledError):
        await turn
    await rag.ainvoke(FOLLOW_UP, cfg("alice", "t3"))
    report = await rag.adrain_background(10)
    assert report["pending"] == 0 and report["failed"] == 0
    threads = {m["thread_id"] for m in said(await rag.alist_memories("alice"))}
    assert threads == {"t1", "t3"}


def test_a_write_still_running_when_asyncio_run_ends_is_not_lost(
    build: Callable[..., Any], tmp_path: Path, minilm: Any
) -> None:
    """A script's ``asyncio.run(rag.ainvoke(...))`` ends (the loop cancels its tasks) while
    the exchange is still being written: the write ends anyway, and drain counts it."""
    from mem0 import AsyncMemory

    plan = FaultPlan(seed=3, slow=0.5)
    plan.forced = {"add": "slow", "search": "ok"}
    real = AsyncMemory.from_config(mem0_config(tmp_path / "slow", minilm))
    rag = build(mem0_memory=Mem0Backend(FaultyAsyncMem0(real, plan), infer=False))
    asyncio.run(rag.ainvoke(STATEMENT, cfg("alice", "t1")))
    report = rag.drain_background(10)
    assert report == {"landed": 1, "failed": 0, "pending": 0}
    assert [m["thread_id"] for m in said(rag.list_memories("alice"))] == ["t1"]


# -- 10. facts about the user, with a model ---------------------------------------------------
UPGRADE = "We upgraded the cluster to PostgreSQL 15 last night. What should I check now?"


def fact(subject: str, text: str, *turns: int) -> dict[str, Any]:
    return {"facts": [{"subject": subject, "fact": text, "turns": list(turns)}]}


def facts_model(*texts: str) -> ScriptedChatModel:
    """A model that draws these facts on the subject ``database``, one per turn, in order."""
    return ScriptedChatModel(replies=[REPLY], facts=[fact("database", t, 0) for t in texts])


def upgrading_model(then: str | None = None) -> ScriptedChatModel:
    """A model that draws "Runs PostgreSQL 13 on Debian 11." from the user's first turn and
    "Runs PostgreSQL 15." (same subject: it replaces the first) from the next, and ``then``
    from the third."""
    return facts_model(
        "Runs PostgreSQL 13 on Debian 11.", "Runs PostgreSQL 15.", *([then] if then else [])
    )


def facts_of(memories: list[Any]) -> list[Any]:
    return [m for m in said(memories) if m["form"] == "fact"]


def test_what_another_person_says_in_a_shared_chat_is_no_fact_about_the_user(
    build: Callable[..., Any],
) -> None:
    """In an imported group chat, Sam's "I live in Oslo" is Sam's: the model is asked about
    the user's own lines only (unnamed, or named as the user), so a fact drawn from Sam's
    words is never stored as the user's and never answers "Where do I live?"."""
    model = ScriptedChatModel(facts=[fact("home city", "Lives in Oslo.", 0)])
    rag = build("store", model=model)
    rag.remember(
        [
            {"role": "user", "content": "Morning all, what's the plan for the offsite?"},
            {"role": "user", "name": "Sam", "content": "I live in Oslo so I'll fly in."},
            {"role": "assistant", "content": "Noted."},
            {"role": "user", "name": "alice", "content": "I'm driving up from Bergen."},
        ],
        user_id="alice",
        thread_id="grp",
        at=AT,
    )
    (asked,) = model.inputs("memory")
    shown = "\n".join(str(m.content) for m in asked)
    assert "I'm driving up from Bergen." in shown
    assert "I live in Oslo" not in shown
    assert not [m for m in facts_of(rag.list_memories("alice")) if "Oslo" in m["text"]]


@pytest.mark.parametrize("kind", ["store", "postgres"])
def test_a_stated_fact_is_kept_linked_to_its_turn_and_a_newer_one_replaces_it(
    build: Callable[..., Any], kind: str
) -> None:
    model = upgrading_model()
    rag = build(kind, model=model, checkpointer=MemorySaver())
    rag.invoke(STATEMENT, cfg("alice", "t1"))
    rag.drain_background(10)
    (first,) = facts_of(rag.list_memories("alice"))
    assert first["text"] == "Runs PostgreSQL 13 on Debian 11." and first["key"] == "database"
    # linked to the turn it came from: the user's message of thread t1
    question_id = rag.get_history("t1")[0].id
    assert first["sources"] == [{"message_id": question_id, "role": "user"}]
    assert first["thread_id"] == "t1" and first["history"] == []
    # recalled as a fact about the user in a later conversation
    hits = rag.recall("Which PostgreSQL version does my cluster run?", user_id="alice")
    assert "Runs PostgreSQL 13 on Debian 11." in [h["text"] for h in hits]
    rag.invoke(UPGRADE, cfg("alice", "t2"))
    rag.drain_background(10)
    (newer,) = facts_of(rag.list_memories("alice"))
    assert newer["text"] == "Runs PostgreSQL 15." and newer["thread_id"] == "t2"
    (older,) = newer["history"]
    assert older["text"] == "Runs PostgreSQL 13 on Debian 11." and older["thread_id"] == "t1"
    # the extractor was told the subject it already knows, to reuse it
    assert "Known subjects: database" in prompt_text(model.inputs("memory")[1])
    state = rag.invoke("Which PostgreSQL version does my cluster run?", cfg("alice", "t3"))
    lines = conversation_lines(state.memory_context)
    assert any(line.endswith("] Runs PostgreSQL 15.") for line in lines), lines
    # the replaced fact is not recalled (what was said in t1 still may be, dated)
    assert all(not line.endswith("] Runs PostgreSQL 13 on Debian 11.") for line in lines)


@pytest.mark.parametrize("kind", ["store", "postgres"])
def test_a_fact_is_found_by_the_thing_it_is_about_when_the_question_names_only_that(
    build: Callable[..., Any], kind: str
) -> None:
    """ "How should I upgrade my database?" shares no word with "Runs PostgreSQL 13 on
    Debian 11." (0.16 similar to the packaged embedder): the subject the model gave the
    fact, "database", is what finds it, and the next answer's prompt carries it. A question
    about something else does not bring it."""
    model = ScriptedChatModel(
        replies=["Backups are taken with pg_basebackup."],
        facts=[fact("database", "Runs PostgreSQL 13 on Debian 11.", 0)],
    )
    rag = build(kind, model=model)
    rag.invoke(
        "My cluster runs PostgreSQL 13 on Debian 11. How do backups work?", cfg("alice", "t1")
    )
    rag.drain_background(10)
    for question in ("How should I upgrade my database?", "Can I move my database to new disks?"):
        texts = [h.text for h in rag.recall(question, user_id="alice")]
        assert "Runs PostgreSQL 13 on Debian 11." in texts, (question, texts)
    state = rag.invoke("How should I upgrade my database?", cfg("alice", "t2"))
    lines = conversation_lines(state.memory_context)
    assert any(line.endswith("] Runs PostgreSQL 13 on Debian 11.") for line in lines), lines
    assert "Runs PostgreSQL 13" not in json.dumps(
        rag.recall("Which bike should I buy for commuting?", user_id="alice")
    )


def stored_text(store: Any) -> str:
    """Everything a LangGraph store holds, as one text."""
    return json.dumps(
        [it.value for ns in store.list_namespaces() for it in store.search(ns, limit=100_000)]
    )


@pytest.mark.parametrize("kind", ["store", "postgres"])
def test_forgetting_a_conversation_erases_its_fact_from_the_newer_ones_history(
    build: Callable[..., Any], memory_of: Callable[..., Any], kind: str
) -> None:
    """A fact from t1 replaced by one from t2 lives on in the newer fact's history: forgetting
    t1 erases it there too, and forgetting the user leaves nothing in the store."""
    model = upgrading_model()
    backend = memory_of(kind)
    rag = build(model=model, **backend)
    rag.invoke(STATEMENT, cfg("alice", "t1"))
    rag.invoke(UPGRADE, cfg("alice", "t2"))
    rag.drain_background(10)
    (newer,) = facts_of(rag.list_memories("alice"))
    assert [older["thread_id"] for older in newer["history"]] == ["t1"]
    rag.forget("alice", thread_id="t1")
    listed = rag.list_memories("alice")
    assert "Debian 11" not in json.dumps(listed), listed
    (newer,) = facts_of(listed)
    assert newer["text"] == "Runs PostgreSQL 15." and newer["history"] == []
    assert "Debian 11" not in stored_text(backend["memory_store"])
    state = rag.invoke("Which PostgreSQL version does my cluster run?", cfg("alice", "t3"))
    assert "Debian 11" not in state.memory_context
    rag.forget("alice")
    assert rag.list_memories("alice") == []
    assert "PostgreSQL" not in stored_text(backend["memory_store"])


@pytest.mark.parametrize("kind", ["store", "postgres"])
def test_forgetting_where_a_newer_fact_was_said_brings_back_the_one_it_replaced(
    build: Callable[..., Any], kind: str
) -> None:
    """The fact "Runs PostgreSQL 15." (t2) replaced "Runs PostgreSQL 13 ..." (t1): erasing t2
    must not take t1's fact with it. (With mem0, mem0 draws and replaces its own facts.)"""
    model = upgrading_model()
    rag = build(kind, model=model, checkpointer=MemorySaver())
    rag.invoke(STATEMENT, cfg("alice", "t1"))
    rag.invoke(UPGRADE, cfg("alice", "t2"))
    rag.drain_background(10)
    assert [f["text"] for f in facts_of(rag.list_memories("alice"))] == ["Runs PostgreSQL 15."]
    rag.forget("alice", thread_id="t2")
    listed = rag.list_memories("alice")
    assert "PostgreSQL 15" not in json.dumps(listed), listed
    (back,) = facts_of(listed)
    assert back["text"] == "Runs PostgreSQL 13 on Debian 11." and back["thread_id"] == "t1"
    assert back["sources"] == [{"message_id": rag.get_history("t1")[0].id, "role": "user"}]
    assert back["history"] == []
    state = rag.invoke("Which PostgreSQL version does my cluster run?", cfg("alice", "t3"))
    lines = conversation_lines(state.memory_context)
    assert any(line.endswith("] Runs PostgreSQL 13 on Debian 11.") for line in lines), lines
    # put back whole: in t1, whose history shows the message it came from, it is not
    # recalled again (as before t2)
    state = rag.invoke("Which PostgreSQL version does my cluster run?", cfg("alice", "t1"))
    assert "Runs PostgreSQL 13 on Debian 11." not in state.memory_context
    rag.forget("alice", thread_id="t1")  # and it goes with its own conversation
    assert facts_of(rag.list_memories("alice")) == []


class _DownEmbeddings(Embeddings):
    """The agent's embedder, failing while ``down``: a remote embedding service gone away."""

    def __init__(self, inner: Embeddings) -> None:
        self.inner, self.down = inner, False

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        if self.down:
            raise ConnectionError("injected: the embedding service is unreachable")
        return self.inner.embed_documents(texts)

    def embed_query(self, text: str) -> list[float]:
        return self.embed_documents([text])[0]


class _WriteFails(InMemoryStore):
    """A store whose writes of ``text`` fail while ``down``."""

    def __init__(self, text: str) -> None:
        super().__init__()
        self.text, self.down = text, False

    def batch(self, ops: Any) -> list[Any]:
        ops = list(ops)
        if self.down and any(
            isinstance(op, PutOp) and op.value and op.value.get("text") == self.text for op in ops
        ):
            raise ConnectionResetError(104, "injected: connection reset by peer")
        return super().batch(ops)


@pytest.mark.parametrize(
    ("kind", "failing"), [("store", "embedder"), ("postgres", "embedder"), ("store", "store")]
)
def test_a_forget_that_fails_halfway_loses_no_fact_it_would_bring_back(
    build: Callable[..., Any], minilm: Any, kind: str, failing: str
) -> None:
    """Forgetting t2 erases its fact and brings back t1's, which lives only in that fact's
    history until then. When the embedder or the store fails on the way, the forget fails,
    and t1's fact must still be there (retried, the forget then completes)."""
    older = "Runs PostgreSQL 13 on Debian 11."
    embeddings = _DownEmbeddings(minilm)
    store = _WriteFails(older)
    backend: dict[str, Any] = {"memory_store": store} if failing == "store" else {}
    rag = build(
        kind, model=upgrading_model(), checkpointer=MemorySaver(), embeddings=embeddings, **backend
    )
    rag.invoke(STATEMENT, cfg("alice", "t1"))
    rag.invoke(UPGRADE, cfg("alice", "t2"))
    rag.drain_background(10)
    embeddings.down = store.down = True
    with pytest.raises((ConnectionError, OSError)):
        rag.forget("alice", thread_id="t2")
    embeddings.down = store.down = False
    assert older in json.dumps(rag.list_memories("alice"))
    rag.forget("alice", thread_id="t2")
    listed = rag.list_memories("alice")
    assert "PostgreSQL 15" not in json.dumps(listed), listed
    (back,) = facts_of(listed)
    assert back["text"] == older and back["thread_id"] == "t1"
    state = rag.invoke("Which PostgreSQL version does my cluster run?", cfg("alice", "t3"))
    assert any(line.endswith(f"] {older}") for line in conversation_lines(state.memory_context))


class _PartWrites(InMemoryStore):
    """A store that, once ``breaking``, applies all but the last op of its next write and
    then fails, as a store without transactions can."""

    breaking = False

    def batch(self, ops: Any) -> list[Any]:
        ops = list(ops)
        if self.breaking and any(isinstance(op, PutOp) for op in ops):
            self.breaking = False
            super().batch(ops[:-1])
            raise ConnectionResetError(104, "connection reset by peer")
        return super().batch(ops)

    async def abatch(self, ops: Any) -> list[Any]:
        return self.batch(ops)


@pytest.mark.parametrize("sync", [True, False])
def test_after_a_forget_that_failed_part_way_recall_shows_what_the_store_holds(
    make_agent: Callable[..., Any], sync: bool
) -> None:
    """A forget whose write fails after erasing some of the user's memories: what the store
    no longer holds is recalled nowhere (before, this process's index kept it until the
    next successful erasure), and what it still holds is still there to forget again."""
    store = _PartWrites()
    rag = make_agent("partly", memory_store=store)
    rag.remember(
        [{"role": "user", "content": "The build server is on rack B4."}], user_id="u", thread_id="a"
    )
    rag.remember(
        [{"role": "user", "content": "The database server is on rack C7."}],
        user_id="u",
        thread_id="b",
    )
    question = "Which rack is the server on?"
    assert len(rag.recall(question, user_id="u")) == 2  # this process has the user loaded
    store.breaking = True
    with pytest.raises(ConnectionResetError):
        rag.forget("u") if sync else asyncio.run(rag.aforget("u"))
    held = sorted(m["text"] for m in rag.list_memories("u"))
    assert len(held) < 2  # the store erased some
    assert sorted(h["text"] for h in rag.recall(question, user_id="u")) == held
    state = rag.invoke(question, cfg("u", "z"))
    assert [line.split("] ", 1)[1] for line in conversation_lines(state.memory_context)] == held
    rag.drain_background(10)
    assert rag.forget("u") == len(held) + 1  # and the turn just asked
    assert rag.recall(question, user_id="u") == rag.list_memories("u") == []


class _SlowFactStore(InMemoryStore):
    """A store whose write of a fact takes over a second, long enough for a ``forget`` that
    stops waiting for it (``memory_timeout``) to run meanwhile: before the fact lands, or
    (``late``) after it landed, before the write returns."""

    def __init__(self, slow_text: str, *, late: bool = False) -> None:
        super().__init__()
        self.slow_text, self.late = slow_text, late
        self.writing, self.written = threading.Event(), threading.Event()

    def batch(self, ops: Any) -> list[Any]:
        ops = list(ops)
        slow = any(
            isinstance(op, PutOp) and op.value and op.value.get("text") == self.slow_text
            for op in ops
        )
        if slow and not self.late:
            self.writing.set()
            time.sleep(1.0)
        try:
            return super().batch(ops)
        finally:
            if slow and self.late:
                self.writing.set()
                time.sleep(1.5)
            if slow:
                self.written.set()

    def settle(self, done: Callable[[], bool]) -> None:
        """Wait for the slow write to return and what follows it until ``done()`` (5 s)."""
        assert self.written.wait(10)
        deadline = time.monotonic() + 5
        while not done() and time.monotonic() < deadline:
            time.sleep(0.05)
        time.sleep(0.2)  # and nothing more comes after it


def _upgrade_on_its_way(build: Callable[..., Any], store: _SlowFactStore, model: Any = None) -> Any:
    """An agent over ``store`` whose user stated their database in t1 and whose fact from
    the upgrade told in t2 is being stored (slowly: a ``forget`` stops waiting for it)."""
    rag = build(model=model or upgrading_model(), memory_store=store, memory_timeout=0.2)
    rag.invoke(STATEMENT, cfg("alice", "t1"))
    rag.drain_background(10)
    rag.invoke(UPGRADE, cfg("alice", "t2"))
    assert store.writing.wait(10)
    return rag


def test_a_fact_taken_back_after_a_forget_brings_back_the_one_it_replaced(
    build: Callable[..., Any],
) -> None:
    """The forget of t2 runs while t2's fact is being stored: the fact is taken back once
    stored, and t1's fact, which it replaced, is not lost with it."""
    store = _SlowFactStore("Runs PostgreSQL 15.")
    rag = _upgrade_on_its_way(build, store)
    rag.forget("alice", thread_id="t2")  # stops waiting after 0.2 s: the write is still on
    # the write outlives its timeout (a thread cannot be stopped) and lands after the forget
    store.settle(
        lambda: (
            [f["text"] for f in facts_of(rag.list_memories("alice"))]
            == ["Runs PostgreSQL 13 on Debian 11."]
        )
    )
    listed = rag.list_memories("alice")
    assert "PostgreSQL 15" not in json.dumps(listed), listed
    (back,) = facts_of(listed)
    assert back["text"] == "Runs PostgreSQL 13 on Debian 11." and back["thread_id"] == "t1"
    assert "PostgreSQL 15" not in stored_text(store)


def test_a_fact_taken_back_brings_back_nothing_of_a_conversation_also_forgotten(
    build: Callable[..., Any],
) -> None:
    store = _SlowFactStore("Runs PostgreSQL 15.")
    rag = _upgrade_on_its_way(build, store)
    rag.forget("alice", thread_id="t2")
    rag.forget("alice", thread_id="t1")  # both while t2's fact is on its way
    store.settle(lambda: "PostgreSQL 15" not in stored_text(store))
    assert rag.list_memories("alice") == []
    assert "PostgreSQL" not in stored_text(store)


def test_a_conversation_forgotten_while_a_newer_fact_is_stored_leaves_nothing_in_it(
    build: Callable[..., Any],
) -> None:
    """t2's fact read t1's (which it replaces) before t1 was forgotten, and lands after:
    t1's words must not live on in its history, nor come back when t2 is forgotten."""
    store = _SlowFactStore("Runs PostgreSQL 15.")
    rag = _upgrade_on_its_way(build, store)
    rag.forget("alice", thread_id="t1")
    store.settle(lambda: "Debian 11" not in stored_text(store))
    (current,) = facts_of(rag.list_memories("alice"))
    assert current["text"] == "Runs PostgreSQL 15." and current["history"] == []
    assert "Debian 11" not in stored_text(store)
    rag.forget("alice", thread_id="t2")
    assert rag.list_memories("alice") == []


class _HeldRewrite(InMemoryStore):
    """A store on which the thread ``held_thread`` stops before rewriting a history (its
    batch of ``GetOp`` only, conversation memories among them) until ``go`` is set."""

    def __init__(self, held_thread: str) -> None:
        super().__init__()
        self.held_thread, self.go, self.holding = held_thread, threading.Event(), threading.Event()

    def batch(self, ops: Any) -> list[Any]:
        ops = list(ops)
        if (
            threading.current_thread().name == self.held_thread
            and ops
            and all(isinstance(op, GetOp) for op in ops)
            and any(op.namespace[0] == "conversations" for op in ops)
        ):
            self.holding.set()
            self.go.wait(10)
        return super().batch(ops)


def test_two_forgets_of_one_user_at_once_leave_nothing_of_either_conversation(
    build: Callable[..., Any],
) -> None:
    """The user erases t1 and t2 at once (two requests). t2's fact replaced t1's: the forget
    of t2 puts t1's fact back while the forget of t1, which read the memories before, is
    rewriting t2's fact's history. Whatever the order, nothing of t1 or t2 may remain."""
    store = _HeldRewrite("forget-t1")
    rag = build(model=upgrading_model(), memory_store=store, checkpointer=MemorySaver())
    rag.invoke(STATEMENT, cfg("alice", "t1"))
    rag.invoke(UPGRADE, cfg("alice", "t2"))
    rag.drain_background(10)
    first = threading.Thread(target=rag.forget, args=("alice",), kwargs={"thread_id": "t1"})
    first.name = "forget-t1"
    first.start()
    assert store.holding.wait(10)  # t1's forget has read, and is about to rewrite
    threading.Timer(1.0, store.go.set).start()  # let it go on, if t2's forget waits for it
    rag.forget("alice", thread_id="t2")
    store.go.set()
    first.join(10)
    assert not first.is_alive()
    assert facts_of(rag.list_memories("alice")) == []
    assert "Debian 11" not in stored_text(store) and "PostgreSQL 15" not in stored_text(store)


async def test_a_forget_cancelled_while_it_waits_for_another_leaves_the_user_free() -> None:
    """An ``aforget`` waiting for another forget of the same user is cancelled (a request
    dropped): it must not keep the user locked, nor block the event loop while it waits."""
    locks = UserLocks()
    ticks = 0

    async def forget() -> None:
        async with locks.aheld("alice"):
            pass

    async def tick() -> None:
        nonlocal ticks
        while True:
            ticks += 1
            await asyncio.sleep(0.01)

    ticker = asyncio.create_task(tick())
    with locks.held("alice"):  # another forget of alice is running
        waiting = asyncio.create_task(forget())
        await asyncio.sleep(0.2)
        assert not waiting.done() and ticks >= 5  # it waits; the loop runs on
        waiting.cancel()
        with pytest.raises(asyncio.CancelledError):
            await waiting
    await asyncio.wait_for(forget(), 1)  # free again, for async and sync callers alike
    with locks.held("alice"):
        pass
    ticker.cancel()


async def test_a_blocking_forget_inside_async_code_is_not_stuck_behind_its_own_loop(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A coroutine of this loop holds the user (a write under way) and the loop's own thread
    then makes a blocking call on the same user (``forget`` rather than ``aforget`` in async
    code): waiting could never end, so it goes on after a short wait and says so."""
    locks = UserLocks()
    entered, release = asyncio.Event(), asyncio.Event()

    async def write() -> None:
        async with locks.aheld("alice", "a memory write"):
            entered.set()
            await release.wait()

    writing = asyncio.create_task(write())
    await entered.wait()
    started = time.monotonic()
    with caplog.at_level(logging.WARNING, "retrievalagent.memory"), locks.held("alice"):
        pass
    assert time.monotonic() - started < 10
    assert "without waiting" in caplog.text
    release.set()
    await writing


def _said(text: str) -> list[dict[str, str]]:
    return [{"role": "user", "content": text}]


def test_two_imports_of_one_user_at_once_keep_both_facts(build: Callable[..., Any]) -> None:
    """January's import is writing its fact while February's, on the same subject, starts:
    February's must find January's and keep it in its history, not write past it."""
    store = _SlowFactStore("Runs PostgreSQL 13 on Debian 11.")
    rag = build(model=upgrading_model(), memory_store=store)
    january = threading.Thread(
        target=rag.remember,
        args=(_said(STATEMENT),),
        kwargs={"user_id": "alice", "thread_id": "jan", "at": "2026-01-05T09:00:00Z"},
    )
    january.start()
    assert store.writing.wait(10)  # its fact is being written
    rag.remember(_said(UPGRADE), user_id="alice", thread_id="feb", at="2026-02-05T09:00:00Z")
    january.join(10)
    (current,) = facts_of(rag.list_memories("alice"))
    assert current["text"] == "Runs PostgreSQL 15." and current["thread_id"] == "feb"
    assert [(h["text"], h["thread_id"]) for h in current["history"]] == [
        ("Runs PostgreSQL 13 on Debian 11.", "jan")
    ]


def test_an_older_conversation_imported_later_does_not_replace_the_newer_fact(
    build: Callable[..., Any],
) -> None:
    """A history imported out of order (February's chat, then January's): the newer fact
    stays current, the older one goes into its history, and comes back if February's
    conversation is forgotten."""
    model = facts_model("Runs PostgreSQL 15.", "Runs PostgreSQL 13 on Debian 11.")
    rag = build(model=model)
    rag.remember(_said(UPGRADE), user_id="alice", thread_id="feb", at="2026-02-05T09:00:00Z")
    rag.remember(_said(STATEMENT), user_id="alice", thread_id="jan", at="2026-01-05T09:00:00Z")
    (current,) = facts_of(rag.list_memories("alice"))
    assert current["text"] == "Runs PostgreSQL 15." and current["thread_id"] == "feb"
    assert [h["thread_id"] for h in current["history"]] == ["jan"]
    hits = rag.recall("Which PostgreSQL version does my cluster run now?", user_id="alice")
    texts = [h["text"] for h in hits]
    assert "Runs PostgreSQL 15." in texts and "Runs PostgreSQL 13 on Debian 11." not in texts
    rag.forget("alice", thread_id="feb")
    (back,) = facts_of(rag.list_memories("alice"))
    assert back["text"] == "Runs PostgreSQL 13 on Debian 11." and back["thread_id"] == "jan"


def test_a_conversation_forgotten_while_another_is_imported_leaves_nothing_of_it(
    build: Callable[..., Any],
) -> None:
    """March's import read February's fact (which it replaces) and is writing when
    February's conversation is forgotten: February's words must not live on in March's
    fact's history, and March's fact must not be lost to the put-back of January's."""
    model = upgrading_model(then="Runs PostgreSQL 16.")
    store = _SlowFactStore("Runs PostgreSQL 16.")
    rag = build(model=model, memory_store=store)
    rag.remember(_said(STATEMENT), user_id="alice", thread_id="jan", at="2026-01-05T09:00:00Z")
    rag.remember(_said(UPGRADE), user_id="alice", thread_id="feb", at="2026-02-05T09:00:00Z")
    march = threading.Thread(
        target=rag.remember,
        args=(_said("We moved to PostgreSQL 16 this morning."),),
        kwargs={"user_id": "alice", "thread_id": "mar", "at": "2026-03-05T09:00:00Z"},
    )
    march.start()
    assert store.writing.wait(10)
    rag.forget("alice", thread_id="feb")
    march.join(10)
    assert "PostgreSQL 15" not in stored_text(store)
    (current,) = facts_of(rag.list_memories("alice"))
    assert current["text"] == "Runs PostgreSQL 16." and current["thread_id"] == "mar"
    assert [h["thread_id"] for h in current["history"]] == ["jan"]


def _before_fact_of(
    monkeypatch: pytest.MonkeyPatch, rag: Any, method: str, thread: str, step: Any
) -> None:
    """Run ``step()`` once, right before the memory backend's ``method`` is called for the
    facts of ``thread`` (a write, or the take-back of one): a race forced at the one moment
    it can strike, between the writer's last look and the backend's call."""
    memory = rag._components.writer.memory
    real = getattr(memory, method)

    def racing(*args: Any) -> Any:
        hits = args[0] if method == "add_conversations" else args[1]
        facts = [h for h in hits if getattr(h, "form", None) == "fact" or h.key == "database"]
        if facts and all(h.thread_id == thread for h in facts) and not racing.done:  # type: ignore[attr-defined]
            racing.done = True  # type: ignore[attr-defined]
            step()
        return real(*args)

    racing.done = False  # type: ignore[attr-defined]
    monkeypatch.setattr(memory, method, racing)


def test_an_older_conversation_forgotten_as_its_fact_is_written_leaves_nothing_of_it(
    build: Callable[..., Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A turn replayed in January (t1, older than t3's fact) is forgotten after the writer
    last looked, before its fact is written: the fact, which joins t3's as history, must
    not stay there."""
    model = facts_model("Runs PostgreSQL 15.", "Runs PostgreSQL 13 on Debian 11.")
    rag = build(model=model, checkpointer=MemorySaver(), memory_timeout=0.2)
    rag.remember(_said(UPGRADE), user_id="alice", thread_id="t3", at="2026-03-05T09:00:00Z")
    forget = partial(rag.forget, "alice", thread_id="t1")
    _before_fact_of(monkeypatch, rag, "add_conversations", "t1", forget)
    rag.invoke(STATEMENT, cfg("alice", "t1", now="2026-01-05T09:00:00Z"))
    rag.drain_background(10)
    (current,) = facts_of(rag.list_memories("alice"))
    assert current["text"] == "Runs PostgreSQL 15." and current["history"] == []
    assert "Debian 11" not in json.dumps(rag.list_memories("alice"))


def test_a_fact_taken_back_leaves_one_that_joined_its_history_meanwhile(
    build: Callable[..., Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    """t2's fact lands after t2 was forgotten; before it is taken back, an older chat (t1)
    is imported, and its fact joins t2's as history. Taking t2's back must leave t1's."""
    model = facts_model("Runs PostgreSQL 15.", "Runs PostgreSQL 13 on Debian 11.")
    store = InMemoryStore()
    rag = build(model=model, memory_store=store, memory_timeout=0.2)
    forget = partial(rag.forget, "alice", thread_id="t2")
    _before_fact_of(monkeypatch, rag, "add_conversations", "t2", forget)
    older = partial(
        rag.remember, _said(STATEMENT), user_id="alice", thread_id="t1", at="2026-01-05"
    )
    _before_fact_of(monkeypatch, rag, "take_back", "t2", older)
    rag.invoke(UPGRADE, cfg("alice", "t2"))
    rag.drain_background(10)
    (back,) = facts_of(rag.list_memories("alice"))
    assert back["text"] == "Runs PostgreSQL 13 on Debian 11." and back["thread_id"] == "t1"
    assert "PostgreSQL 15" not in stored_text(store)


def test_a_take_back_whose_put_back_fails_still_erases_what_was_forgotten(
    build: Callable[..., Any], minilm: Any
) -> None:
    """t2's fact lands after t2 was forgotten; putting t1's fact back in its place fails
    (the embedder is down): t2's words must go all the same."""
    embeddings = _DownEmbeddings(minilm)
    store = _SlowFactStore("Runs PostgreSQL 15.")
    rag = build(
        model=upgrading_model(), memory_store=store, memory_timeout=0.2, embeddings=embeddings
    )
    rag.invoke(STATEMENT, cfg("alice", "t1"))
    rag.drain_background(10)
    rag.invoke(UPGRADE, cfg("alice", "t2"))
    assert store.writing.wait(10)  # embedded, and being written
    rag.forget("alice", thread_id="t2")
    embeddings.down = True
    store.settle(lambda: "PostgreSQL 15" not in stored_text(store))
    embeddings.down = False
    assert "PostgreSQL 15" not in stored_text(store)
    assert "PostgreSQL 15" not in json.dumps(rag.list_memories("alice"))


@pytest.mark.parametrize("then", ["t3", "t2"])
def test_a_late_take_back_leaves_a_fact_said_since(build: Callable[..., Any], then: str) -> None:
    """t2's fact lands, then its write is slow to return: meanwhile t2 is forgotten (t1's
    fact comes back) and something newer on the subject is said, in another conversation
    (t3) or in t2 again after erasing it. Taking back t2's fact must not take that one,
    which is kept under the same subject."""
    model = upgrading_model(then="Runs PostgreSQL 16.")
    store = _SlowFactStore("Runs PostgreSQL 15.", late=True)
    rag = _upgrade_on_its_way(build, store, model)  # t2's fact is in, its write not back
    rag.forget("alice", thread_id="t2")
    rag.invoke("We moved to PostgreSQL 16 this morning. Anything to watch?", cfg("alice", then))
    rag.drain_background(10)
    store.settle(lambda: False)
    (current,) = facts_of(rag.list_memories("alice"))
    assert current["text"] == "Runs PostgreSQL 16." and current["thread_id"] == then
    assert "PostgreSQL 15" not in stored_text(store)


@pytest.mark.parametrize("kind", ["store", "postgres"])
def test_a_fact_said_again_in_a_later_conversation_outlives_forgetting_that_one(
    build: Callable[..., Any], kind: str
) -> None:
    model = ScriptedChatModel(
        replies=[REPLY],
        facts=[
            fact("database", "Runs PostgreSQL 15.", 0),
            fact("database", "Runs PostgreSQL 15.", 0),
        ],
    )
    rag = build(kind, model=model)
    rag.invoke("Our cluster runs PostgreSQL 15. How do backups work?", cfg("alice", "t1"))
    rag.invoke(UPGRADE, cfg("alice", "t2"))
    rag.drain_background(10)
    rag.forget("alice", thread_id="t2")
    (kept,) = facts_of(rag.list_memories("alice"))
    assert kept["text"] == "Runs PostgreSQL 15." and kept["thread_id"] == "t1"
    assert "upgraded" not in json.dumps(rag.list_memories("alice"))


def _slow_fact(messages: list[Any]) -> dict[str, Any]:
    """A model still drawing the fact when the user erases the conversation."""
    import time

    time.sleep(0.5)
    return fact("database", "Runs PostgreSQL 13 on Debian 11.", 0)


@pytest.mark.parametrize("kind", ["store", "postgres"])
@pytest.mark.parametrize("scope", ["thread", "user"])
def test_a_fact_still_being_drawn_when_its_conversation_is_erased_is_never_kept(
    build: Callable[..., Any], kind: str, scope: str
) -> None:
    model = ScriptedChatModel(replies=[REPLY, "Run pg_upgrade [1]."], facts=[_slow_fact])
    rag = build(kind, model=model)
    rag.invoke(STATEMENT, cfg("alice", "t1"))
    erased = rag.forget("alice", thread_id="t1") if scope == "thread" else rag.forget("alice")
    assert erased == 1  # the turn's exchange, waited for
    rag.drain_background(10)  # the fact's model call returns after the erase
    assert rag.list_memories("alice") == []
    state = rag.invoke("Which PostgreSQL version does my cluster run?", cfg("alice", "t2"))
    assert "PostgreSQL 13" not in state.memory_context


async def test_a_fact_still_being_drawn_when_aforget_erases_its_conversation_is_never_kept(
    abuild: Callable[..., Any],
) -> None:
    model = ScriptedChatModel(replies=[REPLY], facts=[_slow_fact])
    rag = await abuild("store", model=model)
    await rag.ainvoke(STATEMENT, cfg("alice", "t1"))
    assert await rag.aforget("alice", thread_id="t1") == 1
    await rag.adrain_background(10)
    assert await rag.alist_memories("alice") == []


def test_erasing_one_conversation_leaves_a_fact_still_being_drawn_in_another(
    build: Callable[..., Any],
) -> None:
    model = ScriptedChatModel(
        replies=["Noted [1].", REPLY],
        facts=[fact("monitoring", "Runs Grafana 10 on Ubuntu 22.04.", 0), _slow_fact],
    )
    rag = build("store", model=model)
    rag.invoke(
        "My monitoring runs Grafana 10 on Ubuntu 22.04. How do alerts work?", cfg("alice", "t0")
    )
    rag.drain_background(10)
    rag.invoke(STATEMENT, cfg("alice", "t1"))
    assert rag.forget("alice", thread_id="t0") == 2  # t0's exchange and its fact
    rag.drain_background(10)
    assert [m["thread_id"] for m in facts_of(rag.list_memories("alice"))] == ["t1"]


@pytest.mark.parametrize("kind", ["postgres_async"])
async def test_facts_about_the_user_under_ainvoke(abuild: Callable[..., Any], kind: str) -> None:
    model = ScriptedChatModel(
        replies=[REPLY],
        facts=[fact("database", "Runs PostgreSQL 13 on Debian 11.", 0)],
    )
    rag = await abuild(kind, model=model)
    await rag.ainvoke(STATEMENT, cfg("alice", "t1"))
    await rag.adrain_background(10)
    (first,) = facts_of(await rag.alist_memories("alice"))
    assert first["text"] == "Runs PostgreSQL 13 on Debian 11."


@pytest.mark.parametrize(
    ("said", "drawn"),
    [
        ("I don't use Docker anymore.", "Stopped using Docker."),
        ("I don't use Docker anymore.", "Does not use Docker anymore."),
        ("we just moved to lisbon", "Currently lives in Lisbon."),
        ("I drive a tesla now", "Drives a Tesla."),
        # a form of the user's own verb, not in the list (a third hostile pass)
        ("I enjoy hiking on weekends", "Enjoys hiking."),
        ("I commute by bike", "Commutes by bike."),
    ],
)
def test_a_fact_that_opens_with_a_verb_is_stored(
    build: Callable[..., Any], said: str, drawn: str
) -> None:
    """A fact is written as a sentence about the user, so its first word is capitalised:
    "Stopped", "Does", "Currently" are no names the user had to type. Read as names, every
    fact telling of a change was dropped, and the older one stayed current (a hostile
    pass). A name at the start still must be typed ("Paris is home.")."""
    model = ScriptedChatModel(facts=[fact("topic", drawn, 0), fact("home", "Paris is home.", 0)])
    rag = build("store", model=model)
    rag.remember([{"role": "user", "content": said}], user_id="u", thread_id="t1", at=AT)
    assert [m["text"] for m in facts_of(rag.list_memories("u"))] == [drawn]
    rag.remember([{"role": "user", "content": said}], user_id="v", thread_id="t1", at=AT)
    assert facts_of(rag.list_memories("v")) == []


@pytest.mark.parametrize(
    "drawn",
    ["Boeing engineer.", "Redis user.", "Italy resident.", "Started a job. Boeing pays well."],
)
def test_a_fact_that_opens_with_a_name_the_user_never_typed_is_not_stored(
    build: Callable[..., Any], drawn: str
) -> None:
    """Only plain words that open a fact are exempt from being typed by the user, by a
    list: read by their endings ("-ing", "-s", "-ly"), "Boeing", "Redis" and "Italy" passed
    as words (a hostile pass)."""
    model = ScriptedChatModel(facts=[fact("job", drawn, 0)])
    rag = build("store", model=model)
    said = "I just started a new job and I drive to work every day."
    rag.remember([{"role": "user", "content": said}], user_id="u", thread_id="t1", at=AT)
    assert facts_of(rag.list_memories("u")) == []


def test_a_fact_with_a_number_the_user_never_typed_is_not_stored(
    build: Callable[..., Any],
) -> None:
    model = ScriptedChatModel(
        replies=[REPLY],
        facts=[
            fact("database", "Runs PostgreSQL 14 on Debian 11.", 0),  # the user wrote 13
            fact("operating system", "Runs Ubuntu 11.", 0),  # a name they never wrote
        ],
    )
    rag = build("store", model=model)
    rag.invoke(STATEMENT, cfg("alice", "t1"))
    rag.invoke("I also run Debian 11 on my laptop.", cfg("alice", "t2"))
    rag.drain_background(10)
    assert len(model.inputs("memory")) == 2
    assert facts_of(rag.list_memories("alice")) == []
    assert len(said(rag.list_memories("alice"))) == 2  # what was said is still kept


def test_no_extraction_call_for_plain_questions(build: Callable[..., Any]) -> None:
    model = ScriptedChatModel(replies=[REPLY])
    rag = build("store", model=model)
    for question in (
        "How do I take a backup of one database?",
        "How can I watch replication lag?",
        "What does pg_upgrade do?",
    ):
        state = rag.invoke(question, cfg("alice", "t1"))
        assert state.events("write_memory")[0]["conversation"]["facts"] is False
    rag.drain_background(10)
    assert model.inputs("memory") == []
    assert len(said(rag.list_memories("alice"))) == 3


def test_remember_draws_facts_from_an_imported_history(build: Callable[..., Any]) -> None:
    model = ScriptedChatModel(
        facts=[fact("database", "The staging cluster runs PostgreSQL 13 on Debian 11.", 0)]
    )
    rag = build("store", model=model)
    stored = rag.remember(HISTORY, user_id="alice", thread_id="ops", at=AT)
    assert [m["form"] for m in stored] == ["exchange", "exchange", "fact"]
    (found,) = facts_of(rag.list_memories("alice"))
    assert found["sources"] == [HISTORY[0]["metadata"]]  # the message it came from
    assert datetime.fromisoformat(found["at"]) == AT
    # the model saw only what the user said, not the assistant's reply nor what sam said
    extraction = prompt_text(model.inputs("memory")[0])
    assert "Noted: staging" not in extraction and "PostgreSQL 13" in extraction
    assert "ops-backups" not in extraction


@pytest.mark.parametrize("how", ["remember", "remember_many"])
def test_importing_a_history_again_asks_the_model_nothing(
    build: Callable[..., Any], how: str
) -> None:
    """ "Importing the same conversation again stores nothing new" holds with a model too:
    no second extraction call, and no re-extracted fact returned as stored."""
    model = ScriptedChatModel(
        facts=[fact("database", "The staging cluster runs PostgreSQL 13 on Debian 11.", 0)]
    )
    rag = build("store", model=model)

    def once() -> list[Any]:
        if how == "remember":
            return list(rag.remember(HISTORY, user_id="alice", thread_id="ops", at=AT))
        other = {"messages": [{"role": "user", "content": "Is the VPN down?"}], "at": AT}
        batch = [{"messages": HISTORY, "thread_id": "ops", "at": AT}, other]
        return list(rag.remember_many(batch, user_id="alice"))

    first = once()
    assert [m["form"] for m in first].count("fact") == 1
    calls = len(model.inputs("memory"))
    assert once() == []
    assert len(model.inputs("memory")) == calls
    assert len(facts_of(rag.list_memories("alice"))) == 1


@pytest.mark.parametrize("kind", ["store", "postgres"])
def test_an_import_stopped_by_the_model_draws_its_facts_when_run_again(
    build: Callable[..., Any], kind: str
) -> None:
    """The import asks the model only about conversations that stored something new. Before,
    a model failing while it drew facts left the exchanges stored and raised; the same import
    run again then stored nothing new, asked nothing, and the facts were never drawn. Now the
    exchanges of the conversations whose facts were not drawn go again before the error is
    raised. What was stored before the import, in the same thread too, stays."""
    model = ScriptedChatModel(
        facts=[
            RuntimeError("model down"),
            fact("database", "The staging cluster runs PostgreSQL 13 on Debian 11.", 0),
        ]
    )
    rag = build(kind, model=model)
    earlier = [{"role": "user", "content": "Is the VPN down again?"}]
    rag.remember(earlier, user_id="alice", thread_id="ops", at=AT - timedelta(days=1))
    before = rag.list_memories("alice")
    with pytest.raises(Exception, match="model down"):
        rag.remember(HISTORY, user_id="alice", thread_id="ops", at=AT)
    assert rag.list_memories("alice") == before
    again = rag.remember(HISTORY, user_id="alice", thread_id="ops", at=AT)
    assert [m["form"] for m in again] == ["exchange", "exchange", "fact"]
    (found,) = facts_of(rag.list_memories("alice"))
    assert "PostgreSQL 13" in found["text"]
    assert len(said(rag.list_memories("alice"))) == len(said(before)) + 3  # 2 exchanges, 1 fact


async def test_a_cancelled_import_draws_its_facts_when_run_again(
    build: Callable[..., Any],
) -> None:
    """``aremember`` cancelled while the model draws facts (a request timeout, Ctrl-C in an
    async app): the same import run again still draws them."""
    drawing, release = threading.Event(), threading.Event()

    def slow(_: Any) -> dict[str, Any]:
        drawing.set()
        release.wait(10)
        return {"facts": []}

    model = ScriptedChatModel(
        facts=[slow, fact("database", "The staging cluster runs PostgreSQL 13 on Debian 11.", 0)]
    )
    rag = build("store", model=model)
    task = asyncio.create_task(rag.aremember(HISTORY, user_id="alice", thread_id="ops", at=AT))
    assert await asyncio.to_thread(drawing.wait, 10)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    release.set()
    assert await rag.alist_memories("alice") == []
    again = await rag.aremember(HISTORY, user_id="alice", thread_id="ops", at=AT)
    assert [m["form"] for m in again] == ["exchange", "exchange", "fact"]


def test_an_import_asks_the_model_about_new_conversations_only(
    build: Callable[..., Any],
) -> None:
    """Facts are drawn from each conversation that stored something new, not from every
    conversation of a thread that did: a channel imported day by day asks the model about
    the new day only, and a conversation given twice is asked about once."""
    model = ScriptedChatModel(facts=[fact("database", "I run PostgreSQL 13.", 0)])
    rag = build("store", model=model)

    def day(n: int) -> dict[str, Any]:
        said = f"Day {n}: I moved host db-{n} to rack B{n}."
        return {"messages": [{"role": "user", "content": said}], "thread_id": "ops", "at": AT}

    rag.remember_many([day(n) for n in range(3)], user_id="alice")
    assert len(model.inputs("memory")) == 3
    stored = rag.remember_many([day(n) for n in range(4)], user_id="alice")
    assert len(model.inputs("memory")) == 4  # the fourth day only
    assert [m["text"] for m in said(stored)] == ["user: Day 3: I moved host db-3 to rack B3."]
    rag.remember_many([day(7), day(7)], user_id="alice")
    assert len(model.inputs("memory")) == 5  # the copy is not asked about again


@pytest.mark.parametrize("kind", ["store", "memory"])
def test_a_question_about_now_puts_what_was_said_since_first(
    build: Callable[..., Any], kind: str
) -> None:
    """ "What is my hourly rate now?" asks for the newest of what was said on it: the raise
    comes before the rate it replaced, which a question without "now" ranks first (its
    words are closer)."""
    rag = build(kind)
    for day, said in (
        ("2026-01-10", "My hourly rate is 60 euro."),
        ("2026-02-10", "The van needs new tyres before the test."),
        ("2026-03-10", "I raised my hourly rate to 70 euro."),
    ):
        rag.remember(
            [{"role": "user", "content": said}, {"role": "assistant", "content": "Noted."}],
            user_id="ann",
            thread_id=f"t-{day}",
            at=f"{day}T09:00:00Z",
        )

    def rates(question: str) -> list[str]:
        hits = rag.recall(question, user_id="ann", now="2026-05-01T09:00:00Z")
        return [rate for h in hits for rate in ("60", "70") if rate in h["text"]]

    assert rates("What is my hourly rate now?") == ["70", "60"]
    assert rates("What is my hourly rate?") == ["60", "70"]
    # whatever else she talked about since: only what is on the rate is ordered by time
    remember_odds_and_ends(rag, month=3, first_day=11)
    assert rates("What is my hourly rate now?") == ["70", "60"]
    assert rates("What is my most recent hourly rate?") == ["70", "60"]
    state = rag.invoke("What is my hourly rate now?", cfg("ann", "t-may"))
    (read,) = state.events("read_memory")
    assert read["time"]["present"] is True and read["time"]["start"] == ""
    # the prompt lists the raise first, and the offline answer quotes it as how things stand
    context = state.memory_context
    assert context.index("70 euro") < context.index("60 euro"), context
    assert "“I raised my hourly rate to 70 euro.”" in state.answer, state.answer


def test_a_turn_replayed_at_its_time_does_not_know_what_was_said_later(
    build: Callable[..., Any],
) -> None:
    """configurable.now (or recall(now=...)) replays a turn at its time: a conversation
    from months after it is not recalled, while at the real now it is."""
    rag = build("store")
    for day, said in (("2026-03-01", "60"), ("2026-09-01", "70")):
        rag.remember(
            [{"role": "user", "content": f"My hourly rate is {said} euro."}],
            user_id="ann",
            thread_id=f"t-{day}",
            at=f"{day}T09:00:00Z",
        )
    then = {"configurable": {"user_id": "ann", "thread_id": "replay", "now": "2026-07-01T09:00Z"}}
    context = rag.invoke("What is my hourly rate?", then).memory_context
    assert "60 euro" in context and "70 euro" not in context, context
    replayed = rag.recall("What is my hourly rate?", user_id="ann", now="2026-07-01T09:00Z")
    assert [h for h in replayed if "70 euro" in h["text"]] == []
    assert [h for h in replayed if "60 euro" in h["text"]]
    today = rag.recall("What is my hourly rate?", user_id="ann")
    assert {"60", "70"} <= {r for h in today for r in ("60", "70") if f"{r} euro" in h["text"]}
    # many later statements on it take no place among the candidates a replay ranks
    rag.remember_many(
        [
            {
                "messages": [
                    {"role": "user", "content": f"What is my hourly rate? It is {80 + i} euro."}
                ],
                "thread_id": f"later-{i}",
                "at": f"2026-10-{1 + i % 28:02d}T09:00:00Z",
            }
            for i in range(40)
        ],
        user_id="ann",
    )
    replayed = rag.recall("What is my hourly rate?", user_id="ann", now="2026-07-01T09:00Z")
    assert [h["text"] for h in replayed if "60 euro" in h["text"]], replayed
    assert not [h for h in replayed if h["at"] > "2026-07-03"], replayed


def test_a_turn_reckons_yesterday_and_today_in_the_zone_of_its_time(
    build: Callable[..., Any],
) -> None:
    """configurable.now with a time zone (a user in Tokyo, early morning): "yesterday" and
    "today" are that user's, in the turn's prompt as in recall(now=...)."""
    rag = build("store")
    tokyo = timezone(timedelta(hours=9))
    said_at = {
        "older": datetime(2026, 2, 1, 10, tzinfo=tokyo),
        "yesterday": datetime(2026, 3, 17, 10, tzinfo=tokyo),  # 01:00 UTC on the 17th
        "this-morning": datetime(2026, 3, 18, 7, tzinfo=tokyo),  # 22:00 UTC on the 17th
    }
    texts = {
        "older": "The printer toner on floor 2 is low, please order more toner.",
        "yesterday": "That printer jammed on A3 paper again.",
        "this-morning": "The coffee machine is fixed.",
    }
    for thread, at in said_at.items():
        rag.remember(
            [{"role": "user", "content": texts[thread]}], user_id="kenji", thread_id=thread, at=at
        )
    now = datetime(2026, 3, 18, 8, tzinfo=tokyo)  # 23:00 UTC on the 17th
    morning = rag.invoke("What did I say this morning?", cfg("kenji", "t0", now=now))
    lines = conversation_lines(morning.memory_context)
    assert lines[0].startswith("- [2026-03-18 (Wed)] user: The coffee machine"), lines
    question = "What did I say yesterday about the printer toner on floor 2?"
    assert rag.recall(question, user_id="kenji", now=now)[0]["thread_id"] == "yesterday"
    state = rag.invoke(question, cfg("kenji", "t", now=now.isoformat()))
    assert "today is 2026-03-18 (Wed)" in state.memory_context
    lines = conversation_lines(state.memory_context)
    assert lines[0].startswith("- [2026-03-17 (Tue)] user: That printer jammed"), lines
    # what this turn said is remembered at its time (stored in UTC, the same moment)
    (mine,) = [m for m in rag.list_memories("kenji") if m["thread_id"] == "t"]
    assert datetime.fromisoformat(mine["at"]) == now


def test_a_turn_keeps_the_named_zone_of_its_time_for_a_day_in_another_season(
    build: Callable[..., Any],
) -> None:
    """configurable.now in America/New_York, asked in July (EDT) about a January day (EST):
    the day is New York's January day, in the turn's prompt and answer as in
    recall(now=...), not one a fixed July offset would make of it."""
    from zoneinfo import ZoneInfo

    new_york = ZoneInfo("America/New_York")
    rag = build("store")
    said_at = datetime(2026, 1, 10, 23, 30, tzinfo=new_york)  # Sat, 04:30 UTC on the 11th
    rag.remember(
        [{"role": "user", "content": "My printer jammed again, paper tray 3."}],
        user_id="ann",
        thread_id="jan",
        at=said_at,
    )
    now = datetime(2026, 7, 1, 12, tzinfo=new_york)
    question = "What did I tell you on January 10?"
    assert [h["thread_id"] for h in rag.recall(question, user_id="ann", now=now)] == ["jan"]
    state = rag.invoke(question, cfg("ann", "jul", now=now))
    lines = conversation_lines(state.memory_context)
    assert lines and lines[0].startswith("- [2026-01-10 (Sat)] user: My printer jammed"), lines
    assert "2026-01-10" in state.answer and "2026-01-11" not in state.answer, state.answer


def test_a_conversation_dated_by_its_day_alone_reads_as_that_day_in_any_zone(
    build: Callable[..., Any],
) -> None:
    """``at="2026-03-14"`` is that day for a user asking in New York as in Tokyo: read as
    midnight UTC it was the 13th in New York, shown so and missed by "on March 14"."""
    rag = build("store")
    rag.remember(
        [{"role": "user", "content": "My printer jammed again, paper tray 3."}],
        user_id="ann",
        thread_id="mar",
        at="2026-03-14",
    )
    for zone in ("-05:00", "+09:00", "+00:00"):
        now = f"2026-03-20T12:00:00{zone}"
        state = rag.invoke("What did I tell you on March 14?", cfg("ann", f"t{zone}", now=now))
        lines = conversation_lines(state.memory_context)
        first = "- [2026-03-14 (Sat)] user: My printer jammed again, paper tray 3."
        assert lines[:1] == [first], (zone, lines)


def test_a_date_given_as_a_date_reads_as_its_iso_string() -> None:
    """``at=date(2026, 2, 2)`` was refused while ``at="2026-02-02"`` was taken; both are
    noon UTC of that day now, and so is ``recall(now=date(...))`` and a message's own date."""
    rag = make_offline_store_agent()
    boat = [{"role": "user", "content": "I have a yellow boat."}]
    (as_date,) = rag.remember(boat, user_id="d", thread_id="a", at=date(2026, 2, 2))
    (as_text,) = rag.remember(boat, user_id="s", thread_id="a", at="2026-02-02")
    assert as_date["at"] == as_text["at"] and as_date["at"].startswith("2026-02-02T12:00:00")
    dated = [{"role": "user", "content": "I sold the boat.", "timestamp": date(2026, 2, 9)}]
    (own,) = rag.remember(dated, user_id="d", thread_id="b")
    assert own["at"].startswith("2026-02-09T12:00:00")
    hits = rag.recall("What did I say on February 2?", user_id="d", now=date(2026, 2, 10))
    assert hits[0]["text"] == as_date["text"] and hits[0]["at"] == as_date["at"]


@pytest.mark.parametrize(
    ("metadata", "kind"),
    [("slack", "store"), ({"ts": datetime(2026, 1, 5), "raw": b"\x00"}, "postgres")],
)
def test_metadata_memory_cannot_keep_never_fails_the_answer(
    build: Callable[..., Any], metadata: Any, kind: str
) -> None:
    rag = build(kind)
    question = HumanMessage(STATEMENT, additional_kwargs={"metadata": metadata})
    state = rag.invoke({"messages": [question]}, cfg("alice", "t1"))
    assert "pg_dump" in state.answer
    assert rag.drain_background(10)["failed"] == 0
    (kept,) = said(rag.list_memories("alice"))
    assert SAID in kept["text"] and kept["sources"][0]["role"] == "user"


def remember_failovers(rag: Any, days: int, rest: str) -> None:
    """One conversation a day of alice's: "Day N: the cluster failover happened again"
    and ``rest``."""
    for day in range(days):
        rag.remember(
            [{"role": "user", "content": f"Day {day}: the cluster failover happened again{rest}"}],
            user_id="alice",
            thread_id=f"incident-{day}",
            at=AT + timedelta(days=day),
        )


def test_the_prompt_holds_at_most_top_k_memories_within_max_chars(
    build: Callable[..., Any],
) -> None:
    rag = build("store", conversation_top_k=3, conversation_max_chars=700)
    filler = " ".join(["It restarts the PostgreSQL 13 service and the nightly backup job."] * 6)
    remember_failovers(rag, 8, f". {filler}")  # eight relevant memories, ~400 characters each
    question = "What happened with the cluster failover?"
    assert len(rag.recall(question, user_id="alice", k=8)) == 8  # an explicit k counts alone
    lines = conversation_lines(rag.invoke(question, cfg("alice", "now")).memory_context)
    assert 1 <= len(lines) <= 3
    # the bound holds for the lines as the prompt shows them: dates and line breaks too
    assert sum(len(line) + 1 for line in lines) <= 700 and all(len(line) < 460 for line in lines)


def test_the_size_bound_counts_the_dates_and_titles_the_prompt_shows(
    build: Callable[..., Any],
) -> None:
    rag = build("store", conversation_top_k=8, conversation_max_chars=330)
    remember_failovers(rag, 6, " at night.")  # six relevant memories, ~100 characters each
    lines = conversation_lines(
        rag.invoke("What happened with the cluster failover?", cfg("alice", "now")).memory_context
    )
    assert len(lines) >= 2
    assert sum(len(line) + 1 for line in lines) <= 330


# -- what a hostile pass found --------------------------------------------------------------
#: A Kubernetes env entry naming a secret, its whole value as YAML reads it (a hostile pass
#: saw parts of it kept: after a space, '#' or ',', a leading '-', a block scalar's lines)
K8S_VALUES = [
    ("- name: DB_PASSWORD\n  value: correct horse battery staple\n- name: DB_HOST", "staple"),
    ("- name: DB_PASSWORD\n  value: correct horse battery staple", "staple"),
    ("- name: DB_PASSWORD\n  value: hunter#2abcQ\n- name: DB_HOST", "2abcQ"),
    ("- name: DB_PASSWORD\n  value: Zk9,pq!rW1x\n- name: DB_HOST", "pq!rW1x"),
    ("- name: DB_PASSWORD\n  value: -Zk9pqrW1x\n- name: DB_HOST", "Zk9pqrW1x"),
    ("- name: DB_PASSWORD\n  value: ab{cd}ef[gh]Q9\n- name: DB_HOST", "ef[gh]Q9"),
    ("- name: DB_PASSWORD\n  value: |\n    Zk9pqrW1xQ\n- name: DB_HOST", "Zk9pqrW1xQ"),
    ("- name: DB_PASSWORD\n  value: >-\n    correct horse\n    staple\n- name: A", "staple"),
    ("- name: DB_PASSWORD\n  value: correct horse\n    battery staple\n- name: A", "staple"),
    ("- name: DB_PASSWORD\n  value:\n    correct horse staple\n- name: A", "staple"),
    ("- name: SECRET_KEY\n  value: 'it''s Zk9pqrW1'\n- name: DB_HOST", "Zk9pqrW1"),
    ('env: [{"value": "Zk9pqrW1", "name": "DB_PASSWORD"}]', "Zk9pqrW1"),
    ('{"value": "Zk9pqrW1", "type": "string", "key": "api_token"}', "Zk9pqrW1"),
    ("env: [{name: DB_PASSWORD, value: correct horse staple}, {name: A, value: b}]", "staple"),
    ("- name: DB_PASSWORD value: correct horse battery staple - name: DB_HOST", "staple"),
    ("- name: DB_PASSWORD value: | Zk9pqrW1xQ - name: DB_HOST value: db", "Zk9pqrW1xQ"),
]


#: Each pasted secret, and the part of it that must never be kept.
PASTED = [
    ("PGPASSWORD=hunter2 psql -h db", "hunter2"),
    ("export PGPASSWORD='S3cure!pass' first", "S3cure!pass"),
    ("aws secret wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY here", "wJalrXUtnFEMI/K7MDENG"),
    ("my password: correct horse battery staple. Then what?", "horse battery staple"),
    ('the db password is "correct horse battery staple"', "horse battery staple"),
    ("postgresql://admin:p@ss@db.example.com:5432/app", "p@ss"),
    ("postgres://u:ab/cd@db/x", "ab/cd"),
    ("Authorization: Basic dXNlcjpodW50ZXIy", "dXNlcjpodW50ZXIy"),
    ("Passwort: hunter2", "hunter2"),
    ("mot de passe : hunter2", "hunter2"),
    ("contraseña: hunter2", "hunter2"),
    # punctuation inside a password belongs to it
    ("My login fails with password: Sun.Flower!42 - why?", "Flower!42"),
    ("password=Zx81!qq", "!qq"),
    ("password: pass.word123", "word123"),
    ("Mot de passe : Zx81!qq", "!qq"),
    # pasted from code and config, and said in a sentence: the value goes, the key may stay
    ('{"user": "app", "password": "Tr0ub4dor&3"}', "Tr0ub4dor&3"),
    ("{'password': 'x1y2z3'}", "x1y2z3"),
    ('{"api_key": "k3y-Zq81-value"}', "k3y-Zq81"),
    ('{"token": "tok_4f9Qz"}', "tok_4f9Qz"),
    ('{"secret": "shh quietly"}', "shh quietly"),
    ("redis://:Sup3rS3cret@cache.internal:6379/0", "Sup3rS3cret"),
    ("the password for the prod db is hunter2", "hunter2"),
    ("my password to the VPN is Tr0ub4dor", "Tr0ub4dor"),
    ("the root password on that box is swordfish42", "swordfish42"),
    ("mysql -u root -pHunter2pass app", "Hunter2pass"),
    ("curl -u admin:Hunter2pass https://api.example.com/v1", "Hunter2pass"),
    ("pgtool --password Qw3rty-db -h db", "Qw3rty-db"),
    ("pgtool --password=Pa55word! --verbose", "Pa55word"),
    ("pgtool --passwd Pa55-wd", "Pa55-wd"),
    ("sshpass -p 'Hunter2 pass' ssh root@db", "Hunter2 pass"),
    ("sshpass -p s3cr3tpw ssh db", "s3cr3tpw"),
    ("<password>Hunter2pass</password>", "Hunter2pass"),
    ("<secret>shh-quietly</secret>", "shh-quietly"),
    ("<apiKey>K3yV4lue</apiKey>", "K3yV4lue"),
    ('<add key="Password" value="Tr0ub4dor"/>', "Tr0ub4dor"),
    ('<property name="password" value="Tr0ub4dor"/>', "Tr0ub4dor"),
    ("<db:password>Tr0ub4dor</db:password>", "Tr0ub4dor"),
    ("<password>\n  Tr0ub4dor\n</password>", "Tr0ub4dor"),
    ('{"password": 12345678}', "12345678"),
    ('"password" => "Tr0ub4dor&3"', "Tr0ub4dor&3"),
    ("redis-cli -a Hunter2pass", "Hunter2pass"),
    ("docker login -u me -p Hunter2pass", "Hunter2pass"),
    ("mongo -u admin -p Hunter2pass", "Hunter2pass"),
    ("mongosh mongodb://db:27017 -u admin -p Hunter2pass", "Hunter2pass"),
    ("smbclient //srv/share -U admin%Hunter2pass", "Hunter2pass"),
    ("password for prod db = hunter2", "hunter2"),
    ("the password for the prod db is now hunter2", "hunter2"),
    ("I changed the password for prod to hunter2", "hunter2"),
    ("my pw is hunter2", "hunter2"),
    ("my ssh passphrase is correct horse", "correct"),
    # config and command shapes a hostile pass found kept
    ('<entry key="db.password">Zk9!pqr</entry>', "Zk9!pqr"),
    ("machine api.example.com login bob password Zk9pqrW1", "Zk9pqrW1"),
    ("machine imap login bob\npassword bobwillknow", "bobwillknow"),
    ("my login is bob and my password Zk9pqrW1", "Zk9pqrW1"),
    ("my PIN is 4821", "4821"),
    ("the door code is 2291", "2291"),
    ("secret_key_base: 3b8f2e1c9a7d6e5f4a3b2c1d0e9f8a7b6c5d4e3f", "3b8f2e1c9a7d6e5f"),
    ("db_password: hunter2\nport: 5432", "hunter2"),
    ("htpasswd -b /etc/nginx/.htpasswd alice Zk9pqrW1", "Zk9pqrW1"),
    ("openssl enc -aes256 -k Zk9pqrW1 -in a", "Zk9pqrW1"),
    ("my password is: Zk9pqrW1xy", "Zk9pqrW1xy"),
    ("password is: hunter2 two", "hunter2 two"),
    ("the token was: abc123XYZ", "abc123XYZ"),
    ("my password is “Zk9 pqr W1”", "pqr W1"),
    ("my password is ‘hunter two’ ok", "hunter two"),
    ("password：Zk9pqr", "Zk9pqr"),
    ("username bob password hunter2", "hunter2"),
    ("the credentials are bob:Zk9pq", "Zk9pq"),
    ("wifi key: BlueCat42", "BlueCat42"),
    # a Kubernetes env entry, as YAML and as JSON, and AWS's Key/Value
    ("env:\n- name: DB_PASSWORD\n  value: Tr0ub4dor3xyz\n- name: DB_HOST", "Tr0ub4dor3xyz"),
    ('{"env": [{"name": "DB_PASSWORD", "value": "Tr0ub4dor3xyz"}]}', "Tr0ub4dor3xyz"),
    ("- name: API_TOKEN\n  value: 'hunter two'", "hunter two"),
    ('[{"Key": "db.password", "Value": "Zk9!pqr"}]', "Zk9!pqr"),
    *K8S_VALUES,
    # shapes the last hostile pass found kept
    ("az login -u bob@corp.com -p Zk9pqrW1x", "Zk9pqrW1x"),
    ("Mein Passwort lautet Sonnenblume42", "Sonnenblume42"),
    ("Kennwort lautet: Sonnenblume42.", "Sonnenblume42"),
    ("user bob pass Hunter2x", "Hunter2x"),
    # a user, then a password-shaped value
    ("login: bob / Qx7!mmz9pL", "Qx7!mmz9pL"),
    ("user=bob, Zk9pqrW1 works", "Zk9pqrW1"),
    # shapes an outside check found kept (2026-12-07)
    ("use this key: Zr8LqP2mX9vK4tW7", "Zr8LqP2mX9vK4tW7"),
    ("Here is my token, abcd1234efgh5678ijkl", "abcd1234efgh5678ijkl"),
    # left alone at stop 42, masked since
    ("The admin password changed; it's now Blue-Falcon-88", "Blue-Falcon-88"),
    ("login with admin / Adm1nPa55!", "Adm1nPa55"),
    ("signed in as root | Tr0ub4dor&3", "Tr0ub4dor&3"),
    ("the key is Zr8LqP2mX9vK4tW7", "Zr8LqP2mX9vK4tW7"),
    # phrasings a hostile pass found kept (stop 43)
    ("password: purple monkey dishwasher", "monkey dishwasher"),
    ("passwd: sunny river castle", "river castle"),
    ("My Netflix login is bob@x.com / Sunshine2024", "Sunshine2024"),
    ("creds for the NAS: bob:Sunshine2024", "Sunshine2024"),
    ("TOTP seed: JBSWY3DPEHPK3PXP", "JBSWY3DPEHPK3PXP"),
    ("my seed phrase is abandon ability able about above absent absorb abstract", "ability able"),
    ("I use the password `letmein` everywhere", "letmein"),
    ("Garage code: 7788", "7788"),
    ("PIN code 4821", "4821"),
    ("the PIN for my card is 4821", "4821"),
    ("my door code 4411", "4411"),
    ("recovery code: 8392-1123-4455", "1123"),
    ("my password (don't share it) is Sunshine2024", "Sunshine2024"),
    ("my new password's Sunshine2024", "Sunshine2024"),
    ("I use the password 'letmein' everywhere", "letmein"),
    ("Password - Qwerty!234", "Qwerty"),
    # a pass phrase of plain words after "password is" (only its first word went)
    ("My password is correct horse battery staple", "horse battery"),
    ("The wifi password is purple monkey dishwasher", "monkey dishwasher"),
    ("the password was blue elephant", "elephant"),
    ("my gmail password is summer sun beach wave and it works", "beach wave"),
    ("The wifi password is purple monkey 42", "monkey 42"),
    ("The wifi password is flying fish", "fish"),
    ("Password for the NAS is purple monkey dishwasher", "monkey dishwasher"),
    # lists of recovery codes (only the first was masked), and creds without "user:"
    ("Google backup codes: 1234 5678, 9012 3456, 7788 9911", "7788 9911"),
    ("recovery codes:\n48213\n99812", "99812"),
    ("My GitHub recovery codes: 4f8a2-9bc31 7d2e1-0a9f4", "7d2e1-0a9f4"),
    ("recovery code 48213", "48213"),
    ("creds for the NAS: Sunshine2024", "Sunshine2024"),
    ("creds for the NAS: bob / Sunshine2024", "Sunshine2024"),
    # ... and the shapes a hostile pass of that found kept
    ("Backup codes for GitHub: 4f8a2-9bc31, 7d2e1-0a9f4", "7d2e1"),
    ("backup codes:\n- 12345678\n- 87654321", "87654321"),
    ("recovery codes:\n1. 48213\n2. 99812", "99812"),
    ("Recovery codes: 1234-5678-9012, 3456-7890-1234", "3456-7890"),
    ("recovery codes: 48213 / 99812 / 55555", "55555"),
    ("scratch codes: 1234 5678 9012", "9012"),
    ("2FA backup codes (Google): 48213 99812", "99812"),
    ("the NAS creds are bob / Sunshine2024", "Sunshine2024"),
    ("creds for the NAS - Sunshine2024", "Sunshine2024"),
    # a payment card pasted whole: its number (in groups or not) and its code
    ("my card is 4111 1111 1111 1111 exp 12/29 cvv 123", "1111 1111"),
    ("my card is 4111 1111 1111 1111 exp 12/29 cvv 123", "cvv 123"),
    ("card 5500-0000-0000-0004, CVC2: 4821", "0000-0004"),
    ("card 5500-0000-0000-0004, CVC2: 4821", "4821"),
    ("pay with 378282246310005 please", "378282246310005"),
    ("the card: 4111.1111.1111.1111 thanks", "1111.1111"),
    ("card 4111\u00a01111\u00a01111\u00a01111, security code 123", "\u00a01111\u00a0"),
    ("card 4111\u00a01111\u00a01111\u00a01111, security code 123", "code 123"),
]


@pytest.mark.parametrize(("pasted", "secret"), PASTED)
def test_common_secret_shapes_are_never_kept(pasted: str, secret: str) -> None:
    rag = make_offline_store_agent()
    stored = rag.remember(
        [{"role": "user", "content": f"{pasted}. Then pg_dump fails"}],
        user_id="s",
        thread_id="t",
    )
    shown = [*stored, *rag.list_memories("s"), *rag.recall("pg_dump fails", user_id="s")]
    # ids and times are generated: a door code's digits may turn up in a microsecond
    generated = {"id", "at", "updated_at"}
    kept = json.dumps([{k: v for k, v in m.items() if k not in generated} for m in shown])
    assert "pg_dump" in kept
    assert secret not in kept


#: Text about passwords, flags and ids that holds no secret.
ORDINARY = [
    # what stands after "key:" or a comma after a secret's name, but is no secret
    "key: us-east-1",
    "the key: SHIFT+F10",
    "Primary key: order_id2",
    "i18n key: errors.notFound404",
    "key: OAuth2",
    "the token, GPT-4o",
    "token, cl100k_base",
    "the secret, Base64Encoded",
    "key: 9fceb02d0ae598e95dc970b74767f19372d61af8",
    "log in as ubuntu / ec2-user",
    "my password changed and now GitLab-2FA is required",
    "the password policy changed; it's now min12chars",
    "the token is rotated weekly; it's Base64-encoded",
    "the key is Enter",
    "the password's length is 12",
    # a second hostile pass (stop 43) found these masked by the shapes added first
    "the password 'reset' flow is broken",
    "The API key 'X-Api-Key' header must be set.",
    "rename the token 'access_token' to 'id_token'",
    "The password reset page moved; it's now https://id.corp.com/reset?flow=new.",
    "the login is slow / Timeout=30s in the logs",
    "I sign in with Google / Office365 depending on the account.",
    "My 2FA key is lost, I need a new one.",
    "My seed phrase was compromised last year.",
    "The recovery phrase is twelve words long.",
    "my seed phrase is stored offline",
    "seed phrase: write it down on paper and store it safely",
    "the password's expired",
    "my password (the old one) is expired",
    "the token's scope is read",
    "the door code changed twice",
    "the lock code 404 error",
    "backup codes are stored in a safe",
    "the key is 9fceb02d0ae598e95dc970b74767f19372d61af8",
    "press the key: Enter",
    "the key: F5 refreshes the page",
    "the token, as I said, expired",
    "login with admin / admin",
    # runs of digits that are no payment card (the wrong check digit or first digit)
    "order 4111 1111 1111 1112 shipped",
    "call me at +44 20 7946 0958",
    "ISBN 9780306406157",
    "build 1234567890123456 failed",
    # a hex id whose digits pass a card's checks: part of a word, not a card
    "note for ea2396111932429296fa6ef8e527cd4d",
    "request req_4111111111111111 failed",
    "we ran it in 2002 2003 2004 2005",
    "user: bob / admin",
    "login: alice, 2FA enabled",
    "call me at +49 1512 3456704",
    "the CSC 2021 report",
    "the password is expired",
    "my password is case sensitive",
    # a clause about the password after a colon (its first word was masked)
    "password: must be at least 12 characters long",
    "Password: Must contain a digit",
    "recovery codes are stored in 1Password",
    # sentences about a password a pass phrase's reading masked whole (a hostile pass)
    "My password was reset yesterday afternoon.",
    "My password is strong these days.",
    "The password is available upon request.",
    "The password is invalid per policy.",
    # ... and that lost their first word before it
    "My new password is much longer.",
    "The password is changing next week.",
    "The password is one word",
    # labels the pass phrase is not read after: as before this stop, their first word only
    "The passcode is Face ID.",
    "My password's gone forever.",
    "the backup codes page moved",
    "creds for the NAS: see the wiki",
    "Creds for the NAS: 1Password.",
    "creds for staging: JIRA-4411 has them.",
    "Our backup codes 2023 audit is done.",
    "the password is saved somewhere safe",
    "the password is wrong again",
    "the password for the prod db is expired",
    "the password for the prod db is too short",
    "the password for the prod db is not working",
    "the password manager we use is bitwarden",
    "I forgot my password for the prod db",
    "password reset link",
    "curl -u is the user flag",
    "docker run -u 1000:1000 postgres",
    "mysql -p prompts for it",
    "use --password to pass it",
    "pg_dump --no-password app",
    "ticket 4411",
    "PostgreSQL 13 on Debian 11",
    "the token was rejected",
    "commit 3f2a9c1b",
    "pip install -r requirements.txt",
    "pip install -pkg",
    "tar -pcf backup.tar /etc",
    "I use mysql. Then tar -pcf backup.tar /etc",
    "redis://cache.internal:6379/0",
    "https://example.com/a:b@c",
    '{"max_tokens": "100", "token_type": "bearer", "password_hint": "pet"}',
    "<passwordPolicy>strict</passwordPolicy>",
    "author: Ana",
    "the password for the prod db is rotated every month",
    "the password for the wifi is written on the fridge",
    "the password for the prod db is kept in a secrets manager",
    "the password is changed by IT every quarter",
    "the passphrase is correct",
    "the password was changed to match the policy",
    "PWD=/home/ana/project",
    "OLDPWD=/tmp",
    '{"PWD": "/home/ana/project"}',
    "I typed mysql -p. It asked for the password.",
    "docker run -p 8080:80 nginx",
    '{"password": null}',
    # near the new shapes, and not one
    "Pass --libdir=/usr/lib to ./configure",
    "Passed: tools/launcher/ArgsFileTest.java",
    "gnutls_session_ext_master_secret_status: Added",
    "gnutls_cipher_add_auth: ADDED",
    "password_min_length: 12",
    "token_count: 150000",
    "auth_method: oauth",
    "db_password_file: /run/secrets/db",
    "the password hash is sha256",
    "we were given search token $token and value $value",
    "the username and password separated\\nby a colon",
    "my PIN is required",
    "the login and passwd\n.wgetrc commands",
    "git-credential-osxkeychain: git-credential-osxkeychain.o",
    "PWDPROMPT=prompt",
    "user admin password policy",
    "Your secret is safe.",
    "The token is valid.",
    "credentials are stored in vault:secret/db",
    # name/value entries that name no secret, or hold none
    "- name: DB_HOST\n  value: db.internal",
    '{"name": "DB_USER", "value": "app"}',
    "- name: DB_PASSWORD\n  valueFrom:\n    secretKeyRef: {name: db, key: password}",
    "- name: DB_PASSWORD_FILE\n  value: /run/secrets/db",
    '{"name": "password_min_length", "value": 12}',
    "the hostname: password value: is a field",
    "- name: LOG_LEVEL\n  value: debug info",
    "- name: LOG_LEVEL value: debug info - name: DB_HOST value: db",
    "the name: value pairs of the key: settings",
    '{"value": "debug info", "name": "LOG_LEVEL"}, {"name": "DB_PASSWORD"}',
    "- name: DB_PASSWORD valueFrom: secretKeyRef: {name: db, key: password}",
    "- name: DB_PASSWORD_FILE value: /run/secrets/db - name: DB_HOST value: db",
    "- name: DB_PASSWORD\n  value:\n- name: DB_HOST\n  value: db",
    "das Passwort ist nicht gut",
    "das Passwort lautet anders als gedacht",
    "az login --use-device-code",
    "the user admin pass policy",
]


@pytest.mark.parametrize(("pasted", "secret"), K8S_VALUES)
def test_a_kubernetes_value_is_masked_whole_as_written(pasted: str, secret: str) -> None:
    from retrievalagent.memory._secrets import mask_secrets

    masked, count = mask_secrets(pasted)
    assert count == 1
    assert secret not in masked


def test_a_kubernetes_password_is_masked_whole_and_the_next_entry_kept() -> None:
    from retrievalagent.memory._secrets import MASK, mask_secrets

    written = (
        "- name: DB_PASSWORD\n  value: correct horse battery staple\n- name: DB_HOST\n  value: db"
    )
    for said in (written, " ".join(written.split())):
        masked, count = mask_secrets(said)
        assert count == 1
        assert masked == said.replace("correct horse battery staple", MASK)


def test_a_flags_password_is_masked_and_the_next_flag_kept() -> None:
    """Masking a pass phrase after "password:" whole ran once before "--password=X" was
    read as a flag, and took "--verbose" with it (found in review)."""
    from retrievalagent.memory._secrets import MASK, mask_secrets

    assert mask_secrets("pg_dump --password=Hunter2 --verbose") == (
        f"pg_dump --password={MASK} --verbose",
        1,
    )


@pytest.mark.parametrize("said", ORDINARY)
def test_ordinary_text_is_not_taken_for_a_secret(said: str) -> None:
    from retrievalagent.memory._secrets import mask_secrets

    assert mask_secrets(said) == (said, 0)


@pytest.mark.parametrize(
    "adversarial",
    [
        "<password " * 5000,
        "curl -u " * 6000,
        '{"password": ' * 4000,
        "mysql -a " * 6000,
        '<entry key="password" ' * 5000,
        "login a password " * 6000,
        "password, now it's " * 3000,
        "login with a / " * 5000,
        "a_password_b: " * 6000,
        "htpasswd -b " * 6000,
        "openssl -k " * 6000,
        "- name: a_password " * 5000,
        '{"key": "password", ' * 4000,
        "name: password value: " * 4000,
        '"value": "x", ' * 4000,
        "- name: a_password\n  value: |\n" + "   x\n" * 9000,
        "name: password value: x" + " y" * 25000,
        # every word start a URL scheme's candidate (4 s before the URL pattern was bounded)
        "a." * 25000,
        "a://b:" * 9000,
    ],
)
def test_masking_secrets_stays_fast_on_adversarial_text(adversarial: str) -> None:
    from time import perf_counter

    from retrievalagent.memory._secrets import mask_secrets

    started = perf_counter()  # well under 0.1 s; the bound leaves room for a busy machine
    mask_secrets(adversarial[:50_000])
    assert perf_counter() - started < 1.0


def test_metadata_fields_named_like_a_short_secret_are_masked() -> None:
    from retrievalagent.memory._secrets import MASK, mask_metadata

    secret = {"pw": "x1", "AUTH": "x2", "passwd": "x3", "pass": "x4", "db_pw": "x5"}
    assert mask_metadata({**secret, "basic_auth": "x6"}) == (
        {**dict.fromkeys(secret, MASK), "basic_auth": MASK},
        6,
    )
    ordinary = {
        "author": "Ana",
        "authored_at": "2026-01-05",
        "auth_method": "oauth",
        "pwd_changed_at": "2026-01-05",
    }
    assert mask_metadata(ordinary) == (ordinary, 0)
    # a count, a flag or an auth scheme's name is about a secret, not one
    about = {
        "usage": {"total_tokens": 1532, "prompt_tokens": 10},
        "auth": "oauth2",
        "token_type": "bearer",
        "password_set": True,
    }
    assert mask_metadata(about) == (about, 0)
    # ... but a password field's value is masked whatever word it is, and so is a key's
    secret = {"password": "password", "token": "bearer", "max_tokens_key": "k3y-Zq81"}
    assert mask_metadata(secret) == (dict.fromkeys(secret, MASK), 3)


def test_metadata_entries_named_like_a_secret_keep_no_value() -> None:
    """A name/value entry (Kubernetes' env, AWS's Key/Value) whose name is a secret's:
    its value is masked as a field of that name is; the others are kept."""
    from retrievalagent.memory._secrets import MASK, mask_metadata

    env = [
        {"name": "DB_PASSWORD", "value": "Tr0ub4dor3xyz"},
        {"name": "DB_HOST", "value": "db.internal"},
        {"name": "auth", "value": "oauth2"},  # a scheme's name, as under an "auth" field
    ]
    tags = [{"Key": "api_token", "Value": "k3y-Zq81"}, {"Key": "team", "Value": "ops"}]
    masked, count = mask_metadata({"env": env, "tags": tags})
    assert count == 2
    assert masked["env"] == [{"name": "DB_PASSWORD", "value": MASK}, *env[1:]]
    assert masked["tags"] == [{"Key": "api_token", "Value": MASK}, tags[1]]
    rag = make_offline_store_agent()
    message = {"role": "user", "content": "Why does my pod crash?", "metadata": {"env": env}}
    rag.remember([message], user_id="k8", thread_id="pod")
    listed = json.dumps(rag.list_memories("k8"))
    assert "Tr0ub4dor3xyz" not in listed and "db.internal" in listed


@pytest.mark.parametrize("kind", ["store", "mem0"])
def test_a_secret_said_once_is_masked_where_the_conversation_repeats_it(
    build: Callable[..., Any], kind: str
) -> None:
    """A reply that quotes the password back, or the key pasted again later, keeps no copy."""
    rag = build(kind)
    stored = rag.remember(
        [
            {"role": "user", "content": "pg_dump asks for a password: Zx81!qq"},
            {"role": "assistant", "content": "You wrote Zx81!qq; the '!' is expanded by bash."},
            {"role": "user", "content": "And my api key is Q7hpT2mK9 for the backup bucket."},
            {"role": "assistant", "content": "Noted."},
            {"role": "user", "content": "I put Q7hpT2mK9 into backup.conf, pg_dump still fails."},
        ],
        user_id="s",
        thread_id="echo",
    )
    kept = json.dumps([stored, rag.list_memories("s"), rag.recall("pg_dump fails", user_id="s")])
    assert "bash" in kept and "backup.conf" in kept  # the words around them are kept
    assert "Zx81" not in kept and "Q7hpT2mK9" not in kept


@pytest.mark.parametrize("kind", ["store", "mem0"])
def test_a_reply_to_a_request_for_a_password_is_not_kept(
    build: Callable[..., Any], kind: str
) -> None:
    """ "Please enter your password." then "Sunshine2024": the reply names no password, and
    was stored as typed (a hostile pass); an answer to another question is kept."""
    rag = build(kind)
    stored = rag.remember(
        [
            {"role": "assistant", "content": "Please enter your password."},
            {"role": "user", "content": "Sunshine2024"},
            {"role": "assistant", "content": "Thanks, Sunshine2024 accepted."},
            {"role": "assistant", "content": "What is your favourite colour?"},
            {"role": "user", "content": "Turquoise"},
            # a question that names a password without asking for one, then an answer
            {
                "role": "assistant",
                "content": "What OS do you use? Also, what's your password policy?",
            },
            {"role": "user", "content": "macOS"},
            {"role": "user", "content": "I run macOS Sonoma with FileVault."},
            {"role": "assistant", "content": "And the PIN?"},
            {"role": "user", "content": "Tr0ub4dor3"},
        ],
        user_id="s",
        thread_id="prompted",
    )
    kept = json.dumps([stored, rag.list_memories("s"), rag.recall("my password", user_id="s")])
    assert "Sunshine2024" not in kept and "Tr0ub4dor3" not in kept and "[secret removed]" in kept
    assert "Turquoise" in kept and "I run macOS Sonoma" in kept and "user: macOS" in kept


@pytest.mark.parametrize(
    ("typed", "reply", "secret"),
    [
        ("The wifi password is Xy7kL9qZ.", "Got it: Xy7kL9qZ is the wifi password.", "Xy7kL9qZ"),
        (
            "My wifi password: Tr0ub4dor3 stopped working after the update",
            "If Tr0ub4dor3 stopped working, reset the router.",
            "Tr0ub4dor3",
        ),
        ("Passwort: Xy7kL9qZ geht nicht", "Xy7kL9qZ ist abgelaufen.", "Xy7kL9qZ"),
    ],
)
def test_a_reply_quoting_a_password_as_the_user_ended_or_began_a_clause_keeps_no_copy(
    typed: str, reply: str, secret: str
) -> None:
    """The value masked where it was typed is "Xy7kL9qZ." or "Tr0ub4dor3 stopped working
    after the update"; the reply quotes the password alone."""
    rag = make_offline_store_agent()
    stored = rag.remember(
        [{"role": "user", "content": typed}, {"role": "assistant", "content": reply}],
        user_id="s",
        thread_id="t",
    )
    kept = json.dumps([stored, rag.list_memories("s")])
    assert secret not in kept


@pytest.mark.parametrize(
    ("typed", "reply", "kept"),
    [
        (
            "My password: don't remember it at all",
            "Don't worry, I don't think it matters.",
            "I don't think",
        ),
        (
            "WiFi password: iPhone won't connect to it",
            "Does your iPhone see the network?",
            "your iPhone see",
        ),
        (
            "password: 2024 rules changed, now 12 chars",
            "In 2024 the policy changed.",
            "In 2024 the",
        ),
    ],
)
def test_a_reply_keeps_the_ordinary_words_a_masked_clause_began_with(
    typed: str, reply: str, kept: str
) -> None:
    rag = make_offline_store_agent()
    rag.remember(
        [{"role": "user", "content": typed}, {"role": "assistant", "content": reply}],
        user_id="s",
        thread_id="t",
    )
    assert kept in json.dumps(rag.list_memories("s"))


def test_a_password_given_in_metadata_is_masked_where_the_words_repeat_it() -> None:
    rag = make_offline_store_agent()
    rag.remember(
        [
            {
                "role": "user",
                "content": "I typed Zx9kk22qP into the login box and it failed",
                "metadata": {"password": "Zx9kk22qP"},
            },
            {"role": "assistant", "content": "Check caps lock."},
        ],
        user_id="s",
        thread_id="t",
    )
    kept = json.dumps(rag.list_memories("s"))
    assert "login box" in kept and "Zx9kk22qP" not in kept


def test_the_full_stop_after_a_masked_password_stays_the_sentences() -> None:
    from retrievalagent.memory._secrets import MASK, mask_secrets

    assert mask_secrets("The wifi password is Xy7kL9qZ. It stopped.") == (
        f"The wifi password is {MASK}. It stopped.",
        1,
    )


def test_a_reply_quoting_a_secret_pasted_in_an_earlier_turn_keeps_no_copy(
    build: Callable[..., Any],
) -> None:
    """Each turn stores its own exchange; a model's reply may still quote what the user
    pasted a turn before, which the prompt showed it."""
    model = ScriptedChatModel(
        replies=["Noted [1].", "In Zx81!qq the '!' is expanded by bash: quote it for psql [1]."]
    )
    rag = build("store", model=model, checkpointer=MemorySaver())
    rag.invoke("pg_dump asks for a password: Zx81!qq", cfg("alice", "t1"))
    rag.invoke("pg_dump still fails with it, why?", cfg("alice", "t1"))
    rag.drain_background(10)
    kept = json.dumps(rag.list_memories("alice"))
    assert "psql" in kept and "still fails" in kept  # the second exchange is stored
    assert "Zx81" not in kept


def make_offline_store_agent(**kwargs: Any) -> Any:
    from retrievalagent import init_agent

    return init_agent("hostile", backend_url=":memory:", memory_store=InMemoryStore(), **kwargs)


def test_prose_about_passwords_is_kept() -> None:
    rag = make_offline_store_agent()
    said = "The password is expired and the token is expired. PostgreSQL 13 on Debian 11."
    (stored,) = rag.remember([{"role": "user", "content": said}], user_id="p", thread_id="t")
    assert said in stored["text"]


def test_a_secret_in_message_metadata_is_not_kept_but_ids_are() -> None:
    rag = make_offline_store_agent()
    key = "sk-proj-abcDEF1234567890abcdefGHIJKLmnopqrstuv"
    message_id = "msg_AbCdEfGh1234567890IjKlMnOpQrSt"  # random-looking, but an id
    rag.remember(
        [
            {
                "role": "user",
                "content": "How do backups work?",
                "metadata": {"id": message_id, "api_key": key, "note": f"key {key}"},
            }
        ],
        user_id="m",
        thread_id="t",
    )
    (hit,) = rag.recall("backups", user_id="m")
    assert hit["sources"][0]["id"] == message_id
    assert key not in json.dumps([hit, rag.list_memories("m")])


def test_a_key_at_the_length_limit_is_masked_whole_not_cut_first() -> None:
    rag = make_offline_store_agent()
    key = "sk-proj-Ab3dEf6hIj9kLm2nOp5qRs8tUv1wXy4z"
    for at in (1000, 1985, 1995):  # the key straddles where a long message is cut
        message = ("word " * 800)[:at] + key + " is my key" + " more" * 300
        stored = rag.remember(
            [{"role": "user", "content": message}], user_id="k", thread_id=f"t{at}"
        )
        assert not any(key[:10] in s["text"] for s in stored), at


def test_what_ends_a_long_message_is_remembered() -> None:
    """A long paste, then the statement and the question: memory keeps both ends."""
    rag = make_offline_store_agent(checkpointer=MemorySaver())
    rag.add_documents(PG_DOCS)
    filler = "We have five engineers and many dashboards for the web shop. " * 100
    rag.invoke(filler + STATEMENT, cfg("long", "t1"))
    state = rag.invoke(FOLLOW_UP, cfg("long", "t2"))
    assert SAID in state.memory_context


def test_an_empty_thread_id_is_refused_as_forget_refuses_it() -> None:
    rag = make_offline_store_agent()
    for blank in ("", "   "):
        with pytest.raises(ConfigError, match="thread_id must not be empty"):
            rag.remember([{"role": "user", "content": "hello"}], user_id="v", thread_id=blank)
    assert rag.list_memories("v") == []


def test_words_typed_full_width_are_found_as_typed() -> None:
    """A Japanese input method types "ＩＮＣ－２０９３１"; the question asking for it is
    read in its NFKC form, and so is the memory."""
    rag = make_offline_store_agent()
    rag.remember(
        [{"role": "user", "content": "My incident ticket is ＩＮＣ－２０９３１."}],
        user_id="ann",
        thread_id="t",
    )
    rag.remember(
        [{"role": "user", "content": "The quarterly budget review moved to Friday."}],
        user_id="ann",
        thread_id="u",
    )
    (first, *_) = rag.recall("ＩＮＣ－２０９３１", user_id="ann")
    assert "INC-20931" in first["text"]


def test_unicode_separators_and_spaces_part_the_words_they_stand_between() -> None:
    """A line or paragraph separator (U+2028, U+2029) and the narrow and medium spaces
    (U+202F, U+205F) stand between words: each is stored as a space, and the words stay
    apart (before, all four were deleted as invisible: "Hosts:alpha runs nginxbeta"), so
    a question finds the host by its name."""
    rag = make_offline_store_agent()
    said = "Hosts:\u2028alpha runs nginx\u2029beta runs postgres\u202fand\u205fgamma runs redis"
    (stored,) = rag.remember([{"role": "user", "content": said}], user_id="bob", thread_id="t")
    text = "user: Hosts: alpha runs nginx beta runs postgres and gamma runs redis"
    assert stored["text"] == text
    (hit,) = rag.recall("what does gamma run?", user_id="bob")
    assert hit["text"] == text
    # a question of separators alone is still empty
    with pytest.raises(ConfigError, match="non-empty"):
        rag.recall("\u2028\u2029\u202f", user_id="bob")


def remembered_at(at: str, user: str) -> tuple[Any, dict[str, Any]]:
    """An offline agent that remembered one line of ``user`` said at ``at``, and what it
    stored of it."""
    rag = make_offline_store_agent()
    (stored,) = rag.remember(
        [{"role": "user", "content": "An old note"}], user_id=user, thread_id="t", at=at
    )
    return rag, stored


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("timestamp", "2024-03-14T10:30:00+01:00"),
        ("created_at", "2024-03-14T09:30:00Z"),
        ("create_time", 1710408600.0),  # a ChatGPT export: seconds since 1970
        ("timestamp", 1710408600000),  # milliseconds
        ("at", datetime(2024, 3, 14, 9, 30, tzinfo=timezone.utc)),
    ],
)
def test_an_imported_conversation_is_dated_by_its_messages_times(key: str, value: Any) -> None:
    """An export's per-message times date what is stored and recalled; dropped, a
    conversation from 2024 read as said today."""
    rag = make_offline_store_agent()
    messages = [
        {"role": "user", "content": "I adopted a greyhound called Pip.", key: value},
        {"role": "assistant", "content": "Congratulations on Pip!"},
    ]
    (stored,) = rag.remember(messages, user_id="u", thread_id="t")
    assert stored["at"].startswith("2024-03-14T09:30:00")
    hit = rag.recall("What is my dog called?", user_id="u")[0]
    assert "Pip" in hit["text"] and hit["at"].startswith("2024-03-14T09:30:00")
    listed = rag.list_memories("u")
    assert [m["at"][:10] for m in listed] == ["2024-03-14"]


def test_a_time_kept_only_in_a_messages_metadata_dates_it() -> None:
    """A message that gives its time only in its metadata (where some apps keep it) is
    dated by it, as by its own; in the metadata, a value that is not a time is the user's
    data, not an error. (Before, such a conversation read as said today.)"""
    rag = make_offline_store_agent()
    dict_message = {
        "role": "user",
        "content": "I adopted a greyhound called Pip.",
        "metadata": {"msg": 1, "timestamp": "2024-03-14T09:30:00Z"},
    }
    langchain_message = HumanMessage(
        "We moved to Leeds last spring.", metadata={"created_at": 1710408600}
    )
    for i, message in enumerate([dict_message, langchain_message]):
        (stored,) = rag.remember([message], user_id="u", thread_id=f"t{i}")
        assert stored["at"].startswith("2024-03-14T09:30:00"), stored
    hit = rag.recall("What is my dog called?", user_id="u")[0]
    assert "Pip" in hit["text"] and hit["at"].startswith("2024-03-14T09:30:00")
    assert hit["sources"] == [{"msg": 1, "timestamp": "2024-03-14T09:30:00Z"}]
    # the message's own time comes first; a metadata value that is no time is left alone
    own = {**dict_message, "timestamp": "2025-01-02T08:00:00Z"}
    (stored,) = rag.remember([own], user_id="v", thread_id="a")
    assert stored["at"].startswith("2025-01-02T08:00")
    for value in ("HQ", 20260105, "2999-01-01T00:00:00Z"):
        odd = {"role": "user", "content": f"Lunch is at {value}.", "metadata": {"at": value}}
        (stored,) = rag.remember([odd], user_id="w", thread_id=f"odd-{value}", at="2025-02-03")
        assert stored["at"].startswith("2025-02-03"), (value, stored)
        (stored,) = rag.remember([odd], user_id="x", thread_id=f"odd-{value}")
        assert stored["at"][:4] == str(datetime.now(timezone.utc).year), (value, stored)


@pytest.fixture
def in_tokyo(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """This process's local time is UTC+9 (a fixed zone: no tz database needed)."""
    monkeypatch.setenv("TZ", "JST-9")
    time.tzset()
    yield
    monkeypatch.undo()
    time.tzset()


def test_earlier_questions_do_not_push_out_what_the_user_said_about_themselves() -> None:
    """Eight earlier questions on the subject, each stored with its answer, took every place
    in the prompt, and "Which PostgreSQL version am I on?" lost the one exchange that said
    which (a hostile pass)."""
    rag = make_offline_store_agent()
    rag.add_documents(
        ["Upgrades: run pg_upgradecluster to move a PostgreSQL cluster to a new major version."]
    )
    rag.remember(
        [
            {"role": "user", "content": "My cluster runs PostgreSQL 13 on Debian 11."},
            {"role": "assistant", "content": "Noted."},
        ],
        user_id="u",
        thread_id="mon",
        at="2026-11-02",
    )
    for n, asked in enumerate(
        [
            "How do I upgrade PostgreSQL?",
            "What does pg_upgradecluster do?",
            "How long does a PostgreSQL upgrade take?",
            "Can I undo a PostgreSQL upgrade?",
            "Do I need to stop PostgreSQL to upgrade?",
            "Is a PostgreSQL upgrade safe?",
            "Which PostgreSQL version should I upgrade to?",
            "How do I check my PostgreSQL upgrade worked?",
        ]
    ):
        rag.invoke(asked, cfg("u", f"s{n}"))
    rag.drain_background()
    state = rag.invoke("Which PostgreSQL version am I on, and how do I upgrade it?", cfg("u", "x"))
    assert state.memory_context.count("\n- [") == 8  # the places were all taken
    assert "PostgreSQL 13 on Debian 11" in state.memory_context
    assert "you said: “My cluster runs PostgreSQL 13 on Debian 11.”" in state.answer
    # an aside that names the subject takes no place from a small recall (a second hostile
    # pass: "I burned some logs ..." came second for "How did you tell me to ... logs?")
    rag.remember(
        [{"role": "user", "content": "My upgrade notes got wet, PostgreSQL docs and all."}],
        user_id="u",
        at="2026-11-03",
    )
    hits = rag.recall("How did you tell me to upgrade PostgreSQL?", user_id="u", k=2)
    assert all("got wet" not in h["text"] for h in hits), hits


@pytest.mark.parametrize("ending", [".\nWhy does the worker fail?", " and the worker fails"])
def test_what_the_user_said_after_a_pasted_log_reaches_the_prompt(ending: str) -> None:
    """A log's lines, joined, read as one sentence with the user's own words at its end:
    too long to be shown whole, it was never shown, and "Which OS do I run?" got the
    exchange without "Ubuntu" (a hostile pass)."""
    rag = make_offline_store_agent()
    rag.add_documents(["Workers: a worker retries its database connection."], progress=False)
    log = "\n".join(
        f"10:{i:02d}:00 ERROR worker-{i} failed to reach db-{i % 5}.internal" for i in range(12)
    )
    rag.invoke(f"Here is my log:\n{log}\nI run Ubuntu 22.04 on that box{ending}", cfg("u", "a"))
    rag.drain_background()
    shown = rag.invoke("Which OS do I run?", cfg("u", "b")).memory_context
    assert "I run Ubuntu 22.04 on that box" in shown, shown


#: A statement, the later one that changed it (naming the same thing), and a question about
#: how things stand now (from a hostile pass: 6 of 8 such recalled the older first).
CHANGED = [
    ("I live in Berlin.", "I moved from Berlin to Lisbon.", "Where do I live now?"),
    ("My manager is Sarah.", "Sarah left; Tom is my new boss.", "Who is my manager now?"),
    ("My rate is 90 EUR per hour.", "I raised my rate to 110 EUR.", "What is my hourly rate now?"),
    ("My car is a red Golf.", "I sold the Golf and bought a Tesla.", "What car do I drive currently?"),
    ("We use Jenkins for CI.", "We finally migrated CI from Jenkins to GitHub Actions.", "What do we use for CI these days?"),
]  # fmt: skip


@pytest.mark.parametrize("kind", ["store", "mem0"])
def test_a_question_about_now_recalls_the_statement_that_changed_it_first(
    build: Callable[..., Any], kind: str
) -> None:
    """The newer statement names what the older one named ("Berlin"), in other words than
    the question: by its own words it came second, or not at all, and the offline answer
    quoted where the user used to live."""
    rag = build(kind)
    for n, (old, new, question) in enumerate(CHANGED):
        user = f"u{n}"
        rag.remember(
            [{"role": "user", "content": old}], user_id=user, thread_id="a", at="2026-02-01"
        )
        rag.remember(
            [{"role": "user", "content": new}], user_id=user, thread_id="b", at="2026-08-01"
        )
        (first,) = rag.recall(question, user_id=user, k=1)
        assert new in first["text"], (question, first["text"])
        # recall lists them in the prompt's order, whatever k (by score, k=2 put the older first)
        both = [h["text"] for h in rag.recall(question, user_id=user, k=2)]
        assert new in both[0] and old in both[1], both
        state = rag.invoke(question, cfg(user, "now"))
        assert new in state.memory_context.split("\n- ")[1], state.memory_context


#: A statement, a later mention of its name that changes nothing, and a question about now
#: (a second hostile pass: the mention took first place), then the same with an update too.
MENTIONED = [
    (["My partner is Sarah.", "I had lunch with my colleague Sarah Jones today."], "Who is my partner currently?", 0),
    (["I drive a Tesla Model 3.", "I saw a Tesla crash on the news, scary."], "What car do I drive now?", 0),
    (["I drive a Honda Civic.", "I sold the Honda and bought a Toyota Prius.",
      "The guy who bought my Honda says it runs great."], "What car do I drive now?", 1),
    # another person's move, and one only thought of (a third hostile pass: each came first)
    (["I live in Berlin.", "My brother just moved from Berlin to Oslo."], "Where do I live now?", 0),
    (["I live in Berlin.", "I might move from Berlin to Oslo, not sure yet."], "Where do I live now?", 0),
    (["I work at Spotify.", "If I left Spotify I would join Klarna."], "Where do I work now?", 0),
    # an aside naming the employer, without a floor on how much it bears (a fourth pass)
    (["I work at Spotify as a data engineer.", "I left my umbrella at the Spotify office."], "Where do I work now?", 0),
]  # fmt: skip


@pytest.mark.parametrize(
    ("question", "window"),
    [
        ("What did I say in our Monday chat?", True),
        ("How was my Sunday?", True),
        ("Who brought cake on Tuesday?", True),
        ("Who won Saturday's game?", True),
        ("What did I tell you friday?", True),
        ("When is my Friday standup?", False),
        ("What is scheduled for Friday?", False),
        ("Is Friday's dinner cancelled?", False),
        ("What's due Friday?", False),
        ("Do we meet every Monday?", False),
    ],
)
def test_a_weekday_opens_a_window_in_a_question_about_the_past(question: str, window: bool) -> None:
    """A weekday without "last" points back to that day only when the question asks about
    the past, by its first auxiliary or, without one, a verb in the past: a hostile pass
    found "What is scheduled for Friday?" read as past (any word in -ed was) and "Who
    brought cake on Tuesday?" read as not."""
    from retrievalagent.memory._temporal import time_ref

    found = time_ref(question, datetime(2026, 12, 2, 12, tzinfo=timezone.utc))
    assert bool(found and found.start) is window, (question, found)


@pytest.mark.parametrize(
    "asked",
    [
        "When is my Friday standup?",
        "When is our Friday standup?",
        # a hostile pass of the first version, which read the word before the weekday
        "Is my standup on Friday?",
        "What time is Friday standup?",
    ],
)
def test_a_weekday_that_names_a_meeting_is_no_time_window(asked: str) -> None:
    """ "my Friday standup" says which standup, not "what I said last Friday": read as a
    window, the eight chats of last Friday came first and the standup last (a hostile
    pass). A question about the past still asks for that day ("What did I ask on Friday?",
    "... in our Friday chat?")."""
    rag = make_offline_store_agent()
    said = "My team standup is every Friday at 9am."
    rag.remember([{"role": "user", "content": said}], user_id="u", thread_id="s", at="2026-03-02")
    for n, topic in enumerate(["rsync flags", "tar excludes", "cron syntax", "ssh keys"]):
        rag.remember(
            [{"role": "user", "content": f"How do I use {topic}?"}],
            user_id="u",
            thread_id=f"f{n}",
            at=f"2026-03-20T1{n}:00:00+00:00",
        )
    now = "2026-03-24T12:00:00+00:00"
    first = rag.recall(asked, user_id="u", k=3, now=now)[0]
    assert said in first["text"], first["text"]
    for past in ("What did I ask on Friday?", "What did I ask in our Friday chat?"):
        friday = rag.recall(past, user_id="u", k=3, now=now)
        assert "How do I use" in friday[0]["text"], (past, friday)


@pytest.mark.parametrize(("said", "question", "first"), MENTIONED)
def test_a_later_mention_of_the_same_name_is_no_update(
    said: list[str], question: str, first: int
) -> None:
    rag = make_offline_store_agent()
    for day, words in enumerate(said, 1):
        rag.remember([{"role": "user", "content": words}], user_id="u", at=f"2026-01-0{day}")
    (hit,) = rag.recall(question, user_id="u", k=1)
    assert said[first] in hit["text"], hit["text"]


@pytest.mark.parametrize("kind", ["store", "mem0"])
def test_recall_with_a_small_k_keeps_what_the_question_found_over_a_preference(
    build: Callable[..., Any], kind: str
) -> None:
    """A preference is recalled whatever the question (score 1): with ``k=1`` it took the
    place of the one memory the question found (a hostile pass)."""
    rag = build(kind)
    rag.remember([{"role": "user", "content": "Server srv0213 is in room 4."}], user_id="u")
    rag.remember([{"role": "user", "content": "Keep answers short."}], user_id="u")
    (hit,) = rag.recall("which room is srv0213 in?", user_id="u", k=1)
    assert "room 4" in hit["text"]
    kinds = [h["kind"] for h in rag.recall("which room is srv0213 in?", user_id="u", k=5)]
    assert kinds[0] == "conversation" and "preference" in kinds
    # a question about a preference has it first (a second hostile pass: the teacher came)
    rag.remember([{"role": "user", "content": "Please answer in German from now on."}], user_id="g")
    rag.remember([{"role": "user", "content": "My German teacher is called Jonas."}], user_id="g")
    (hit,) = rag.recall("Which language do I want answers in?", user_id="g", k=1)
    assert (hit["kind"], hit["text"]) == ("preference", "Answer in German."), hit


@pytest.mark.parametrize("asked", ["recall", "invoke"])
def test_today_is_this_machines_day_when_the_turn_gives_no_time(
    monkeypatch: pytest.MonkeyPatch, asked: str
) -> None:
    """At 10 pm in New York it is already tomorrow in UTC: "today" read in UTC held nothing
    the user said today, and the answer quoted yesterday's purchase (a hostile pass; a
    naive ``at`` is this machine's time, and so is a turn's default now)."""
    from retrievalagent.memory import _temporal

    class TenPmInNewYork(datetime):
        @classmethod
        def now(cls, tz: Any = None) -> Any:
            moment = datetime(2026, 12, 8, 3, 0, tzinfo=timezone.utc)
            return moment.astimezone(tz) if tz else moment.astimezone().replace(tzinfo=None)

    monkeypatch.setenv("TZ", "EST+5")  # a fixed zone: no tz database needed
    time.tzset()
    monkeypatch.setattr(_temporal, "datetime", TenPmInNewYork)
    try:
        rag = make_offline_store_agent()
        rag.add_documents(["Returns: items can be returned within 30 days."], progress=False)
        for thread, said, at in [
            ("yesterday", "Today I bought a red toaster.", datetime(2026, 12, 6, 10, 0)),
            ("today", "Got a green kettle at the market.", datetime(2026, 12, 7, 10, 0)),
        ]:
            rag.remember([{"role": "user", "content": said}], user_id="u", thread_id=thread, at=at)
        question = "What did I buy today?"
        if asked == "recall":
            shown = rag.recall(question, user_id="u", k=1)[0]["text"]
        else:
            state = rag.invoke(question, {"configurable": {"user_id": "u", "thread_id": "t"}})
            shown = state.memory_context.split("\n- ")[1]
        assert "kettle" in shown and "toaster" not in shown, shown
    finally:
        monkeypatch.undo()
        time.tzset()


@pytest.mark.usefixtures("in_tokyo")
def test_a_naive_datetime_is_the_local_time_as_python_reads_it() -> None:
    """``at=datetime.now()`` is now, wherever the machine is: read as UTC, a conversation
    had now in Tokyo was stored nine hours ahead (and one from 09:30 there as 09:30 UTC).
    A string without a zone is UTC, as exports write their times."""
    rag = make_offline_store_agent()
    (now,) = rag.remember(
        [{"role": "user", "content": "The cat sleeps."}],
        user_id="u",
        thread_id="a",
        at=datetime.now(),
    )
    assert abs(datetime.fromisoformat(now["at"]) - datetime.now(timezone.utc)) < timedelta(
        minutes=1
    )
    (morning,) = rag.remember(
        [{"role": "user", "content": "The dog barks."}],
        user_id="u",
        thread_id="b",
        at=datetime(2024, 3, 14, 9, 30),
    )
    assert morning["at"].startswith("2024-03-14T00:30:00")
    (exported,) = rag.remember(
        [{"role": "user", "content": "The owl hoots.", "timestamp": "2024-03-14T09:30:00"}],
        user_id="u",
        thread_id="c",
    )
    assert exported["at"].startswith("2024-03-14T09:30:00")


@pytest.mark.parametrize("kind", SYNC_BACKENDS)
def test_message_times_date_memories_on_every_backend(build: Callable[..., Any], kind: str) -> None:
    rag = build(kind)
    messages = [
        {"role": "user", "content": "My cluster runs PostgreSQL 13.", "create_time": 1710408600},
        {"role": "assistant", "content": "Noted: PostgreSQL 13."},
    ]
    rag.remember(messages, user_id="alice", thread_id="old")
    hits = [h for h in rag.recall("Which PostgreSQL version do I run?", user_id="alice")]
    assert hits and all(h["at"].startswith("2024-03-14") for h in hits), hits


def test_each_exchange_is_dated_by_its_own_messages() -> None:
    """A thread that went on for months: what was said in June is recalled as June's."""
    rag = make_offline_store_agent()
    rag.remember(
        [
            {"role": "user", "content": "I moved to Berlin.", "timestamp": "2024-01-01T10:00Z"},
            {"role": "assistant", "content": "Nice.", "timestamp": "2024-01-01T10:01Z"},
            {"role": "user", "content": "I adopted a cat named Miso.", "timestamp": "2024-06-01"},
            {"role": "assistant", "content": "Lovely."},
            {"role": "user", "content": "Miso sleeps on my keyboard."},  # no time: as before it
        ],
        user_id="md",
    )
    dated = {m["text"].split("\n")[0]: m["at"][:10] for m in rag.list_memories("md")}
    assert dated == {
        "user: I moved to Berlin.": "2024-01-01",
        "user: I adopted a cat named Miso.": "2024-06-01",
        "user: Miso sleeps on my keyboard.": "2024-06-01",
    }, dated
    june = rag.recall("What did I say on June 1 2024?", user_id="md", now="2024-07-01T00:00Z")
    assert june and "Miso" in june[0]["text"] and june[0]["at"].startswith("2024-06-01")


def test_message_times_read_as_a_user_would_give_them() -> None:
    """numpy and Decimal numbers (a data frame's), a LangChain message's extra field, a
    blank time skipped; an ``at`` given wins, so it also gets round a time that is broken."""
    import decimal

    import numpy as np

    rag = make_offline_store_agent()
    for user, value in [("np", np.int64(1710408600)), ("dec", decimal.Decimal("1710408600"))]:
        (stored,) = rag.remember(
            [{"role": "user", "content": "I row on the Thames.", "create_time": value}],
            user_id=user,
        )
        assert stored["at"].startswith("2024-03-14T09:30"), (user, stored["at"])
    (stored,) = rag.remember(
        [HumanMessage("I keep bees on the roof.", timestamp="2024-02-02T08:00:00Z")], user_id="lc"
    )
    assert stored["at"].startswith("2024-02-02T08:00")
    (stored,) = rag.remember(
        [
            {
                "role": "user",
                "content": "I sing in a choir.",
                "timestamp": "  ",
                "created_at": "2024-04-04",
            }
        ],
        user_id="blank",
    )
    assert stored["at"].startswith("2024-04-04")
    (stored,) = rag.remember(
        [{"role": "user", "content": "I fly kites.", "timestamp": "garbage"}],
        user_id="given",
        at="2024-06-01T12:00:00Z",
    )
    assert stored["at"].startswith("2024-06-01T12:00")


def test_a_message_key_nothing_reads_is_named_in_a_warning() -> None:
    """A misspelt key would lose what it holds without a word: the call goes on, warned
    at the caller's line; OpenAI's own message keys and the time keys are not warned of."""
    rag = make_offline_store_agent()
    messages = [
        {"role": "user", "content": "Bob here: my van is a Ford Transit.", "nmae": "Bob"},
        {"role": "assistant", "content": "Noted.", "tool_calls": [], "refusal": None},
        {"role": "user", "content": "It is white.", "timestamp": "2024-05-02", "mood": "ok"},
    ]
    with pytest.warns(UserWarning, match=r"message 0's 'nmae', message 2's 'mood'") as caught:
        stored = rag.remember(messages, user_id="u", thread_id="t")
    assert stored and caught[0].filename == __file__
    assert "tool_calls" not in str(caught[0].message)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        rag.remember(messages[1:2], user_id="u", thread_id="t2")
    many = [{"messages": messages[:1], "thread_id": "m"}, {"messages": messages, "thread_id": "n"}]
    with pytest.warns(UserWarning, match=r"conversations\[1\] message 2's 'mood'") as caught:
        rag.remember_many(many, user_id="v")
    assert caught[0].filename == __file__

    async def imported() -> None:
        with pytest.warns(UserWarning, match="message 0's 'nmae'") as caught:
            await rag.aremember_many(many, user_id="w")
        assert caught[0].filename == __file__
        with pytest.warns(UserWarning, match="message 0's 'nmae'") as caught:
            await rag.aremember(messages, user_id="x")
        assert caught[0].filename == __file__

    asyncio.run(imported())


def test_message_times_date_exchanges_unless_at_is_given() -> None:
    rag = make_offline_store_agent()
    messages = [
        {"role": "user", "content": "My boiler is a Vaillant ecoTEC.", "timestamp": "2024-05-02"},
        {"role": "assistant", "content": "Noted.", "timestamp": "2024-05-02T10:01:00Z"},
        {"role": "user", "content": "It was fitted in 2019.", "timestamp": "2024-05-01T23:00Z"},
    ]
    stored = rag.remember_many([{"messages": messages, "thread_id": "a"}], user_id="u")
    # each exchange by the earliest time of its own messages
    assert [m["at"][:16] for m in stored] == ["2024-05-02T10:01", "2024-05-01T23:00"]
    stored = rag.remember(messages, user_id="v", thread_id="b", at="2025-01-01T08:00:00Z")
    assert stored and all(m["at"].startswith("2025-01-01T08:00") for m in stored)


def test_a_time_in_utc_may_end_in_a_lower_case_z() -> None:
    """RFC 3339 allows "z" for "Z"."""
    _, stored = remembered_at("2026-03-14T09:30:00z", "d")
    assert stored["at"].startswith("2026-03-14T09:30:00")


def test_conversations_whose_message_ids_repeat_are_all_kept() -> None:
    """An export numbering each conversation's messages from 1, or putting the
    conversation's id on every row: different words are different memories."""
    rag = make_offline_store_agent()
    day1 = [
        {"role": "user", "content": "My cat is called Miso.", "id": 1},
        {"role": "assistant", "content": "Nice name.", "id": 2},
    ]
    day2 = [
        {"role": "user", "content": "I moved to Porto last month.", "id": 1},
        {"role": "assistant", "content": "Lovely city.", "id": 2},
    ]
    assert len(rag.remember(day1, user_id="ann", thread_id="dm", at="2026-03-01")) == 1
    assert len(rag.remember(day2, user_id="ann", thread_id="dm", at="2026-03-02")) == 1
    assert len(rag.remember(day2, user_id="ann", thread_id="dm", at="2026-03-02")) == 0
    assert "Porto" in rag.recall("Where did I move to?", user_id="ann")[0]["text"]
    same_id = [
        {"role": "user", "content": "My dog is called Rex.", "id": "conv-7"},
        {"role": "assistant", "content": "Good dog.", "id": "conv-7"},
        {"role": "user", "content": "I work night shifts at the hospital.", "id": "conv-7"},
    ]
    stored = rag.remember(same_id, user_id="bob", thread_id="t")
    assert len(stored) == 2 and "Rex" in stored[0]["text"] + stored[1]["text"]


def test_the_same_conversation_imported_at_another_time_is_stored_once() -> None:
    rag = make_offline_store_agent()
    conversation = [
        {"role": "user", "content": "ok"},
        {"role": "assistant", "content": "Noted."},
        {"role": "user", "content": "We run PostgreSQL 13."},
        {"role": "user", "content": "ok"},
    ]
    first = rag.remember(conversation, user_id="d", thread_id="x", at="2026-03-14T09:30:00Z")
    assert len(first) == 3  # "ok" said twice is two exchanges
    assert rag.remember(conversation, user_id="d", thread_id="x") == []
    assert rag.remember(conversation, user_id="d", thread_id="x", at="2026-01-01") == []
    assert len(rag.list_memories("d")) == 3


def test_a_turn_asked_again_after_its_reply_was_lost_is_remembered_once() -> None:
    """A cancelled turn can leave its question in the thread without the reply, after its
    memory write began; the user asks again: one memory, not two."""
    from langchain_core.messages import RemoveMessage

    rag = make_offline_store_agent(checkpointer=MemorySaver())
    rag.add_documents(PG_DOCS)
    rag.invoke("What is pg_dump?", cfg("c", "t"))
    rag.invoke(STATEMENT, cfg("c", "t"))
    rag.drain_background(10)
    config = cfg("c", "t")
    reply = rag.graph.get_state(config).values["messages"][-1]
    assert isinstance(reply, AIMessage)
    rag.graph.update_state(config, {"messages": [RemoveMessage(id=reply.id)]})
    rag.invoke(STATEMENT, cfg("c", "t"))  # asked again
    rag.drain_background(10)
    said = [m for m in rag.list_memories("c") if STATEMENT in m["text"]]
    assert len(said) == 1, said
    # the copy kept is the one the thread holds: not recalled into its own thread
    held = {m.id for m in rag.get_history("t")}
    assert {s["message_id"] for s in said[0]["sources"]} <= held
    state = rag.invoke("Which PostgreSQL version should I upgrade from?", cfg("c", "t"))
    assert SAID not in state.memory_context
    # asking the same words again later in the thread is a new exchange
    rag.invoke(STATEMENT, cfg("c", "t"))
    rag.drain_background(10)
    assert len([m for m in rag.list_memories("c") if STATEMENT in m["text"]]) == 2


def test_a_user_message_without_content_is_an_error_naming_it() -> None:
    rag = make_offline_store_agent()
    with pytest.raises(ConfigError, match=r"message 1 .*no 'content'"):
        rag.remember(
            [{"role": "user", "content": "hello"}, {"role": "user", "content": None}],
            user_id="n",
            thread_id="t",
        )
    assert rag.list_memories("n") == []


def test_a_conversation_from_the_first_millennium_keeps_its_date() -> None:
    rag, stored = remembered_at("0001-01-01T00:00:00Z", "y")
    assert stored["at"].startswith("0001-01-01T00:00:00")
    # shown to a user west of UTC, its day has no local form: it keeps its own, and the
    # turn answers (an OverflowError failed every later turn of the user)
    state = rag.invoke("What was my old note?", cfg("y", "t2", now="2026-03-20T12:00:00-05:00"))
    assert "- [0001-01-01" in state.memory_context, state.memory_context
    assert state.answer


def test_a_time_at_the_calendars_ends_answers_or_is_refused_never_overflows() -> None:
    """``now`` at 0001-01-01: "yesterday" and "last year" name no day there, so they give
    no window and the turn answers (an OverflowError failed it); a time with no UTC form,
    or too late to reckon a day after, is a ConfigError naming it."""
    rag = make_offline_store_agent()
    rag.add_documents(PG_DOCS)
    asked = "What did I say yesterday about the backups?"
    state = rag.invoke(asked, cfg("y", "t1", now="0001-01-01T00:00:00Z"))
    assert "pg_basebackup" in state.answer
    assert rag.recall("What did I say last year?", user_id="y", now="0001-06-01T00:00:00Z")
    with pytest.raises(ConfigError, match=r"now='0001-01-01T03:00:00\+05:00' is outside"):
        rag.recall(asked, user_id="y", now="0001-01-01T03:00:00+05:00")
    with pytest.raises(ConfigError, match=r"now='9999-12-31T23:00:00Z' is outside"):
        rag.recall(asked, user_id="y", now="9999-12-31T23:00:00Z")


def test_assistants_api_text_blocks_are_remembered_and_unreadable_ones_refused() -> None:
    """OpenAI Assistants messages hold ``{"type": "text", "text": {"value": ...}}``: their
    words are stored and recalled (they were dropped while the import reported success);
    a text block with no words to read is an error naming the message, nothing stored,
    while a live turn holding one still answers."""
    rag = make_offline_store_agent()
    rag.add_documents(PG_DOCS)

    def blocks(text: Any) -> list[dict[str, Any]]:
        return [{"type": "text", "text": text}]

    printer = {"value": "My printer is an HP LaserJet 4 on floor 3.", "annotations": []}
    rag.remember(
        [
            {"role": "user", "content": blocks(printer)},
            {"role": "assistant", "content": blocks({"value": "Noted.", "annotations": []})},
        ],
        user_id="oa",
        thread_id="asst",
    )
    (hit,) = rag.recall("Which printer do I have?", user_id="oa")
    assert hit["text"] == "user: My printer is an HP LaserJet 4 on floor 3. / assistant: Noted."
    for unreadable in ({"annotations": []}, None, ["words"]):
        with pytest.raises(ConfigError, match=r"message 1's content block 0 holds no text"):
            rag.remember(
                [
                    {"role": "user", "content": "hi"},
                    {"role": "user", "content": blocks(unreadable)},
                ],
                user_id="bad",
                thread_id="t",
            )
    with pytest.raises(ConfigError, match=r"message 0's content block 1 holds no text"):
        rag.remember([HumanMessage(["My car is red.", {"type": "text"}])], user_id="bad")
    assert rag.list_memories("bad") == []
    question = HumanMessage([{"type": "text", "text": STATEMENT}, *blocks({"x": 1})])
    assert "pg_dump" in rag.invoke({"messages": [question]}, cfg("live", "t")).answer


def test_metadata_given_on_a_langchain_message_comes_back_as_its_source() -> None:
    """``HumanMessage(..., metadata={...})`` is taken by LangChain as an extra field: it
    comes back in ``sources`` (it was dropped; only ``additional_kwargs["metadata"]`` was
    read), beside that one; not a dict, it is refused by remember and left out by a turn."""
    rag = make_offline_store_agent()
    rag.add_documents(PG_DOCS)
    (stored,) = rag.remember([HumanMessage(STATEMENT, metadata={"msg": 1})], user_id="lc")
    assert stored["sources"] == [{"msg": 1}]
    both = HumanMessage(FOLLOW_UP, metadata={"msg": 2}, additional_kwargs={"metadata": {"ts": 3}})
    (stored,) = rag.remember([both], user_id="lc", thread_id="t")
    assert stored["sources"] == [{"msg": 2, "ts": 3}]
    with pytest.raises(ConfigError, match="message 0's metadata must be a dict, not str"):
        rag.remember([HumanMessage(STATEMENT, metadata="slack")], user_id="bad")
    state = rag.invoke({"messages": [HumanMessage(STATEMENT, metadata="slack")]}, cfg("bad", "t"))
    assert "pg_dump" in state.answer
    assert rag.drain_background(10)["failed"] == 0
    (kept,) = said(rag.list_memories("bad"))
    assert kept["sources"][0]["role"] == "user"


class Colour(enum.Enum):
    YELLOW = "yellow"


@pytest.mark.parametrize("kind", ["store", "postgres"])
def test_metadata_with_dates_ids_and_decimals_is_kept_as_json_writes_them(
    build: Callable[..., Any], kind: str
) -> None:
    """A datetime in a message's metadata was refused ("not JSON"); the common values JSON
    has no type for are kept as LangGraph's stores write them, on every store alike."""
    rag = build(kind)
    ticket = uuid.UUID("12345678-1234-5678-1234-567812345678")
    metadata = {
        "when": datetime(2026, 1, 1),
        "sent": datetime(2026, 1, 1, 9, 30, tzinfo=timezone.utc),
        "day": date(2026, 1, 2),
        "alarm": dt_time(7, 15),
        "ticket": ticket,
        "price": decimal.Decimal("19.990"),
        "colour": Colour.YELLOW,
        "where": (51.5, -0.12),
        "tags": {"sail", "boat", "lake"},
        "nested": {"seen": [date(2025, 12, 31)], "ids": frozenset({3, 1, 2})},
    }
    message = {"role": "user", "content": "I have a yellow boat.", "metadata": metadata}
    (stored,) = rag.remember([message], user_id="ann", thread_id="boats", at="2026-01-03")
    kept = {
        "when": "2026-01-01T00:00:00",
        "sent": "2026-01-01T09:30:00+00:00",
        "day": "2026-01-02",
        "alarm": "07:15:00",
        "ticket": "12345678-1234-5678-1234-567812345678",
        "price": "19.990",
        "colour": "yellow",
        "where": [51.5, -0.12],
        "tags": ["boat", "lake", "sail"],
        "nested": {"seen": ["2025-12-31"], "ids": [1, 2, 3]},
    }
    assert stored["sources"] == [kept]
    (hit,) = [h for h in rag.recall("What boat do I have?", user_id="ann") if "boat" in h["text"]]
    assert hit["sources"] == [kept]
    (listed,) = rag.list_memories("ann")
    assert listed["sources"] == [kept]


def test_a_fact_about_the_user_keeps_no_secret_from_its_message(build: Callable[..., Any]) -> None:
    """A fact drawn from a message keeps that message's metadata as its source: masked
    as the exchange's is."""
    key = "sk-proj-ABCDEFGHIJKLMNOPQRSTUV12345"
    model = ScriptedChatModel(facts=[fact("database", "Runs PostgreSQL 13 on Debian 11.", 0)])
    rag = build("store", model=model)
    message: dict[str, Any] = {
        "role": "user",
        "content": f"My API key is {key}. Our cluster runs PostgreSQL 13 on Debian 11.",
        "metadata": {"msg": 7, "api_key": key, "note": "password: hunter22"},
    }
    rag.remember([message], user_id="f")  # titled after what was said
    (found,) = facts_of(rag.list_memories("f"))
    assert found["sources"][0]["msg"] == 7
    everything = json.dumps(rag.list_memories("f"))
    assert key not in everything and "hunter22" not in everything


class _WritesFail(InMemoryStore):
    """A store that refuses every write, quoting what it was given (as a driver's error
    may quote the row it could not store)."""

    def batch(self, ops: Any) -> Any:
        ops = list(ops)
        puts = [op for op in ops if isinstance(op, PutOp) and op.value is not None]
        if puts:
            raise ConnectionError(f"could not store {puts[0].value!r}")
        return super().batch(ops)

    async def abatch(self, ops: Any) -> Any:
        return self.batch(ops)


def test_a_failed_memory_write_logs_no_pasted_secret(caplog: pytest.LogCaptureFixture) -> None:
    """The answer still comes; the warning says the write failed, and neither what it was
    about nor the store's error carries the key the user pasted."""
    from retrievalagent import init_agent

    key = "sk-proj-AbCdEfGhIjKlMnOpQrStUv123456"
    rag = init_agent("hostile-log", backend_url=":memory:", memory_store=_WritesFail())
    rag.add_documents(["Backups: pg_basebackup takes a base backup of a cluster."])
    with caplog.at_level(logging.WARNING, logger="retrievalagent"):
        state = rag.invoke(
            f"My API key is {key}. How do backups work?", {"configurable": {"user_id": "u"}}
        )
        report = rag.drain_background(10)
    assert state.answer and report["failed"] >= 1
    logged = "\n".join(r.getMessage() for r in caplog.records)
    assert "memory write failed" in logged
    assert key not in logged and "sk-proj-AbCd" not in logged
    assert key not in repr(report)
    rag.close()


def _tickets(count: int) -> list[dict[str, Any]]:
    """``count`` near-alike conversations, each naming its own server."""
    return [
        {
            "messages": [
                {
                    "role": "user",
                    "content": f"Ticket {i}: server srv{i:04d} in room R{i % 17} fails with "
                    f"E{i * 7 % 1000}.",
                },
                {"role": "assistant", "content": "Logged."},
            ],
            "thread_id": f"ticket-{i}",
            "at": "2026-05-01",
        }
        for i in range(count)
    ]


def test_the_memory_holding_the_id_a_question_names_is_recalled_among_many_alike(
    make_agent: Callable[..., Any],
) -> None:
    """Among 300 near-alike memories (a user's tickets), the one holding the id the question
    names is what recall finds first and what the answer prompt shows: before, fusion
    ranked it below ten others for 6 of the 300 ids (61 and 213 among them), its words
    alone finding it, out of reach of recall(k=10) and of the prompt."""
    rag = make_agent("tickets", memory_store=InMemoryStore())
    rag.remember_many(_tickets(300), user_id="ops")
    for i in [61, 69, 83, 106, 129, 213, *range(0, 300, 23)]:
        question = f"which room is srv{i:04d} in"
        first = rag.recall(question, user_id="ops", k=10)[0]
        assert f"Ticket {i}:" in first["text"], (i, first["text"])
    state = rag.invoke("Which room is srv0213 in?", cfg("ops", "new"))
    assert any("srv0213" in line for line in conversation_lines(state.memory_context))


@pytest.mark.parametrize("kind", SYNC_BACKENDS)
def test_a_reply_imported_later_takes_the_place_of_the_question_stored_without_it(
    build: Callable[..., Any], kind: str
) -> None:
    """A weekly export of a thread ends with a question the assistant had not answered yet;
    next week's export has the answer. The answered exchange replaces the unanswered one:
    before, both were stored and both reached the answer prompt."""
    rag = build(kind)
    week1 = [
        {"role": "user", "content": "My cluster runs PostgreSQL 13 on Debian 11."},
        {"role": "assistant", "content": "Noted."},
        {"role": "user", "content": "How do I take a base backup of the replica?"},
    ]
    week2 = [*week1, {"role": "assistant", "content": "Run pg_basebackup against it."}]
    rag.remember(week1, user_id="alice", thread_id="ops", at="2026-03-01T09:00:00Z")
    rag.remember(week2, user_id="alice", thread_id="ops", at="2026-03-01T09:00:00Z")
    texts = sorted(m["text"] for m in rag.list_memories("alice") if m["kind"] == "conversation")
    backups = [t for t in texts if "base backup" in t]
    assert len(backups) == 1 and "pg_basebackup" in backups[0], texts
    assert any("PostgreSQL 13" in t for t in texts)  # the rest of the thread stays
    state = rag.invoke("How do I back up the replica?", cfg("alice", "new"))
    lines = [line for line in conversation_lines(state.memory_context) if "base backup" in line]
    assert len(lines) == 1 and "pg_basebackup" in lines[0], state.memory_context
    # the same export again stores nothing new
    assert rag.remember(week2, user_id="alice", thread_id="ops", at="2026-03-01T09:00:00Z") == []


@pytest.mark.parametrize("kind", ["mem0", "mem0_async", "memory"])
def test_on_mem0_the_memory_holding_the_id_a_question_names_is_recalled_among_many_alike(
    build: Callable[..., Any], kind: str
) -> None:
    """mem0 hands BM25 only its own nearest memories: among near-alike ones, the one
    holding the id the question names was out of that reach for 6 of 30 ids (of 300
    tickets). Those holding a named id are asked of mem0 too."""
    rag = build(kind)
    rag.remember_many(_tickets(120), user_id="ops")
    missed = [
        i
        for i in range(0, 120, 4)
        if f"Ticket {i}:"
        not in rag.recall(f"which room is srv{i:04d} in", user_id="ops", k=10)[0]["text"]
    ]
    assert missed == []
    # typed in other case, it is still found
    assert "Ticket 21:" in rag.recall("which room is SRV0021 in?", user_id="ops")[0]["text"]


def test_a_reply_import_that_fails_part_way_leaves_recall_as_the_store_holds_it(
    make_agent: Callable[..., Any],
) -> None:
    """The import that replaces an unanswered exchange with its answer fails after the
    store applied most of it: recall shows what the store holds (before, this process
    kept recalling the unanswered copy the store had erased, and not the answer)."""
    store = _PartWrites()
    rag = make_agent("partly", memory_store=store)
    asked = [{"role": "user", "content": "Which rack is the web server on? It is urgent."}]
    rag.remember(asked, user_id="u", thread_id="ops", at="2026-03-01T09:00:00Z")
    question = "Which rack is the web server on?"
    assert len(rag.recall(question, user_id="u")) == 1  # this process has the user loaded
    store.breaking = True
    answered = [*asked, {"role": "assistant", "content": "Rack E2."}]
    with pytest.raises(ConnectionResetError):
        rag.remember(answered, user_id="u", thread_id="ops", at="2026-03-01T09:00:00Z")
    held = sorted(m["id"] for m in rag.list_memories("u"))
    assert sorted(h["id"] for h in rag.recall(question, user_id="u")) == held


@pytest.mark.parametrize("kind", ["store", "mem0"])
def test_exports_of_a_thread_taken_mid_reply_or_imported_at_once_store_its_latest_form(
    build: Callable[..., Any], kind: str
) -> None:
    """Weekly snapshots of one thread in one import, the first taken before the reply,
    the second in the middle of it, the third after: one exchange is stored, with the whole
    reply (before: three, each reaching the prompt)."""
    question = {"role": "user", "content": "Where should I moor the Kestrel this winter?"}
    first = {"role": "assistant", "content": "Let me check the tide tables."}
    last = {"role": "assistant", "content": "Moor her at Pin Mill: it stays sheltered."}
    snapshots = [[question], [question, first], [question, first, last]]
    at = "2026-03-01T09:00:00Z"
    rag = build(kind)
    rag.remember_many(
        [{"messages": m, "thread_id": "boat", "at": at} for m in snapshots], user_id="u"
    )
    (kept,) = [m["text"] for m in rag.list_memories("u") if "Kestrel" in m["text"]]
    assert "Pin Mill" in kept
    rag.forget("u")
    for messages in snapshots:  # one export a week
        rag.remember(messages, user_id="u", thread_id="boat", at=at)
    (kept,) = [m["text"] for m in rag.list_memories("u") if "Kestrel" in m["text"]]
    assert "Pin Mill" in kept


def test_every_memory_holding_the_named_id_comes_before_those_alike(
    make_agent: Callable[..., Any],
) -> None:
    """Two memories name the host the question asks about (where it was, and where it has
    moved since), among 120 alike: both come first, so that recall(k=3) holds the move
    (before, hosts the question does not name came second and third); asked how things
    stand now, recall(k=1) keeps the move (before, where the host was)."""
    now = datetime(2026, 6, 15, 12, 0, tzinfo=timezone.utc)
    hosts = [
        {
            "messages": [
                {
                    "role": "user",
                    "content": f"Host srv{i:04d} is in server room R{i % 17} on floor {i % 5}.",
                }
            ],
            "thread_id": f"host-{i}",
            "at": (now - timedelta(days=30, minutes=i)).isoformat(),
        }
        for i in range(200, 320)
    ]
    hosts.append(
        {
            "messages": [{"role": "user", "content": "Host srv0213 is now in server room R42."}],
            "thread_id": "moved",
            "at": (now - timedelta(hours=2)).isoformat(),
        }
    )
    rag = make_agent("hosts", memory_store=InMemoryStore())
    rag.remember_many(hosts, user_id="ops")
    for question in ("which room is srv0213 in now?", "where is srv0213?"):
        found = rag.recall(question, user_id="ops", k=3, now=now)
        assert all("srv0213" in h["text"] for h in found[:2]), (question, found)
    # asked how things stand now, the one memory recall(k=1) keeps is where the host is now
    for question in ("which room is srv0213 in now?", "Where is srv0213 these days?"):
        [only] = rag.recall(question, user_id="ops", k=1, now=now)
        assert "R42" in only["text"], (question, only)

"""Load and isolation: 200 concurrent ``ainvoke`` calls across 50 users and 50 threads.

Embedded index; checkpointer MemorySaver or AsyncPostgresSaver (on the pool helper); memory
mem0 (``Memory`` / ``AsyncMemory``, offline config) or a LangGraph store (``InMemoryStore``
/ ``AsyncPostgresStore``). Each user's memory is seeded with a marker fact; every turn's
(scripted) grade asks to store a new fact naming the user and the turn. Then:

* no call fails;
* every recalled memory carries the caller's own marker, and the seeded one is recalled;
* every thread's history holds exactly its own four turns, in order;
* after ``adrain_background()`` every accepted write has landed in the backend.

All 200 calls are started at once; turns of one thread wait for each other (as a web
service serialises one conversation), so at most 50 run at the same moment.
"""

from __future__ import annotations

import asyncio
import re
import time
import uuid
from collections import defaultdict
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from langgraph.checkpoint.memory import MemorySaver
from langgraph.store.memory import InMemoryStore

from retrievalagent.memory import MemoryRecord, StoreBackend
from tests.support.chat import ScriptedChatModel
from tests.support.memory import mem0_config

pytestmark = pytest.mark.slow

USERS = THREADS = 50
TURNS = 4  # per thread: 200 calls
QUESTION = "Which port does the Lanternfish daemon listen on?"
CORPUS = [
    "Lanternfish listens on port 7311 by default; change it with --port.",
    "The vault passphrase is stretched with Argon2id using 64 MiB of memory.",
    "Snapshots older than 30 days are pruned by the retention job every night.",
]
_TAG = re.compile(r"\[t(\d\d) turn (\d)\]")
_MARK = re.compile(r"zq(\d\d)")


def _grade(messages: Any) -> dict[str, Any]:
    thread, turn = _TAG.findall("\n".join(str(m.content) for m in messages))[-1]
    return {
        "sufficient": True,
        "confidence": 0.9,
        "memory_worth_storing": True,
        "memory_confidence": 0.95,
        "memory_fact": f'"zq{thread}w{turn}" is called "port" in these documents',
    }


def _seed(user: int) -> str:
    return f'"zq{user:02d}marker" is called "port" in these documents'


@pytest.fixture
async def backends(
    request: pytest.FixtureRequest, tmp_path: Path, minilm: Any
) -> AsyncIterator[dict[str, Any]]:
    saver_kind, memory_kind = request.param
    out: dict[str, Any] = {"run": uuid.uuid4().hex[:8], "closers": []}
    if saver_kind == "postgres":
        url = request.getfixturevalue("postgres_url")
        from retrievalagent.persistence import apostgres_checkpointer, apostgres_store

        out["checkpointer"] = await apostgres_checkpointer(url, max_size=20)
        out["closers"].append(out["checkpointer"].conn.close)
    else:
        out["checkpointer"] = MemorySaver()
    if memory_kind == "mem0":
        if saver_kind == "postgres":
            from mem0 import AsyncMemory

            out["mem0_memory"] = AsyncMemory.from_config(mem0_config(tmp_path / "am0", minilm))
        else:
            from mem0 import Memory

            out["mem0_memory"] = Memory.from_config(mem0_config(tmp_path / "m0", minilm))
    elif saver_kind == "postgres":
        out["memory_store"] = await apostgres_store(
            request.getfixturevalue("postgres_url"), max_size=20
        )
        out["closers"].append(out["memory_store"].conn.close)
    else:
        out["memory_store"] = InMemoryStore()
    yield out
    for close in out["closers"]:
        await close()


async def _stored_texts(rag: Any, backends: dict[str, Any], user: str) -> list[str]:
    if "mem0_memory" in backends:
        memory = backends["mem0_memory"]
        got = memory.get_all(filters={"user_id": user}, top_k=1000)
        got = await got if asyncio.iscoroutine(got) else got
        return [r["memory"] for r in got["results"]]
    texts = []
    for kind in ("memories", "conversations"):  # facts, and what was said
        ns = StoreBackend.namespace(user, kind)
        texts += [
            item.value["text"] for item in await backends["memory_store"].asearch(ns, limit=1000)
        ]
    return texts


@pytest.mark.parametrize(
    "backends",
    [("memory", "store"), ("memory", "mem0"), ("postgres", "store"), ("postgres", "mem0")],
    ids=["MemorySaver-store", "MemorySaver-mem0", "PostgresSaver-store", "PostgresSaver-mem0"],
    indirect=True,
)
async def test_200_concurrent_turns_50_users_50_threads(
    make_agent: Any, backends: dict[str, Any]
) -> None:
    run = backends["run"]
    model = ScriptedChatModel(replies=["Lanternfish listens on port 7311 [1]."], grades=[_grade])
    kwargs = {
        k: backends[k] for k in ("checkpointer", "memory_store", "mem0_memory") if k in backends
    }
    rag = make_agent(
        "load", model=model, memory_relevance_threshold=0.5, thread_title="question", **kwargs
    )
    rag.add_documents(CORPUS, progress=False)
    users = [f"{run}-user{u:02d}" for u in range(USERS)]
    threads = [f"{run}-thread{t:02d}" for t in range(THREADS)]
    for u, user in enumerate(users):  # one marker fact per user, through the agent's backend
        await rag.memory.aadd(MemoryRecord(_seed(u), QUESTION, "", user))

    locks = [asyncio.Lock() for _ in threads]

    async def turn(t: int, k: int) -> tuple[int, int, Any]:
        async with locks[t]:  # one conversation answers one turn at a time
            config = {"configurable": {"thread_id": threads[t], "user_id": users[t]}}
            return t, k, await rag.ainvoke(f"{QUESTION} [t{t:02d} turn {k}]", config)

    start = time.monotonic()
    calls = [turn(t, k) for k in range(TURNS) for t in range(THREADS)]
    results = await asyncio.wait_for(asyncio.gather(*calls, return_exceptions=True), 600)
    elapsed = time.monotonic() - start
    errors = [r for r in results if isinstance(r, BaseException)]
    assert not errors, errors[:3]

    scheduled: dict[int, list[str]] = defaultdict(list)
    said: dict[int, list[str]] = defaultdict(list)
    for t, k, state in results:  # type: ignore[misc]
        assert state.user_id == users[t]
        owners = {int(m) for memory in state.memories for m in _MARK.findall(memory["text"])}
        assert owners == {t}, (t, k, [m["text"] for m in state.memories])  # own memories only
        assert any(memory["text"] == _seed(t) for memory in state.memories)
        for event in state.trace:
            if event["node"] == "write_memory" and event.get("scheduled"):
                scheduled[t].append(event["fact"])
            if event["node"] == "write_memory" and event["conversation"].get("scheduled"):
                said[t].append(state.question)  # the exchange, kept as conversation memory
    accepted = sum(len(v) for v in scheduled.values())
    assert accepted >= USERS * TURNS * 0.9  # nearly every turn asked for a write
    exchanges = sum(len(v) for v in said.values())
    assert exchanges == USERS * TURNS  # and every answered turn keeps its exchange
    accepted += exchanges

    report = await rag.adrain_background()
    assert report == {"landed": accepted, "failed": 0, "pending": 0}, report
    for t in range(THREADS):
        history = await rag.aget_history(threads[t])
        asked = [m.content for m in history if m.type == "human"]
        assert asked == [f"{QUESTION} [t{t:02d} turn {k}]" for k in range(TURNS)], asked
        assert [m.type for m in history] == ["human", "ai"] * TURNS
        stored = await _stored_texts(rag, backends, users[t])
        assert {int(m) for text in stored for m in _MARK.findall(text)} == {t}
        for fact in [_seed(t), *scheduled[t], *said[t]]:  # every accepted write landed
            assert any(fact in text for text in stored), (t, fact, stored)
    print(
        f"\n{len(results)} turns, {USERS} users, {THREADS} threads in {elapsed:.1f}s; "
        f"writes accepted {accepted}, landed {report['landed']}, lost 0"
    )

    if "memory_store" in backends and not isinstance(backends["memory_store"], InMemoryStore):
        for user in users:  # PostgreSQL is shared with other tests: leave it as it was
            await rag.aforget(user)
    if not isinstance(backends["checkpointer"], MemorySaver):
        for thread in threads:
            await backends["checkpointer"].adelete_thread(thread)

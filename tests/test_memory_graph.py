"""Memory inside the graph: recall, injection, storage decisions, background writes, failures."""

from __future__ import annotations

import asyncio
import json
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import SystemMessage
from langgraph.store.base import PutOp
from langgraph.store.memory import InMemoryStore

from retrievalagent.memory import BackgroundWrites
from retrievalagent.models._prompts import SEARCH_FACTS_PREFIX
from tests.support.chat import ScriptedChatModel
from tests.support.memory import mem0_config, trace_events

FACT = '"password" is called "passphrase" in these documents'
QUESTION = "Which environment variable can hold the encryption password?"
OTHER = "What is the minimum glibc version required on Linux?"


def grade(store: bool, confidence: float = 0.92, fact: str = FACT) -> dict[str, Any]:
    return {
        "sufficient": True,
        "confidence": 0.9,
        "memory_worth_storing": store,
        "memory_confidence": confidence,
        "memory_fact": fact if store else "",
    }


class SlowStore(InMemoryStore):
    """A real InMemoryStore whose writes take ``delay`` s, or fail, and whose reads can too."""

    def __init__(self, *args: Any, delay: float = 0.0, put_error: Exception | None = None,
                 search_error: Exception | None = None, search_delay: float = 0.0,
                 **kwargs: Any) -> None:  # fmt: skip
        super().__init__(*args, **kwargs)
        self.delay, self.put_error = delay, put_error
        self.search_error, self.search_delay = search_error, search_delay
        self.puts = 0

    # Every store call goes through batch/abatch (search and put included).
    def batch(self, ops: Any) -> Any:
        ops = list(ops)
        if any(isinstance(op, PutOp) for op in ops):
            time.sleep(self.delay)
            if self.put_error is not None:
                raise self.put_error
            result = super().batch(ops)
            self.puts += 1
            return result
        time.sleep(self.search_delay)
        if self.search_error is not None:
            raise self.search_error
        return super().batch(ops)

    async def abatch(self, ops: Any) -> Any:
        ops = list(ops)
        if any(isinstance(op, PutOp) for op in ops):
            await asyncio.sleep(self.delay)
            if self.put_error is not None:
                raise self.put_error
            result = await super().abatch(ops)
            self.puts += 1
            return result
        await asyncio.sleep(self.search_delay)
        if self.search_error is not None:
            raise self.search_error
        return await super().abatch(ops)


@pytest.fixture
def docs_agent(make_agent: Callable[..., Any], sample_docs: Path) -> Callable[..., Any]:
    """An agent over the sample docs (vectors are memoised across the session)."""

    def build(**kwargs: Any) -> Any:
        agent = make_agent("memory", **kwargs)
        agent.add_documents(sample_docs, progress=False)
        return agent

    return build


def teach(agent: Any, user: str, fact: str = FACT, question: str = QUESTION) -> None:
    """Store a memory through the agent's own backend, as write_memory does."""
    from retrievalagent.memory import MemoryRecord

    agent.memory.add(MemoryRecord(fact=fact, question=question, answer="", user_id=user))


# -- trace shapes (DESIGN.md section 3) -------------------------------------------------------
def test_read_memory_fired_shape_and_state(docs_agent: Callable[..., Any]) -> None:
    rag = docs_agent(memory_store=InMemoryStore())
    teach(rag, "alice")
    teach(rag, "alice", '"kill" is called "terminate" in these documents', "How do I kill it?")
    state = rag.invoke(QUESTION, config={"configurable": {"user_id": "alice"}})
    (event,) = trace_events(state, "read_memory")
    assert event["memories"] == f"- {FACT}"  # the spec's shape: the recalled text only
    assert event["n_kept"] == 1 and event["n_scanned"] == 2 and event["threshold"] == 0.7
    assert event["items"][0]["kind"] == "search_fact" and event["items"][0]["text"] == FACT
    assert state.memory_context == f"{SEARCH_FACTS_PREFIX}- {FACT}"  # what the prompt got
    assert state.memories[0]["text"] == FACT


def test_read_memory_below_threshold_shape(docs_agent: Callable[..., Any]) -> None:
    rag = docs_agent(memory_store=InMemoryStore())
    teach(rag, "alice")
    state = rag.invoke(OTHER, config={"configurable": {"user_id": "alice"}})
    (event,) = trace_events(state, "read_memory")
    assert event["skipped"] == "below_threshold" and event["threshold"] == 0.7
    assert event["n_scanned"] == 1 and 0.0 < event["best_score"] < 0.7
    assert state.memory_context == ""
    assert "memory_terms" not in trace_events(state, "lexical_search")[0]


def test_read_memory_below_threshold_counts_the_conversations_it_looked_at(
    docs_agent: Callable[..., Any],
) -> None:
    """A user with only conversation memories read "below_threshold" beside "n_scanned": 0
    (an outside check): what was looked at includes the exchanges."""
    rag = docs_agent(memory_store=InMemoryStore())
    rag.remember([{"role": "user", "content": "Our cat Mochi sleeps all day."}], user_id="al")
    state = rag.invoke(OTHER, config={"configurable": {"user_id": "al"}})
    (event,) = trace_events(state, "read_memory")
    assert event["skipped"] == "below_threshold" and event["n_kept"] == 0
    assert event["n_scanned"] == 1 and event["best_conversation"] is not None


def test_final_grade_store_and_write_memory_scheduled(docs_agent: Callable[..., Any]) -> None:
    model = ScriptedChatModel(grades=[grade(True, 0.92)])
    store = InMemoryStore()
    rag = docs_agent(model=model, memory_store=store)
    state = rag.invoke(QUESTION, config={"configurable": {"user_id": "alice"}})
    (fg,) = trace_events(state, "final_grade")
    keys = ("node", "sufficient", "confidence", "memory_should_store", "memory_confidence")
    expected = ("final_grade", True, 0.9, True, 0.92)
    assert tuple(fg[k] for k in keys) == expected
    assert state.memory_fact == FACT
    (wm,) = trace_events(state, "write_memory")
    assert wm["scheduled"] is True and wm["fact"] == FACT and wm["mode"] == "thread"
    assert wm["conversation"]["scheduled"] is True  # the exchange is kept too
    assert rag.drain_background() == {"landed": 2, "failed": 0, "pending": 0}
    (item,) = store.search(("memories", "alice"))
    assert item.value["text"] == FACT and item.value["question"] == QUESTION
    (said,) = store.search(("conversations", "alice"))
    assert said.value["text"].startswith(f"user: {QUESTION}")


@pytest.mark.parametrize(
    ("graded", "reason"),
    [(grade(False, 0.0), "not_worth_storing"), (grade(True, 0.8), "below_threshold")],
    ids=["not-worth", "low-confidence"],
)
def test_final_grade_not_store(
    docs_agent: Callable[..., Any], graded: dict[str, Any], reason: str
) -> None:
    rag = docs_agent(model=ScriptedChatModel(grades=[graded]), memory_store=InMemoryStore())
    state = rag.invoke(QUESTION, config={"configurable": {"user_id": "alice"}})
    (fg,) = trace_events(state, "final_grade")
    assert fg["memory_should_store"] is False
    assert fg["memory_confidence"] == graded["memory_confidence"]
    assert state.memory_fact == ""
    (wm,) = trace_events(state, "write_memory")
    assert wm["skipped"] == reason and "scheduled" not in wm
    assert rag.drain_background()["landed"] == 1  # the exchange only
    assert [m["kind"] for m in rag.list_memories("alice")] == ["conversation"]


def test_known_fact_is_not_stored_twice(docs_agent: Callable[..., Any]) -> None:
    store = InMemoryStore()
    rag = docs_agent(model=ScriptedChatModel(grades=[grade(True)]), memory_store=store)
    teach(rag, "alice")
    state = rag.invoke(QUESTION, config={"configurable": {"user_id": "alice"}})
    assert trace_events(state, "write_memory")[0]["skipped"] == "already_known"
    assert len(store.search(("memories", "alice"))) == 1


# -- injection ---------------------------------------------------------------------------------
def test_memory_changes_bm25_and_prompt_but_not_the_dense_vector(
    docs_agent: Callable[..., Any],
) -> None:
    model = ScriptedChatModel()
    rag = docs_agent(model=model, memory_store=InMemoryStore())
    teach(rag, "alice")
    dense: list[list[float]] = []
    sparse: list[Any] = []
    index = rag.index
    real_dense, real_sparse = index.dense_search, index.sparse_search

    def spy_dense(vector: Any, *a: Any, **k: Any) -> Any:
        dense.append(list(vector))
        return real_dense(vector, *a, **k)

    def spy_sparse(vector: Any, *a: Any, **k: Any) -> Any:
        sparse.append(vector)
        return real_sparse(vector, *a, **k)

    index.dense_search, index.sparse_search = spy_dense, spy_sparse  # type: ignore[method-assign]
    with_memory = rag.invoke(QUESTION, config={"configurable": {"user_id": "alice"}})
    without = rag.invoke(QUESTION, config={"configurable": {"user_id": "bob"}})
    assert with_memory.memory_context and not without.memory_context
    assert len(dense) == 2 and dense[0] == dense[1]  # exactly the same question vector
    encoder = rag.searcher.encoder
    passphrase = set(encoder.term_ids("passphrase"))
    assert passphrase <= set(sparse[0].indices) and not passphrase & set(sparse[1].indices)
    assert set(sparse[1].indices) < set(sparse[0].indices)  # one more group, nothing lost
    lexical = trace_events(with_memory, "lexical_search")[0]
    assert "passphrase" in lexical["memory_terms"].split()
    first, second = model.prompts[0][0], model.prompts[1][0]
    assert isinstance(first, SystemMessage)
    assert first.content.startswith(f"{SEARCH_FACTS_PREFIX}- {FACT}\n")
    assert not str(second.content).startswith(SEARCH_FACTS_PREFIX)
    assert trace_events(with_memory, "generate")[0]["search_hints"] is True


# -- background writes --------------------------------------------------------------------------
def test_invoke_returns_before_a_slow_write_lands(docs_agent: Callable[..., Any]) -> None:
    store = SlowStore(delay=0.5)
    rag = docs_agent(model=ScriptedChatModel(grades=[grade(True)]), memory_store=store)
    rag.invoke(QUESTION, config={"configurable": {"user_id": "alice"}})
    assert rag.background.counts()["pending"] == 2 and store.puts == 0  # fact and exchange
    assert rag.drain_background(timeout=10) == {"landed": 2, "failed": 0, "pending": 0}
    assert store.puts == 2


async def test_ainvoke_schedules_a_task_for_async_mem0(
    docs_agent: Callable[..., Any], tmp_path: Path, minilm: Any
) -> None:
    from mem0 import AsyncMemory

    mem = AsyncMemory.from_config(mem0_config(tmp_path / "am0", minilm))
    rag = docs_agent(model=ScriptedChatModel(grades=[grade(True)]), mem0_memory=mem)
    state = await rag.ainvoke(QUESTION, config={"configurable": {"user_id": "alice"}})
    assert trace_events(state, "write_memory")[0]["mode"] == "task"
    report = await rag.adrain_background(timeout=30)
    assert report == {"landed": 2, "failed": 0, "pending": 0}
    again = await rag.ainvoke(QUESTION, config={"configurable": {"user_id": "alice"}})
    assert FACT in again.memory_context


async def test_ainvoke_runs_a_sync_store_write_on_a_thread(
    docs_agent: Callable[..., Any],
) -> None:
    store = SlowStore(delay=0.3)
    rag = docs_agent(model=ScriptedChatModel(grades=[grade(True)]), memory_store=store)
    state = await rag.ainvoke(QUESTION, config={"configurable": {"user_id": "alice"}})
    assert trace_events(state, "write_memory")[0]["mode"] == "thread"
    assert (await rag.adrain_background(timeout=10))["landed"] == 2


def test_pending_writes_are_bounded() -> None:
    writes = BackgroundWrites(max_pending=2, timeout=10)
    release = threading.Event()
    for _ in range(2):
        assert writes.submit_thread(release.wait) < 50  # free slots: no wait
    threading.Timer(0.3, release.set).start()
    waited = writes.submit_thread(lambda: None)  # third: waits until a slot frees up
    assert waited >= 200
    assert writes.drain(timeout=5) == {"landed": 3, "failed": 0, "pending": 0}
    writes.close()


def test_drain_with_timeout_reports_pending() -> None:
    writes = BackgroundWrites(timeout=10)
    release = threading.Event()
    writes.submit_thread(release.wait)
    assert writes.drain(timeout=0.05) == {"landed": 0, "failed": 0, "pending": 1}
    release.set()
    assert writes.drain(timeout=5) == {"landed": 1, "failed": 0, "pending": 0}
    writes.close()


def test_hung_write_times_out_as_failed() -> None:
    writes = BackgroundWrites(timeout=0.2)
    release = threading.Event()
    writes.submit_thread(release.wait, "hung")
    report = writes.drain(timeout=5)
    release.set()
    assert report == {"landed": 0, "failed": 1, "pending": 0}
    assert writes.errors[0].startswith("TimeoutError")
    writes.close()


# -- failures never fail the answer ---------------------------------------------------------------
def test_write_error_is_counted_logged_and_traced(
    docs_agent: Callable[..., Any], tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    trace_file = tmp_path / "trace.jsonl"
    store = SlowStore(put_error=ConnectionError("store is down"))
    rag = docs_agent(
        model=ScriptedChatModel(grades=[grade(True)]), memory_store=store, trace_file=trace_file
    )
    state = rag.invoke(QUESTION, config={"configurable": {"user_id": "alice"}})
    assert state.answer
    assert rag.drain_background(timeout=10) == {"landed": 0, "failed": 2, "pending": 0}
    assert "store is down" in caplog.text
    lines = [json.loads(line) for line in trace_file.read_text().splitlines()]
    late = [e for rec in lines for e in rec["trace"] if e.get("late")]
    assert {e["error_type"] for e in late} == {"ConnectionError"} and len(late) == 2
    assert FACT in [e["fact"] for e in late]  # the fact's failure, and the exchange's


@pytest.mark.parametrize("mode", ["sync", "async"])
async def test_read_error_and_timeout_are_traced(docs_agent: Callable[..., Any], mode: str) -> None:
    broken = SlowStore(search_error=RuntimeError("index corrupt"))
    slow = SlowStore(search_delay=1.5)
    for store, error_type in ((broken, "RuntimeError"), (slow, "timeout")):
        rag = docs_agent(memory_store=store, memory_timeout=0.3)
        config = {"configurable": {"user_id": "alice"}}
        state = (
            rag.invoke(QUESTION, config=config)
            if mode == "sync"
            else await rag.ainvoke(QUESTION, config=config)
        )
        (event,) = trace_events(state, "read_memory")
        assert event["error_type"] == error_type and event["error"]
        assert event["skipped"] == "error"
        assert state.answer and state.sources  # the answer did not fail
        assert state.memory_context == ""
    # recall() keeps the same bound, and says which setting it is
    started = time.perf_counter()
    with pytest.raises(TimeoutError, match="RAG_MEMORY_TIMEOUT"):
        if mode == "sync":
            rag.recall(QUESTION, user_id="alice")
        else:
            await rag.arecall(QUESTION, user_id="alice")
    assert time.perf_counter() - started < 1.4  # the store takes 1.5 s


# -- users ---------------------------------------------------------------------------------------------
USERS = {
    "alice": ('"password" is called "passphrase" in these documents', QUESTION),
    "bob": ('"passwd" is called "passphrase" in these documents', QUESTION),
}


def _check_isolation(states: dict[str, Any]) -> None:
    for user, state in states.items():
        mine, _ = USERS[user]
        others = [fact for u, (fact, _) in USERS.items() if u != user]
        assert mine in state.memory_context
        assert not any(fact in state.memory_context for fact in others)
        facts = [m for m in state.memories if m["kind"] != "conversation"]
        assert facts and all(m["text"] == mine for m in facts)


async def test_concurrent_ainvoke_never_mixes_users(docs_agent: Callable[..., Any]) -> None:
    # storage threshold 1.0: these runs only read (the offline grader may learn otherwise)
    rag = docs_agent(memory_store=InMemoryStore(), memory_storage_threshold=1.0)
    for user, (fact, question) in USERS.items():
        teach(rag, user, fact, question)
    users = list(USERS) * 3
    states = await asyncio.gather(
        *(rag.ainvoke(QUESTION, config={"configurable": {"user_id": u}}) for u in users)
    )
    for user, state in zip(users, states, strict=True):
        _check_isolation({user: state})
    stranger = await rag.ainvoke(QUESTION, config={"configurable": {"user_id": "mallory"}})
    assert stranger.memory_context == "" and stranger.memories == []


def test_threads_never_mix_users(
    docs_agent: Callable[..., Any], tmp_path: Path, minilm: Any
) -> None:
    from mem0 import Memory

    rag = docs_agent(
        mem0_memory=Memory.from_config(mem0_config(tmp_path / "m0", minilm)),
        memory_storage_threshold=1.0,
    )
    rag.memory.infer = False
    for user, (fact, question) in USERS.items():
        teach(rag, user, fact, question)
    users = list(USERS) * 3
    with ThreadPoolExecutor(4) as pool:
        states = list(
            pool.map(lambda u: rag.invoke(QUESTION, config={"configurable": {"user_id": u}}), users)
        )
    for user, state in zip(users, states, strict=True):
        _check_isolation({user: state})


def test_a_ready_mem0_backend_keeps_its_options(
    docs_agent: Callable[..., Any], tmp_path: Path, minilm: Any
) -> None:
    """``mem0_memory=Mem0Backend(memory, infer=False)`` is used as given, not wrapped again."""
    from mem0 import Memory

    from retrievalagent.memory import Mem0Backend

    backend = Mem0Backend(Memory.from_config(mem0_config(tmp_path / "m0b", minilm)), infer=False)
    rag = docs_agent(model=ScriptedChatModel(grades=[grade(True)]), mem0_memory=backend)
    assert rag.memory is backend and rag.memory.infer is False
    rag.invoke(QUESTION, config={"configurable": {"user_id": "alice"}})
    assert rag.drain_background(timeout=30) == {"landed": 2, "failed": 0, "pending": 0}
    stored = backend.memory.get_all(filters={"user_id": "alice"})["results"]
    facts = [m for m in stored if m["metadata"]["kind"] == "search_fact"]
    said = [m for m in stored if m["metadata"]["kind"] == "conversation"]
    assert len(facts) == 1 and FACT in facts[0]["memory"]  # as given: nothing extracted
    assert len(said) == 1 and QUESTION in said[0]["memory"]  # the exchange, as said


def test_auth_identity_is_the_user(docs_agent: Callable[..., Any]) -> None:
    rag = docs_agent(memory_store=InMemoryStore())
    teach(rag, "carol")
    config = {"configurable": {"langgraph_auth_user": {"identity": "carol"}}}
    assert FACT in rag.invoke(QUESTION, config=config).memory_context
    assert rag.invoke(QUESTION).memory_context == ""  # "default" has nothing
    # authenticated as someone else, naming carol reaches none of her memory
    mallory = {"user_id": "carol", "langgraph_auth_user": {"identity": "mallory"}}
    assert FACT not in rag.invoke(QUESTION, config={"configurable": mallory}).memory_context
    assert rag.list_memories("mallory")  # the turn was mallory's


# -- keys a model writes ---------------------------------------------------------------------
LATER = "I forgot the password I set for the backups; where is it kept?"


@pytest.mark.parametrize(
    "fact", [FACT, "Users say password when they mean the passphrase"], ids=["quoted", "plain"]
)
def test_a_key_that_is_the_whole_fact_sentence_still_recalls_by_the_users_word(
    docs_agent: Callable[..., Any], fact: str
) -> None:
    """Small local models fill memory_key with the fact itself. The key is cut to the
    question's word it holds, so a later question using that word recalls the fact and its
    corpus term reaches BM25."""
    verbose = {**grade(True, fact=fact), "memory_kind": "search_fact", "memory_key": fact}
    model = ScriptedChatModel(grades=[verbose, grade(False)])
    rag = docs_agent(model=model, memory_store=InMemoryStore())
    alice = {"configurable": {"user_id": "alice"}}
    taught = rag.invoke(QUESTION, config=alice)
    assert trace_events(taught, "write_memory")[0]["scheduled"] is True
    assert rag.drain_background(timeout=30)["landed"] == 2  # the fact and the exchange
    (stored,) = [m for m in rag.list_memories("alice") if m["kind"] == "search_fact"]
    assert stored["text"] == fact
    later = rag.invoke(LATER, config=alice)
    (read,) = trace_events(later, "read_memory")
    assert [
        (i["kind"], i["matched"], i["text"]) for i in read["items"] if i["kind"] != "conversation"
    ] == [("search_fact", "alias", fact)]
    assert trace_events(later, "lexical_search")[0]["memory_terms"] == "passphrase"


@pytest.mark.parametrize(
    ("said_at", "now", "day"),
    [
        ("2026-03-14T21:00:00-05:00", "2026-03-16T10:00:00-05:00", "2026-03-14"),  # UTC: 15th
        ("2026-03-15T01:30:00+09:00", "2026-03-16T10:00:00+09:00", "2026-03-15"),  # UTC: 14th
    ],
)
def test_the_offline_answer_dates_what_was_said_as_the_prompt_does(
    make_agent: Callable[..., Any], said_at: str, now: str, day: str
) -> None:
    """The day is the one of the zone the turn is asked in, in the memory lines and in the
    answer that quotes them: not a UTC day that can be the day before or after."""
    rag = make_agent("tz", memory_store=InMemoryStore())
    rag.add_documents(["Backups: pg_basebackup takes a base backup of a PostgreSQL cluster."])
    said = "My cluster runs PostgreSQL 13 on Debian 11."
    rag.remember([{"role": "user", "content": said}], user_id="z", thread_id="a", at=said_at)
    config = {"configurable": {"user_id": "z", "thread_id": "q", "now": now}}
    state = rag.invoke("How do I back up my cluster?", config=config)
    assert f"- [{day} (" in state.memory_context
    assert f"Earlier on {day} you said" in state.answer and said in state.answer


@pytest.mark.parametrize(
    "question",
    ["May 2 teams share the build server?", "Was the build server shared on Sunday?"],
)
def test_a_time_read_into_a_question_does_not_push_out_what_it_is_about(
    make_agent: Callable[..., Any], question: str
) -> None:
    """ "May 2" reads as a date and "on Sunday" as last Sunday: what was said then comes
    first, but however much that is, the memory the question's words are about stays."""
    rag = make_agent("window", memory_store=InMemoryStore())
    rag.add_documents(["Backups: pg_basebackup takes a base backup of a PostgreSQL cluster."])
    fact = "Our build server is on rack B4 and two teams share it."
    rag.remember([{"role": "user", "content": fact}], user_id="tom", at="2026-03-03T10:00:00Z")
    for n in range(1, 10):  # more than the prompt shows, on the days the question names
        for day in ("2025-05-02", "2026-04-12"):
            said = f"Idea number {n} for {day}: noodles with tofu, then a space western."
            rag.remember([{"role": "user", "content": said}], user_id="tom", at=f"{day}T12:00Z")
    now = "2026-04-16T09:00:00Z"
    recalled = rag.recall(question, user_id="tom", k=8, now=now)
    assert any("rack B4" in hit["text"] for hit in recalled), [h["text"] for h in recalled]
    config = {"configurable": {"user_id": "tom", "thread_id": "q", "now": now}}
    state = rag.invoke(question, config=config)
    assert "rack B4" in state.memory_context
    (event,) = trace_events(state, "read_memory")
    assert event.get("time"), "the question was read as naming a time"  # what is tested

"""Memory faults: mem0 or a store raising, hanging or answering garbage never fails a turn.

Faults are injected by wrapping real backends (tests/faults.py): mem0 ``Memory`` and
``AsyncMemory`` with the offline config, LangGraph ``InMemoryStore`` with and without a
vector index. The answer must come back, the trace must say what failed, every call must
end within the memory timeout (plus scheduling slack), and background writes must all be
accounted for (landed or failed) — nothing retried or waited on for ever.
"""

from __future__ import annotations

import asyncio
import itertools
import re
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from langgraph.store.base import ListNamespacesOp, MatchCondition, SearchOp
from langgraph.store.memory import InMemoryStore

from retrievalagent.memory import BackgroundWrites, MemoryRecord
from tests.faults import TURN, FaultPlan, FaultyAsyncMem0, FaultyMem0, FaultyStore
from tests.support.chat import ScriptedChatModel
from tests.support.memory import mem0_config

CORPUS = [
    "Lanternfish listens on port 7311 by default; change it with --port.",
    "The vault passphrase is stretched with Argon2id using 64 MiB of memory.",
    "Snapshots older than 30 days are pruned by the retention job every night.",
]
QUESTIONS = [
    "Which port does Lanternfish listen on?",
    "How is the vault passphrase stretched?",
    "When are old snapshots pruned?",
]
USERS = [f"user{i}" for i in range(5)]
TIMEOUT = 0.25  # the agents' memory_timeout (s)
SLACK = 3.0  # scheduling slack on a loaded 2-core CI machine (s)
_TAG = re.compile(r"\[asked by (user\d+)\]")


_FACTS = itertools.count()


def _grade(messages: Any) -> dict[str, Any]:
    """The scripted grader always wants to remember a new short fact naming the asker."""
    text = "\n".join(str(m.content) for m in messages)
    user = (_TAG.findall(text) or ["nobody"])[-1]
    return {
        "sufficient": True,
        "confidence": 0.9,
        "memory_worth_storing": True,
        "memory_confidence": 0.95,
        # each note is a new memory: its key holds no word of the question (nor does the
        # fact quote a mapping), so it gets no alias key and every write that lands is kept
        "memory_key": f"note {(note := next(_FACTS))}",
        "memory_fact": f'"{user}" asked about Lanternfish (note {note})',
    }


def _model() -> ScriptedChatModel:
    return ScriptedChatModel(replies=["Lanternfish listens on port 7311 [1]."], grades=[_grade])


def _question(rng_index: int, user: str) -> str:
    return f"{QUESTIONS[rng_index % len(QUESTIONS)]} [asked by {user}]"


@pytest.fixture
def faulty(make_agent: Callable[..., Any], minilm: Any, tmp_path: Path) -> Iterator[Any]:
    """``faulty(kind, plan, scripted)``: an agent over the tiny corpus with a faulty backend."""
    plans: list[FaultPlan] = []
    mem0s: list[Any] = []

    def build(kind: str, plan: FaultPlan, scripted: bool = False, **kwargs: Any) -> Any:
        plans.append(plan)
        backend: dict[str, Any]
        if kind == "store":
            backend = {"memory_store": FaultyStore(plan)}
        elif kind == "store-index":
            backend = {"memory_store": FaultyStore(plan, index={"dims": 384, "embed": minilm})}
        elif kind == "mem0":
            from mem0 import Memory

            real = Memory.from_config(mem0_config(tmp_path / f"m0-{len(plans)}", minilm))
            mem0s.append(real)
            backend = {"mem0_memory": FaultyMem0(real, plan)}
        elif kind == "mem0-async":
            from mem0 import AsyncMemory

            real = AsyncMemory.from_config(mem0_config(tmp_path / f"am0-{len(plans)}", minilm))
            mem0s.append(real)
            backend = {"mem0_memory": FaultyAsyncMem0(real, plan)}
        else:  # pragma: no cover
            raise ValueError(kind)
        kwargs.setdefault("memory_timeout", TIMEOUT)
        kwargs.setdefault("memory_relevance_threshold", 0.0)  # inject whatever is recalled
        rag = make_agent(
            f"faults-{len(plans)}", model=_model() if scripted else None, **backend, **kwargs
        )
        rag.add_documents(CORPUS, progress=False)
        return rag

    yield build
    for plan in plans:
        plan.release.set()  # end every sync hang still waiting
    from retrievalagent.memory._embedded import _close_memory

    for real in mem0s:  # its Qdrant client and history database
        _close_memory(real)


def _read_event(state: Any) -> dict[str, Any]:
    (event,) = [e for e in state.trace if e["node"] == "read_memory"]
    return event


def _assert_own_memories(state: Any, user: str) -> None:
    for memory in state.memories:
        assert "SECRET" not in memory["text"], memory
        assert f'"{user}"' in memory["text"] or "asked about" not in memory["text"], memory
    assert "SECRET" not in state.memory_context


async def _turn(rag: Any, question: str, user: str, use_async: bool) -> tuple[Any, float]:
    config = {"configurable": {"user_id": user}}
    start = time.perf_counter()
    if use_async:
        state = await asyncio.wait_for(rag.ainvoke(question, config), 30)
    else:
        state = await asyncio.wait_for(asyncio.to_thread(rag.invoke, question, config), 30)
    return state, time.perf_counter() - start


# -- each fault on its own ---------------------------------------------------------------------
BACKENDS = ["store", "store-index", "mem0", "mem0-async"]


@pytest.mark.parametrize("kind", BACKENDS)
@pytest.mark.parametrize("fault", ["raise", "hang", "malformed", "foreign"])
@pytest.mark.parametrize("use_async", [False, True], ids=["invoke", "ainvoke"])
async def test_a_read_fault_never_fails_the_answer(
    faulty: Callable[..., Any], kind: str, fault: str, use_async: bool
) -> None:
    plan = FaultPlan(seed=1)
    rag = faulty(kind, plan)
    plan.forced["add"] = "ok"
    rag.memory.add(MemoryRecord("an honest memory", "Which port?", "", "user0"))
    plan.forced["search"] = fault
    for _ in range(3):  # several draws of the malformed shapes
        state, elapsed = await _turn(rag, QUESTIONS[0], "user0", use_async)
        assert "7311" in state.answer
        assert elapsed < TIMEOUT + SLACK
        event = _read_event(state)
        if fault in ("raise", "hang"):
            assert event["skipped"] == "error" and event["error_type"], event
            if fault == "hang":  # invoke and ainvoke say what timed out, alike
                assert event["error_type"] == "timeout"
                assert event["error"].startswith("memory search took longer than"), event
        if fault == "foreign":
            assert "error" not in event
            _assert_own_memories(state, "user0")
        for memory in state.memories:  # whatever survived is usable: finite, short, text
            assert 0.0 <= memory["score"] <= 1.0 and 0 < len(memory["text"]) <= 1000
    assert plan.counts[("search", fault)] >= 3


async def test_hung_sync_backend_cannot_starve_the_event_loop(faulty: Callable[..., Any]) -> None:
    """Each hung read parks a thread; twenty of them must not stall later turns (they
    did when sync reads ran on the loop's default executor: six hangs blocked it)."""
    plan = FaultPlan(seed=2, hang=20.0)
    plan.forced["search"] = "hang"
    rag = faulty("mem0", plan)
    for _ in range(20):
        state, elapsed = await _turn(rag, QUESTIONS[1], "user1", use_async=True)
        assert _read_event(state)["error_type"] == "timeout"
        assert elapsed < TIMEOUT + SLACK
    assert plan.counts[("search", "hang")] == 20


def test_hung_writes_do_not_wedge_the_write_pool() -> None:
    """Writes queued behind hung ones still land, and drain ends within the timeout."""
    writes = BackgroundWrites(max_pending=16, timeout=0.2, exit_timeout=1)
    release, landed = threading.Event(), []
    try:
        for i in range(8):  # twice the pool's four workers
            writes.submit_thread(lambda: release.wait(30), f"hung {i}")
        for i in range(5):
            writes.submit_thread(lambda i=i: landed.append(i), f"ok {i}")
        start = time.perf_counter()
        report = writes.drain(timeout=10)
        assert time.perf_counter() - start < 2.0
        assert report == {"landed": 5, "failed": 8, "pending": 0}
        assert sorted(landed) == [0, 1, 2, 3, 4]
        assert all("TimeoutError" in e for e in writes.errors)
    finally:
        release.set()
    time.sleep(0.2)
    writes.submit_thread(lambda: landed.append(99), "after recovery")
    assert writes.drain(timeout=5)["failed"] == 8 and landed[-1] == 99


def test_a_backend_hung_for_good_fails_writes_fast_and_recovers(monkeypatch: Any) -> None:
    """Past the stuck-worker cap, writes fail at once (not queued for ever); once the
    backend answers again, writes land again."""
    from retrievalagent.memory import _background

    monkeypatch.setattr(_background, "_MAX_STUCK", 2)
    writes = BackgroundWrites(max_pending=64, timeout=0.1, exit_timeout=1)
    release, landed = threading.Event(), []
    try:
        for i in range(6):  # 4 workers + 2 replacements, all stuck
            writes.submit_thread(lambda: release.wait(30), f"hung {i}")
        time.sleep(0.5)
        start = time.perf_counter()
        writes.submit_thread(lambda: landed.append(1), "while wedged")
        report = writes.drain(timeout=5)
        assert time.perf_counter() - start < 1.0
        assert report["pending"] == 0 and not landed
        assert "stuck in the backend" in writes.errors[-1]
    finally:
        release.set()
    time.sleep(0.3)  # the stuck workers come back and retire down to the pool size
    writes.submit_thread(lambda: landed.append(2), "after recovery")
    assert writes.drain(timeout=5)["pending"] == 0 and landed == [2]


# -- 1,000 randomised runs -----------------------------------------------------------------------
def _writes(event: dict[str, Any]) -> int:
    """How many background writes a write_memory event scheduled: the grade's fact, the
    exchange (conversation memory) and the facts about the user drawn from it."""
    conversation = event.get("conversation") or {}
    return sum(
        bool(x)
        for x in (event.get("scheduled"), conversation.get("scheduled"), conversation.get("facts"))
    )


RUNS = 1000
SEED = 20261122


@pytest.mark.slow
async def test_one_thousand_randomised_fault_runs(faulty: Callable[..., Any]) -> None:
    import random

    rng = random.Random(SEED)
    agents: list[tuple[str, bool, Any, FaultPlan]] = []
    for n, kind in enumerate(BACKENDS):
        for scripted in (False, True):
            # hangs are rarer than other faults: each costs a full memory timeout
            plan = FaultPlan(seed=SEED + 10 * n + scripted, read=(8, 1, 0.5, 1, 2, 1), hang=0.8)
            agents.append((kind, scripted, faulty(kind, plan, scripted), plan))
    baseline = []
    for _, _, rag, plan in agents:  # warm up (first mem0 calls load lazily), unfaulted
        plan.forced.update(search="ok", add="ok")
        await _turn(rag, QUESTIONS[0], "warmup", use_async=False)
        baseline.append(await rag.adrain_background(timeout=30))
        plan.forced.clear()
        plan.counts.clear()

    unhandled: list[str] = []
    loop = asyncio.get_running_loop()
    loop.set_exception_handler(lambda _loop, ctx: unhandled.append(str(ctx.get("message"))))
    old_hook = threading.excepthook
    threading.excepthook = lambda args: unhandled.append(f"thread: {args.exc_value!r}")

    scheduled: Counter[int] = Counter()
    read_kinds: Counter[str] = Counter()
    healthy_timeouts = 0
    exceptions: list[str] = []
    slowest = 0.0
    try:
        for run in range(RUNS):
            index = rng.randrange(len(agents))
            kind, scripted, rag, plan = agents[index]
            user, use_async = rng.choice(USERS), rng.random() < 0.5
            turn = TURN.set(run)  # the calls of this turn, even those that outlive it
            try:
                state, elapsed = await _turn(rag, _question(run, user), user, use_async)
            except Exception as exc:  # counted, then the test fails with all of them
                exceptions.append(f"run {run} ({kind}): {type(exc).__name__}: {exc}")
                continue
            finally:
                TURN.reset(turn)
            slowest = max(slowest, elapsed)
            got = [k for (t, op, k), n in plan.by_turn.items() if t == run and op == "search"]
            # one recall per turn: one read, or two when the user's conversation memory
            # changed since this process last read it (a write that outlived its timeout
            # landed meanwhile) and the recall reads what is new
            assert 1 <= len(got) <= 2, (run, got)
            read_kinds.update(got)
            event = _read_event(state)
            assert state.answer, run
            if {"raise", "hang"} & set(got):
                assert event.get("error_type"), (run, kind, event)
            elif set(got) <= {"ok", "slow", "foreign"} and "error" in event:
                # a healthy call may still outlast the timeout on a loaded machine
                assert event["error_type"] == "timeout", (run, kind, event)
                healthy_timeouts += 1
            _assert_own_memories(state, user)
            scheduled[index] += sum(_writes(e) for e in state.events("write_memory"))
    finally:
        threading.excepthook = old_hook

    reports = []
    for (*_, rag, _), before in zip(agents, baseline, strict=True):
        after = await rag.adrain_background(timeout=30)
        reports.append({k: after[k] - before[k] if k != "pending" else after[k] for k in after})
    await asyncio.sleep(1.0)  # hung sync writes finish late (their calls were counted failed)
    loop.set_exception_handler(None)

    assert not exceptions, exceptions[:5]
    assert slowest < TIMEOUT + SLACK, slowest  # zero hung calls
    assert not unhandled, unhandled[:5]
    assert healthy_timeouts <= RUNS // 50, healthy_timeouts
    assert set(read_kinds) == {"ok", "raise", "hang", "slow", "malformed", "foreign"}
    total_faults = sum(plan.injected for *_, plan in agents)
    assert total_faults >= 300
    for index, ((kind, scripted, rag, plan), report) in enumerate(
        zip(agents, reports, strict=True)
    ):
        assert report["pending"] == 0, (kind, report)  # nothing waits for ever
        assert report["landed"] + report["failed"] == scheduled[index], (kind, report)
        raised = plan.counts[("add", "raise")]
        assert report["failed"] >= min(raised, scheduled[index]), (kind, report, plan.counts)
        if kind.startswith("store") and scripted:
            # what is lost is exactly the writes whose backend raised: hung ones were
            # counted failed (timeout) but landed late, all others landed
            stored = sum(  # read past the fault plan (InMemoryStore's own batch)
                len(InMemoryStore.batch(rag.memory_store, [SearchOp(ns, limit=10_000)])[0])
                for space in ("memories", "conversations")  # facts, and what was said
                for ns in InMemoryStore.batch(
                    rag.memory_store,
                    [ListNamespacesOp(match_conditions=(MatchCondition("prefix", (space,)),))],
                )[0]
            )
            assert stored == scheduled[index] - raised + baseline[index]["landed"], (
                kind,
                stored,
                report,
                plan.counts,
            )
    write_faults = Counter(k for *_, plan in agents for (op, k), n in plan.counts.items()
                           if op == "add" for _ in range(n))  # fmt: skip
    print(
        f"\n{RUNS} runs, {len(agents)} agents, read faults {dict(read_kinds)}, "
        f"write faults {dict(write_faults)}, faults injected {total_faults}, "
        f"writes scheduled {sum(scheduled.values())}, landed {sum(r['landed'] for r in reports)}, "
        f"failed {sum(r['failed'] for r in reports)} (timeouts included), "
        f"healthy reads that timed out {healthy_timeouts}, slowest call {slowest:.2f}s"
    )

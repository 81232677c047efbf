"""Fault injection for the reliability tests (no tests here).

Every wrapper delegates to a REAL backend — mem0 ``Memory`` / ``AsyncMemory`` with the
offline config, a LangGraph ``InMemoryStore`` — and, per call, may instead raise, hang
(longer than the agent's memory timeout), be slow, or hand back a malformed version of
the real result (wrong types, missing keys, NaN scores, huge texts, another user's items).
What each call got is decided by a seeded :class:`FaultPlan` and counted, so a test can
say exactly how many faults it injected.
"""

from __future__ import annotations

import asyncio
import copy
import functools
import math
import random
import threading
import time
from collections import Counter
from collections.abc import Callable, Sequence
from contextvars import ContextVar
from typing import Any

from langgraph.store.base import (
    Item,
    ListNamespacesOp,
    MatchCondition,
    PutOp,
    SearchItem,
    SearchOp,
)
from langgraph.store.memory import InMemoryStore

#: Which turn of a test a backend call belongs to (set by the test around each turn).
TURN: ContextVar[object] = ContextVar("fault_turn", default=None)
READ_FAULTS = ("ok", "raise", "hang", "slow", "malformed", "foreign")
WRITE_FAULTS = ("ok", "raise", "hang", "slow")
HUGE = "x" * 1_000_000


def injected_errors() -> list[Exception]:
    """The kinds of exception real backends raise (fresh instances each call)."""
    errors: list[Exception] = [
        RuntimeError("injected: backend exploded"),
        ConnectionResetError(104, "injected: connection reset by peer"),
        TimeoutError("injected: backend timed out"),
        OSError(5, "injected: input/output error"),
        KeyError("results"),
        ValueError("injected: unexpected payload"),
        AttributeError("injected: 'NoneType' object has no attribute 'points'"),
        MemoryError("injected: out of memory"),
    ]
    try:
        import psycopg

        errors.append(psycopg.OperationalError("injected: server closed the connection"))
    except ImportError:  # pragma: no cover - the postgres extra is part of dev
        pass
    return errors


class FaultPlan:
    """Seeded choice of the fault each call gets, with counts of what was injected.

    Args:
        seed: Makes a run reproducible.
        read: Weights of READ_FAULTS for ``search`` calls.
        write: Weights of WRITE_FAULTS for ``add``/``put`` calls.
        hang: Seconds a "hang" lasts (longer than the memory timeout under test).
        slow: Seconds a "slow" call takes (shorter than the timeout).
    """

    def __init__(
        self,
        seed: int,
        read: Sequence[float] = (6, 1, 1, 1, 2, 1),
        write: Sequence[float] = (6, 1, 1, 1),
        hang: float = 0.6,
        slow: float = 0.01,
    ) -> None:
        self.rng = random.Random(seed)
        self.read, self.write = list(read), list(write)
        self.hang, self.slow = hang, slow
        self.counts: Counter[tuple[str, str]] = Counter()
        #: the same per ``TURN`` the call ran under (its context: threads the agent starts
        #: copy it), so a call that outlives its turn is not counted in the next one
        self.by_turn: Counter[tuple[object, str, str]] = Counter()
        self.forced: dict[str, str] = {}
        self.release = threading.Event()  # set to end every sync hang at once
        self._lock = threading.Lock()

    def pick(self, op: str) -> str:
        with self._lock:
            if op in self.forced:
                kind = self.forced[op]
            elif op == "search":
                kind = self.rng.choices(READ_FAULTS, self.read)[0]
            else:
                kind = self.rng.choices(WRITE_FAULTS, self.write)[0]
            self.counts[(op, kind)] += 1
            self.by_turn[(TURN.get(), op, kind)] += 1
            return kind

    def error(self) -> Exception:
        with self._lock:
            return self.rng.choice(injected_errors())

    def choice(self, options: Sequence[Any]) -> Any:
        with self._lock:
            return self.rng.choice(list(options))

    @property
    def injected(self) -> int:
        return sum(n for (_, kind), n in self.counts.items() if kind != "ok")

    def strike_sync(self, kind: str) -> None:
        """The fault that happens before the real call: raise, hang or delay."""
        if kind == "raise":
            raise self.error()
        if kind == "hang":
            self.hang_sync()
        if kind == "slow":
            time.sleep(self.slow)

    async def strike_async(self, kind: str) -> None:
        """``strike_sync`` without blocking the event loop."""
        if kind == "raise":
            raise self.error()
        if kind == "hang":
            await self.hang_async()
        if kind == "slow":
            await asyncio.sleep(self.slow)

    def hang_sync(self) -> None:
        self.release.wait(self.hang)

    async def hang_async(self) -> None:
        await asyncio.sleep(self.hang)


# -- malformed results ---------------------------------------------------------------------
def malformed_mem0(plan: FaultPlan, real: Any) -> Any:
    """A broken version of a mem0 ``search`` result."""
    results = list((real or {}).get("results") or []) if isinstance(real, dict) else []
    item = copy.deepcopy(results[0]) if results else {"id": "x", "memory": "m", "score": 0.9}
    shapes: list[Callable[[], Any]] = [
        lambda: None,
        lambda: "garbage",
        lambda: 42,
        lambda: {"results": None},
        lambda: {"results": "not a list"},
        lambda: {"no_results_key": []},
        lambda: [None, 1, "x", ["nested"]],
        lambda: {"results": [{**item, "score": math.nan}]},
        lambda: {"results": [{**item, "score": math.inf}]},
        lambda: {"results": [{**item, "score": "high"}]},
        lambda: {"results": [{**item, "score": None}]},
        lambda: {"results": [{**item, "score": -7.5}]},
        lambda: {"results": [{**item, "score": 12.0}]},
        lambda: {"results": [{**item, "memory": HUGE}]},
        lambda: {"results": [{**item, "memory": None, "text": None}]},
        lambda: {"results": [{**item, "memory": {"nested": "dict"}}]},
        lambda: {"results": [{**item, "metadata": "not a dict"}]},
        lambda: {"results": [{k: v for k, v in item.items() if k != "id"}]},
        lambda: {"results": [{}]},
        lambda: {"results": [*results, "junk", 7, None]},
    ]
    return plan.choice(shapes)()


def foreign_mem0(real: Any, owner: str) -> Any:
    """mem0 results that (wrongly) include another user's memory."""
    results = list((real or {}).get("results") or []) if isinstance(real, dict) else []
    stranger = {
        "id": "foreign",
        "memory": f"SECRET of someone-else-than-{owner}",
        "score": 0.99,
        "user_id": f"not-{owner}",
        "metadata": {},
    }
    return {"results": [stranger, *results]}


def _broken_item(plan: FaultPlan, it: SearchItem | Item) -> Any:
    value = dict(it.value)
    variants: list[Callable[[], Any]] = [
        lambda: {**value, "text": HUGE},
        lambda: {**value, "text": None},
        lambda: {**value, "text": 12345},
        lambda: {**value, "text": {"nested": True}},
        lambda: {k: v for k, v in value.items() if k != "text"},
        lambda: {**value, "embedding": [math.nan] * 384},
        lambda: {**value, "embedding": ["x"] * 384},
        lambda: {**value, "embedding": [1.0, 2.0, 3.0]},
        lambda: {**value, "embedding": []},
        lambda: {**value, "embedding": None, "recall": HUGE},
        lambda: {**value, "question_embedding": [math.inf] * 384},
        lambda: None,
        lambda: "not a dict",
    ]
    broken = plan.choice(variants)()
    score = plan.choice([getattr(it, "score", None), math.nan, math.inf, "high", -3.0, None])
    return SearchItem(
        namespace=it.namespace,
        key=it.key,
        value=broken,  # type: ignore[arg-type]
        created_at=it.created_at,
        updated_at=it.updated_at,
        score=score,  # type: ignore[arg-type]
    )


def malformed_items(plan: FaultPlan, real: list[SearchItem]) -> Any:
    """A broken version of a store ``search`` result."""
    shapes: list[Callable[[], Any]] = [
        lambda: None,
        lambda: "garbage",
        lambda: 42,
        lambda: [None, 1, "x"],
        lambda: [_broken_item(plan, it) for it in real] or [None],
        lambda: [*real, *(_broken_item(plan, it) for it in real)],
    ]
    return plan.choice(shapes)()


def foreign_items(store: InMemoryStore, namespace: tuple[str, ...]) -> list[SearchItem]:
    """Another user's items, as a store with a too-wide prefix search would return them."""
    out = []
    op = ListNamespacesOp(match_conditions=(MatchCondition("prefix", (namespace[0],)),))
    [namespaces] = InMemoryStore.batch(store, [op])
    for ns in namespaces:
        if tuple(ns) != tuple(namespace):
            [items] = InMemoryStore.batch(store, [SearchOp(ns, limit=5)])
            out.extend(items)
    return out


# -- wrappers --------------------------------------------------------------------------------
class FaultyMem0:
    """A real sync mem0 ``Memory`` whose calls may fail in the ways of :class:`FaultPlan`."""

    def __init__(self, inner: Any, plan: FaultPlan) -> None:
        self._inner, self.plan = inner, plan

        # plain functions carrying the real signatures, which Mem0Backend inspects
        @functools.wraps(inner.search)
        def search(query: str, **kwargs: Any) -> Any:
            return self._search(query, **kwargs)

        @functools.wraps(inner.add)
        def add(messages: Any, **kwargs: Any) -> Any:
            return self._add(messages, **kwargs)

        self.search, self.add = search, add

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    def _search(self, query: str, **kwargs: Any) -> Any:
        kind = self.plan.pick("search")
        self.plan.strike_sync(kind)
        result = self._inner.search(query, **kwargs)
        if kind == "malformed":
            return malformed_mem0(self.plan, result)
        if kind == "foreign":
            return foreign_mem0(result, str((kwargs.get("filters") or {}).get("user_id")))
        return result

    def _add(self, messages: Any, **kwargs: Any) -> Any:
        kind = self.plan.pick("add")
        self.plan.strike_sync(kind)
        return self._inner.add(messages, **kwargs)


class FaultyAsyncMem0:
    """A real mem0 ``AsyncMemory`` (coroutine search/add) with injected faults."""

    def __init__(self, inner: Any, plan: FaultPlan) -> None:
        self._inner, self.plan = inner, plan

        @functools.wraps(inner.search)
        async def search(query: str, **kwargs: Any) -> Any:
            return await self._search(query, **kwargs)

        @functools.wraps(inner.add)
        async def add(messages: Any, **kwargs: Any) -> Any:
            return await self._add(messages, **kwargs)

        self.search, self.add = search, add

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    async def _search(self, query: str, **kwargs: Any) -> Any:
        kind = self.plan.pick("search")
        await self.plan.strike_async(kind)
        result = await self._inner.search(query, **kwargs)
        if kind == "malformed":
            return malformed_mem0(self.plan, result)
        if kind == "foreign":
            return foreign_mem0(result, str((kwargs.get("filters") or {}).get("user_id")))
        return result

    async def _add(self, messages: Any, **kwargs: Any) -> Any:
        kind = self.plan.pick("add")
        await self.plan.strike_async(kind)
        return await self._inner.add(messages, **kwargs)


class FaultyStore(InMemoryStore):
    """A real ``InMemoryStore`` whose reads and writes may fail in the ways of
    :class:`FaultPlan`.

    Every store call goes through ``batch``/``abatch`` (``search`` and ``put`` included), so
    that is where faults strike: a batch holding a ``PutOp`` is a write ("add"), any other
    a read ("search"); malformed or foreign items replace or join the first result list.
    """

    def __init__(self, plan: FaultPlan, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.plan = plan

    @staticmethod
    def _op(ops: Any) -> str | None:
        """What a batch is to the plan: a write, a recall (it lists or searches), or
        neither (the fetch of cached vectors, the fault harness's own lookups)."""
        if any(isinstance(op, PutOp) for op in ops):
            return "add"
        if any(isinstance(op, SearchOp) for op in ops):
            return "search"
        return None

    def _after(self, kind: str, ops: list[Any], real: list[Any]) -> Any:
        if not real or not isinstance(real[0], list):
            return real
        first = real[0]
        if kind == "malformed":
            return [malformed_items(self.plan, first), *real[1:]]
        if kind == "foreign":
            return [foreign_items(self, tuple(ops[0].namespace_prefix)) + first, *real[1:]]
        return real

    def batch(self, ops: Any) -> Any:
        ops = list(ops)
        op = self._op(ops)
        if op is None:
            return super().batch(ops)
        kind = self.plan.pick(op)
        self.plan.strike_sync(kind)
        return self._after(kind, ops, super().batch(ops))

    async def abatch(self, ops: Any) -> Any:
        ops = list(ops)
        op = self._op(ops)
        if op is None:
            return await super().abatch(ops)
        kind = self.plan.pick(op)
        await self.plan.strike_async(kind)
        return self._after(kind, ops, await super().abatch(ops))

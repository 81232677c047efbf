"""Threads the package starts for itself, and the trace log they may write to.

Every "run this call on a daemon thread" goes through :func:`on_daemon_thread`: a backend
call that may hang must not block the caller for ever, nor starve an executor the graph
runs on, nor keep the process alive at exit. The three ways the package waits for such a
call are built on it: with a deadline (:func:`call_with_timeout`), from synchronous code
(:func:`run_sync`) and awaited (:func:`in_thread`).
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import json
import threading
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, Generic, TypeVar

__all__ = ["Outcome", "TraceLog", "call_with_timeout", "in_thread", "on_daemon_thread", "run_sync"]

T = TypeVar("T")


class Outcome(Generic[T]):
    """What a call on a daemon thread returned or raised, once it has finished."""

    def __init__(self) -> None:
        self.finished = threading.Event()
        self.returned: tuple[T] | None = None  # (value,) once the call returned
        self.error: BaseException | None = None  # what it raised instead

    def result(self, timeout: float | None = None, what: str = "the call") -> T:
        """The call's value (its exception is re-raised in the caller's thread); a
        ``TimeoutError`` when it has not finished within ``timeout`` seconds."""
        if not self.finished.wait(timeout):
            raise TimeoutError(f"{what} took longer than {timeout:g}s")
        if self.returned is None:
            assert self.error is not None
            raise self.error
        return self.returned[0]


def on_daemon_thread(
    fn: Callable[[], T], name: str, then: Callable[[Outcome[T]], None] | None = None
) -> Outcome[T]:
    """Start ``fn()`` on a new daemon thread; ``then`` runs on that thread when it ends.

    The thread runs in a copy of the caller's context variables, as an executor thread
    does (``asyncio.to_thread``): a tracer's or a callback's context follows the call."""
    outcome: Outcome[T] = Outcome()
    context = contextvars.copy_context()

    def target() -> None:
        try:
            outcome.returned = (fn(),)
        except BaseException as exc:  # re-raised where the outcome is read
            outcome.error = exc
        finally:
            outcome.finished.set()
            if then is not None:
                then(outcome)

    threading.Thread(target=context.run, args=(target,), name=name, daemon=True).start()
    return outcome


def call_with_timeout(fn: Callable[[], T], timeout: float, what: str) -> T:
    """``fn()`` from synchronous code, given up after ``timeout`` seconds (the thread lingers)."""
    return on_daemon_thread(fn, "retrievalagent-memory-read").result(timeout, what)


def run_sync(factory: Callable[[], Awaitable[T]]) -> T:
    """Run the coroutine made by ``factory`` to completion from synchronous code.

    In a thread without an event loop (LangGraph's sync node workers) it gets a fresh loop;
    inside a running loop it runs on a helper thread, so the caller's loop is never
    re-entered.
    """

    async def main() -> T:
        return await factory()

    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(main())
    return on_daemon_thread(lambda: asyncio.run(main()), "retrievalagent-run-sync").result()


_IN_FLIGHT = threading.BoundedSemaphore(256)


class _Handoff(Generic[T]):
    """Where a thread's outcome goes: to the coroutine awaiting it while it waits, else to
    ``unclaimed``. The thread and the coroutine decide under one lock, so an outcome on its
    way to a caller cancelled meanwhile is not dropped between them."""

    def __init__(self, unclaimed: Callable[[T], object] | None, bounded: bool) -> None:
        self.loop = asyncio.get_running_loop()
        self.bounded = bounded
        self.future: asyncio.Future[T] = self.loop.create_future()
        self.unclaimed = unclaimed
        self._claim = threading.Lock()
        self._waiting = True
        self._sent = False  # the outcome went to the loop

    def deliver(self, outcome: Outcome[T]) -> None:
        """On the thread, once ``fn`` has ended."""
        if self.bounded:
            _IN_FLIGHT.release()
        with self._claim:
            if self._waiting:
                with contextlib.suppress(RuntimeError):  # the loop is closed
                    self.loop.call_soon_threadsafe(self._settle, outcome)
                    self._sent = True
                    return
        self._unclaim(outcome)

    def abandon(self, outcome: Outcome[T]) -> None:
        """The caller stopped waiting: what was already sent to it is handed on here."""
        with self._claim:
            self._waiting, sent = False, self._sent
        if sent and self.unclaimed is not None and outcome.returned is not None:
            on_daemon_thread(lambda: self._unclaim(outcome), "retrievalagent-unclaimed")

    def _settle(self, outcome: Outcome[T]) -> None:
        if self.future.done():  # cancelled: ``abandon`` hands the outcome on
            return
        if outcome.returned is not None:
            self.future.set_result(outcome.returned[0])
        elif outcome.error is not None:
            self.future.set_exception(outcome.error)

    def _unclaim(self, outcome: Outcome[T]) -> None:
        if self.unclaimed is not None and outcome.returned is not None:
            self.unclaimed(outcome.returned[0])


async def in_thread(
    fn: Callable[[], T], unclaimed: Callable[[T], object] | None = None, *, bounded: bool = True
) -> T:
    """Await ``fn()`` run on its own daemon thread, not on the loop's default executor.

    For blocking backend calls under ``ainvoke`` that may hang (a memory backend that never
    answers): the caller can give up (``asyncio.wait_for``) while the thread lingers, and
    lingering threads cannot starve the executor the rest of the graph runs on. At most 256
    such threads exist per process; past that, callers wait (without blocking the loop) for
    one to finish, so a hung backend cannot pile up threads without bound.

    ``unclaimed`` gets what ``fn()`` returned when the caller is no longer there to take it
    (cancelled, or closed with its loop): something that must be given back, such as a lock
    the call got, is given back instead of lost. It runs on a thread, never on the loop.
    ``bounded=False``: the call never waits for one of the 256 threads, for what must run
    at once whatever else hangs (giving a lock back).
    """
    while bounded and not _IN_FLIGHT.acquire(blocking=False):
        await asyncio.sleep(0.01)
    try:
        handoff: _Handoff[T] = _Handoff(unclaimed, bounded)
        outcome = on_daemon_thread(fn, "retrievalagent-blocking-call", handoff.deliver)
    except BaseException:
        if bounded:
            _IN_FLIGHT.release()
        raise
    try:
        return await handoff.future
    except BaseException:  # cancelled, closed with its loop, or what ``fn`` raised
        handoff.abandon(outcome)
        raise


class TraceLog:
    """Appends each finished turn's trace as one JSON line (for threshold tuning); safe to
    write from the graph's worker threads and background writes at once."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._lock = threading.Lock()

    def write(self, record: dict[str, Any]) -> None:
        line = json.dumps(record, default=str, ensure_ascii=False)
        with self._lock:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            with self.path.open("a", encoding="utf-8") as fh:
                fh.write(line + "\n")

"""Fire-and-forget memory writes that are still accounted for.

``write_memory`` returns as soon as a write is scheduled. Sync backends run on a small
worker pool (also under ``ainvoke``: a thread outlives the event loop, so ``asyncio.run``
ending does not cancel the write); coroutine backends run as asyncio tasks on the caller's
loop. Every write is tracked until it lands or fails, ``drain``/``adrain`` wait for them,
and an exit hook drains with a bounded timeout and logs anything left.

At most ``max_pending`` writes are in flight; a write scheduled beyond that waits for a
free slot (back-pressure on the caller) rather than being dropped or queued without bound.

A backend that hangs cannot wedge the pool: a write still running after ``timeout`` is
counted failed and its worker replaced (up to ``_MAX_STUCK`` stuck workers; a stuck one
retires when its call returns). Should every worker be stuck anyway, queued and new writes
fail at once instead of waiting for ever, so ``drain()`` always ends.
"""

from __future__ import annotations

import asyncio
import atexit
import concurrent.futures as cf
import contextlib
import logging
import queue
import threading
import time
import weakref
from collections.abc import Awaitable, Callable
from typing import Any

from retrievalagent.memory._secrets import mask_secrets
from retrievalagent.types import DrainReport

__all__ = ["BackgroundWrites", "drain_all_at_exit"]

logger = logging.getLogger("retrievalagent.memory")

_live: weakref.WeakSet[BackgroundWrites] = weakref.WeakSet()
FailureHook = Callable[[BaseException], None]
# A queued write: run it on a worker, or fail it without running.
_Job = tuple[Callable[[threading.Thread], None], FailureHook]
_WORKERS = 4
_MAX_STUCK = 32  # worker threads left inside hung backend calls, per BackgroundWrites


def _retrieve(waiter: asyncio.Future[None]) -> None:
    if not waiter.cancelled():
        waiter.exception()


@atexit.register
def drain_all_at_exit() -> None:
    """Drain every live ``BackgroundWrites`` with its exit timeout (safe to call twice)."""
    for writes in list(_live):
        writes._drain_at_exit()


#: Longest description of a write in a log line or a timeout's message.
_DESCRIBED_CHARS = 80


def _described(text: str) -> str:
    """What a write is about, as logs show it: secrets masked in the whole text, then cut
    (logs outlive the memory a user can erase, and a key cut first escapes the mask)."""
    text = " ".join(mask_secrets(text)[0].split())
    return text if len(text) <= _DESCRIBED_CHARS else text[: _DESCRIBED_CHARS - 1] + "…"


class BackgroundWrites:
    """Tracks scheduled memory writes.

    Args:
        max_pending: Writes allowed in flight before scheduling waits.
        timeout: Seconds one coroutine write may take before it is abandoned (failed).
        exit_timeout: Seconds the exit hook waits for pending writes.
    """

    def __init__(
        self, max_pending: int = 256, timeout: float = 10.0, exit_timeout: float = 30.0
    ) -> None:
        self.max_pending = max_pending
        self.timeout = timeout
        self.exit_timeout = exit_timeout
        self._slots = threading.BoundedSemaphore(max_pending)
        self._lock = threading.Lock()
        self._pending: set[cf.Future[None]] = set()
        self._scheduled = 0
        self._landed = 0
        self._failed = 0
        self._errors: list[str] = []
        self._queue: queue.SimpleQueue[_Job | None] = queue.SimpleQueue()
        self._workers: list[threading.Thread] = []
        self._stuck: set[threading.Thread] = set()  # workers inside a write past its timeout
        self._owners: dict[cf.Future[None], str] = {}  # pending write -> the user it is for
        _live.add(self)

    # -- accounting --------------------------------------------------------------------
    def counts(self) -> DrainReport:
        with self._lock:
            return DrainReport(landed=self._landed, failed=self._failed, pending=len(self._pending))

    @property
    def errors(self) -> list[str]:
        """The last failures, as ``"ExceptionType: message"`` (at most 50 kept)."""
        with self._lock:
            return list(self._errors)

    def _track(
        self, description: str, on_failure: FailureHook | None = None, owner: str = ""
    ) -> cf.Future[None]:
        future: cf.Future[None] = cf.Future()
        future.set_running_or_notify_cancel()
        with self._lock:
            self._scheduled += 1
            self._pending.add(future)
            self._owners[future] = owner

        description = _described(description)

        def done(f: cf.Future[None]) -> None:
            error = f.exception()
            reason = mask_secrets(f"{type(error).__name__}: {error}")[0] if error else ""
            if error is not None:
                # before the counts move: a drain that saw the failure finds it logged
                logger.warning("memory write failed (%s): %s", description, reason)
                if on_failure is not None:
                    try:
                        on_failure(error)
                    except Exception:  # a failing hook must not hide the write's own failure
                        logger.exception("memory write failure hook raised")
            with self._lock:
                self._pending.discard(f)
                self._owners.pop(f, None)
                if error is None:
                    self._landed += 1
                else:
                    self._failed += 1
                    self._errors = [*self._errors[-49:], reason]
            self._slots.release()

        future.add_done_callback(done)
        return future

    def _acquire_slot(self) -> float:
        started = time.perf_counter()
        if not self._slots.acquire(blocking=False):
            logger.warning("%d memory writes in flight; waiting for a free slot", self.max_pending)
            self._slots.acquire()
        return (time.perf_counter() - started) * 1e3

    # -- scheduling ----------------------------------------------------------------------
    def submit_thread(
        self,
        fn: Callable[[], Any],
        description: str = "",
        on_failure: FailureHook | None = None,
        owner: str = "",
    ) -> float:
        """Run ``fn`` on the worker pool; returns ms spent waiting for a slot.

        A write still running after ``timeout`` seconds is counted as failed (TimeoutError)
        and its slot freed; the thread cannot be killed, so the backend may still finish it.
        Its worker is replaced meanwhile, so the writes queued behind it still run.
        """
        waited = self._acquire_slot()
        future = self._track(description, on_failure, owner)
        timeout = self.timeout

        def settle(error: BaseException | None) -> None:
            with contextlib.suppress(cf.InvalidStateError):  # the watchdog was first
                if error is None:
                    future.set_result(None)
                else:
                    future.set_exception(error)

        def overrun(worker: threading.Thread) -> None:
            about = _described(description)
            settle(TimeoutError(f"memory write took longer than {timeout:g}s ({about})"))
            self._replace(worker)

        def run(worker: threading.Thread) -> None:
            if future.done():  # failed while queued
                return
            watchdog = threading.Timer(timeout, overrun, [worker])
            watchdog.daemon = True
            watchdog.start()
            try:
                fn()
            except BaseException as exc:
                settle(exc)
            else:
                settle(None)
            finally:
                watchdog.cancel()

        if not self._ensure_workers():
            settle(self._wedged_error())
        else:
            self._queue.put((run, settle))
        return waited

    def _start_worker(self) -> None:
        """Start one worker; the caller holds ``_lock``."""
        # Daemon threads, not a ThreadPoolExecutor: the interpreter joins executor threads
        # without a time limit at exit, which would make the exit drain unbounded.
        worker = threading.Thread(
            target=self._work, name=f"retrievalagent-memory-{len(self._workers)}", daemon=True
        )
        worker.start()
        self._workers.append(worker)

    def _ensure_workers(self) -> bool:
        """Start the pool if needed; False when every worker is stuck in a hung write."""
        with self._lock:
            if not self._workers:
                for _ in range(_WORKERS):
                    self._start_worker()
            return len(self._workers) > len(self._stuck)

    def _wedged_error(self) -> RuntimeError:
        return RuntimeError(
            f"memory write not run: {len(self._stuck)} earlier writes are stuck in the "
            "backend (is it hung?)"
        )

    def _replace(self, worker: threading.Thread) -> None:
        """``worker`` is stuck in a write past its timeout: start another in its place."""
        with self._lock:
            if worker not in self._workers or worker in self._stuck:
                return
            self._stuck.add(worker)
            if len(self._stuck) <= _MAX_STUCK:
                self._start_worker()
            wedged = len(self._workers) == len(self._stuck)
        if wedged:  # nobody left to run the queue: fail what waits in it
            logger.error("every memory write worker is stuck in the backend")
            sentinels = 0
            while True:
                try:
                    job = self._queue.get_nowait()
                except queue.Empty:
                    break
                if job is None:
                    sentinels += 1
                else:
                    job[1](self._wedged_error())
            for _ in range(sentinels):
                self._queue.put(None)

    def _work(self) -> None:
        me = threading.current_thread()
        while (job := self._queue.get()) is not None:
            job[0](me)
            with self._lock:
                if me in self._stuck:  # back from a hung write; retire if replaced
                    self._stuck.discard(me)
                    if me in self._workers and len(self._workers) - len(self._stuck) > _WORKERS:
                        self._workers.remove(me)
                        return

    async def submit_task(
        self,
        factory: Callable[[], Awaitable[Any]],
        description: str = "",
        on_failure: FailureHook | None = None,
        owner: str = "",
    ) -> float:
        """Run the coroutine from ``factory`` as a task on the running loop."""
        waited = await self._aacquire_slot()
        future = self._track(description, on_failure, owner)

        async def run() -> None:
            try:
                await self._write_once(factory, future, last_try=False)
            except asyncio.CancelledError:
                # The loop is closing with the write in flight (asyncio.run() returned
                # without adrain_background()): it cancels every task, then runs until they
                # end. Write again, to the end (bounded by the timeout), before it closes.
                # A write cut after it reached the backend may so be stored twice.
                task = asyncio.current_task()
                if task is not None and hasattr(task, "uncancel"):
                    task.uncancel()
                await self._write_once(factory, future, last_try=True)

        task = asyncio.get_running_loop().create_task(run(), name="retrievalagent-memory-write")
        task.add_done_callback(lambda t: None if t.cancelled() else t.exception())
        return waited

    async def _aacquire_slot(self) -> float:
        """``_acquire_slot`` without blocking the event loop."""
        if self._slots.acquire(blocking=False):
            return 0.0
        started = time.perf_counter()
        await asyncio.to_thread(self._slots.acquire)
        return (time.perf_counter() - started) * 1e3

    async def _write_once(
        self, factory: Callable[[], Awaitable[Any]], future: cf.Future[None], *, last_try: bool
    ) -> None:
        """One attempt at a coroutine write, settling ``future`` with how it ended.

        A cancellation (or another ``BaseException``) propagates; on the last try it also
        fails the write, since nothing will run it again.
        """
        try:
            await asyncio.wait_for(factory(), timeout=self.timeout)
        except Exception as exc:
            if not future.done():
                future.set_exception(exc)
        except BaseException as exc:
            if last_try and not future.done():
                future.set_exception(RuntimeError(f"write cancelled ({type(exc).__name__})"))
            raise
        else:
            future.set_result(None)

    # -- read-your-writes ------------------------------------------------------------------
    def _pending_of(self, owner: str) -> list[cf.Future[None]]:
        with self._lock:
            return [f for f, o in self._owners.items() if o == owner]

    def wait_for(self, owner: str, timeout: float) -> float:
        """Wait (at most ``timeout`` s) for ``owner``'s pending writes, so a turn sees what
        the user's previous turn stored; returns the ms waited."""
        pending = self._pending_of(owner)
        if not pending:
            return 0.0
        started = time.perf_counter()
        cf.wait(pending, timeout=timeout)
        return (time.perf_counter() - started) * 1e3

    async def await_for(self, owner: str, timeout: float) -> float:
        """``wait_for`` without blocking the event loop."""
        pending = self._pending_of(owner)
        if not pending:
            return 0.0
        started = time.perf_counter()
        await self._await(pending, timeout)
        return (time.perf_counter() - started) * 1e3

    # -- draining ------------------------------------------------------------------------
    def drain(self, timeout: float | None = None) -> DrainReport:
        """Wait until every scheduled write has landed or failed (or ``timeout`` passes)."""
        with self._lock:
            pending = list(self._pending)
        if pending:
            cf.wait(pending, timeout=timeout)
            self._counted(pending)
        return self.counts()

    def _counted(self, futures: list[cf.Future[None]]) -> None:
        """Wait (briefly) until the finished ``futures`` are counted: ``cf.wait`` wakes
        before a future's done-callback has run, and the report must add up."""
        deadline = time.monotonic() + 1.0
        while time.monotonic() < deadline:
            with self._lock:
                if not any(f.done() and f in self._pending for f in futures):
                    return
            time.sleep(0.001)

    async def adrain(self, timeout: float | None = None) -> DrainReport:
        """``drain`` for async callers: waits without blocking the event loop."""
        with self._lock:
            pending = list(self._pending)
        if pending:
            await self._await(pending, timeout)
        return self.counts()

    @staticmethod
    async def _await(pending: list[cf.Future[None]], timeout: float | None) -> None:
        waiters = [asyncio.wrap_future(f) for f in pending]
        for waiter in waiters:  # a failed write's error is counted, not "never retrieved"
            waiter.add_done_callback(_retrieve)
        await asyncio.wait(waiters, timeout=timeout)

    def _drain_at_exit(self) -> None:
        if not self._pending:
            return
        report = self.drain(self.exit_timeout)
        if report["pending"]:
            logger.error(
                "exiting with %d memory write(s) still pending after %.0fs; they are lost. "
                "Call drain_background() / await adrain_background() before exit.",
                report["pending"],
                self.exit_timeout,
            )

    def close(self, timeout: float | None = None) -> DrainReport:
        report = self.drain(timeout)
        with self._lock:
            workers, self._workers = self._workers, []
            self._stuck.clear()
        for _ in workers:
            self._queue.put(None)
        return report

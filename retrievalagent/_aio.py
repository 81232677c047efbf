"""Bridging sync callers and coroutine-only backends."""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Awaitable, Callable
from typing import TypeVar

__all__ = ["in_thread", "run_sync"]

T = TypeVar("T")


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
    box: dict[str, object] = {}

    def target() -> None:
        try:
            box["value"] = asyncio.run(main())
        except BaseException as exc:  # re-raised in the caller's thread
            box["error"] = exc

    thread = threading.Thread(target=target, name="retrievalagent-run-sync", daemon=True)
    thread.start()
    thread.join()
    if "error" in box:
        raise box["error"]  # type: ignore[misc]
    return box["value"]  # type: ignore[return-value]


_IN_FLIGHT = threading.BoundedSemaphore(256)


async def in_thread(fn: Callable[[], T]) -> T:
    """Await ``fn()`` run on its own daemon thread, not on the loop's default executor.

    For blocking backend calls under ``ainvoke`` that may hang (a memory backend that never
    answers): the caller can give up (``asyncio.wait_for``) while the thread lingers, and
    lingering threads cannot starve the executor the rest of the graph runs on. At most 256
    such threads exist per process; past that, callers wait (without blocking the loop) for
    one to finish, so a hung backend cannot pile up threads without bound.
    """
    while not _IN_FLIGHT.acquire(blocking=False):
        await asyncio.sleep(0.01)
    loop = asyncio.get_running_loop()
    future: asyncio.Future[T] = loop.create_future()

    def settle(value: object, error: BaseException | None) -> None:
        if future.done():  # the caller gave up (cancelled)
            return
        if error is not None:
            future.set_exception(error)
        else:
            future.set_result(value)  # type: ignore[arg-type]

    def target() -> None:
        value: object = None
        error: BaseException | None = None
        try:
            value = fn()
        except BaseException as exc:
            error = exc
        finally:
            _IN_FLIGHT.release()
        with contextlib.suppress(RuntimeError):  # the loop is closed: nobody is waiting
            loop.call_soon_threadsafe(settle, value, error)

    try:
        threading.Thread(target=target, name="retrievalagent-blocking-call", daemon=True).start()
    except BaseException:
        _IN_FLIGHT.release()
        raise
    return await future

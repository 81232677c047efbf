"""One lock per user of a memory engine, for calls that must not interleave.

Two ``forget`` calls of one user (two conversations erased at once, from two requests)
each read the user's memories, then write from what they read: one puts back a fact the
other is erasing, or rewrites a history the other has just changed, and what was forgotten
comes back. A write of a fact reads the one it replaces the same way: two imports at once
lose one of their facts, and one beside a forget keeps forgotten words in a history or
erases what it wrote. Forgets, take-backs and conversation writes of one user take turns.
The locks are kept per engine (the LangGraph store, the mem0 instance), so agents sharing
one share them. They serialize one process; a PostgreSQL store's calls also take the
user's lock in its database (``_shared_locks``), so its workers take turns as well.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
import time
from collections.abc import AsyncIterator, Iterable, Iterator
from typing import Any
from weakref import WeakKeyDictionary

from retrievalagent.memory._shared_locks import SharedLocks, shared_locks

__all__ = ["UserLocks", "user_locks"]

logger = logging.getLogger("retrievalagent.memory")

#: How long a call waits for another one of the same user before it gives up.
WAIT_SECONDS = 120.0
#: How long a blocking call made on an event loop's thread waits (see ``UserLocks.held``).
LOOP_WAIT_SECONDS = 2.0
#: How often a coroutine looks whether the lock is free (it never blocks its loop).
_POLL_SECONDS = 0.005


class UserLocks:
    """A lock per user id, made when first asked for and dropped when nobody holds it."""

    def __init__(self, shared: SharedLocks | None = None) -> None:
        self._guard = threading.Lock()
        self._locks: dict[str, tuple[threading.Lock, int]] = {}
        self._shared = shared  # the same user's lock across processes, where there is one

    def _take(self, user_id: str) -> threading.Lock:
        with self._guard:
            lock, users = self._locks.get(user_id, (threading.Lock(), 0))
            self._locks[user_id] = (lock, users + 1)
            return lock

    def _leave(self, user_id: str) -> None:
        with self._guard:
            lock, users = self._locks[user_id]
            if users > 1:
                self._locks[user_id] = (lock, users - 1)
            else:
                del self._locks[user_id]

    @contextlib.contextmanager
    def _entry(self, user_id: str) -> Iterator[threading.Lock]:
        """The user's lock, kept while a caller waits for it or holds it."""
        lock = self._take(user_id)
        try:
            yield lock
        finally:
            self._leave(user_id)

    @contextlib.contextmanager
    def held(self, user_id: str, what: str = "a forget") -> Iterator[None]:
        """The user's lock, for a blocking call. Called on a thread that runs an event loop
        (a sync call inside async code), it waits ``LOOP_WAIT_SECONDS`` at most: the holder
        may be a coroutine of that very loop, which cannot go on while the loop is blocked;
        the call then goes on without the lock, as before there was one, and says so."""
        on_loop = _runs_a_loop()
        deadline = time.monotonic() + WAIT_SECONDS
        with self._entry(user_id) as lock:
            if lock.acquire(timeout=LOOP_WAIT_SECONDS if on_loop else WAIT_SECONDS):
                with _releasing(lock), self._shared_held(user_id, deadline, what):
                    yield
            elif on_loop:
                logger.warning(
                    "%s of a user's memory called from async code went on without waiting "
                    "for another one of the same user (use the async method there)",
                    what,
                )
                yield
            else:
                raise TimeoutError(_busy(what))

    @contextlib.asynccontextmanager
    async def aheld(self, user_id: str, what: str = "a forget") -> AsyncIterator[None]:
        """:meth:`held` for a coroutine: it polls, so that a loop is never blocked and a
        cancelled coroutine never holds the lock."""
        with self._entry(user_id) as lock:
            deadline = time.monotonic() + WAIT_SECONDS
            while not lock.acquire(blocking=False):
                if time.monotonic() > deadline:
                    raise TimeoutError(_busy(what))
                await asyncio.sleep(_POLL_SECONDS)
            with _releasing(lock):
                async with self._shared_held(user_id, deadline, what, coroutine=True):
                    yield

    def _shared_held(
        self, user_id: str, deadline: float, what: str, *, coroutine: bool = False
    ) -> Any:
        """The user's lock across processes where the engine has one (``_shared_locks``);
        else a context that holds nothing (either kind of ``with``)."""
        if self._shared is None:
            return contextlib.nullcontext()
        if coroutine:
            return self._shared.ahold(user_id, deadline, _busy(what))
        return self._shared.hold(user_id, deadline, _busy(what))

    @contextlib.contextmanager
    def held_all(self, user_ids: Iterable[str], what: str) -> Iterator[None]:
        """:meth:`held` for several users at once, taken in a fixed order (no deadlock)."""
        with contextlib.ExitStack() as stack:
            for user_id in sorted(set(user_ids)):
                stack.enter_context(self.held(user_id, what))
            yield

    @contextlib.asynccontextmanager
    async def aheld_all(self, user_ids: Iterable[str], what: str) -> AsyncIterator[None]:
        async with contextlib.AsyncExitStack() as stack:
            for user_id in sorted(set(user_ids)):
                await stack.enter_async_context(self.aheld(user_id, what))
            yield


@contextlib.contextmanager
def _releasing(lock: threading.Lock) -> Iterator[None]:
    try:
        yield
    finally:
        lock.release()


def _runs_a_loop() -> bool:
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return False
    return True


def _busy(what: str) -> str:
    return (
        f"{what} of this user's memory waited {WAIT_SECONDS:g}s for another one of the same "
        "user to finish; nothing was changed, try again"
    )


_OF_ENGINE: WeakKeyDictionary[Any, UserLocks] = WeakKeyDictionary()
#: Engines that cannot be weakly referenced or hashed, by id (a reused id only shares locks).
_OF_ID: dict[int, UserLocks] = {}
_OF_ENGINE_GUARD = threading.Lock()


def user_locks(engine: Any) -> UserLocks:
    """The user locks of a memory engine (one set per engine object)."""
    with _OF_ENGINE_GUARD:
        try:
            locks = _OF_ENGINE.get(engine)
            if locks is None:
                locks = _OF_ENGINE[engine] = UserLocks(shared_locks(engine))
        except TypeError:
            locks = _OF_ID.get(id(engine))
            if locks is None:  # made once: a new one is not built on every call
                locks = _OF_ID[id(engine)] = UserLocks(shared_locks(engine))
        return locks

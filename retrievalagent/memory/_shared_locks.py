"""A user's memory writes take turns across processes too, where the store is PostgreSQL.

``_locks`` keeps one process's calls of a user from interleaving; two workers of one
deployment (two uvicorn workers, a server and a `memory import` beside it) each have their
own. Between them a fact written from one conversation could replace, unseen, the one the
other wrote a moment before, or come back right after the other erased its conversation.
A LangGraph ``PostgresStore`` (or ``AsyncPostgresStore``) already shares one database, so
it holds the lock: a session advisory lock per user, taken with ``pg_try_advisory_lock``
and polled.

The locks live on a connection of their own, one per store and process, opened to the
store's database when first needed. Never on the store's connections: a pool whose
connections each held a lock would leave none for the store's own calls, and a call
broken off halfway (Ctrl-C) would leave the store's connection in the middle of a
command. Ours is closed instead, which gives back every lock it held; a crashed process's
locks go with its connection the same way. Other stores have no second process to meet
(``InMemoryStore``), or none this library can lock in: they get no shared lock.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import hashlib
import logging
import sys
import threading
import time
import weakref
from collections.abc import AsyncIterator, Iterator
from typing import Any

from retrievalagent._threads import in_thread, on_daemon_thread

__all__ = ["SharedLocks", "shared_locks"]

logger = logging.getLogger("retrievalagent.memory")

#: How often a waiting call asks again.
_POLL_SECONDS = 0.01
_TRY = "SELECT pg_try_advisory_lock(%s)"
_UNLOCK = "SELECT pg_advisory_unlock(%s)"


def lock_key(user_id: str) -> int:
    """The advisory lock's key of a user: 64 bits of a hash of the id (two users sharing
    one would only wait for each other)."""
    digest = hashlib.blake2b(f"retrievalagent.memory\0{user_id}".encode(), digest_size=8)
    return int.from_bytes(digest.digest(), "big", signed=True)


class SharedLocks:
    """Advisory locks in the database of a LangGraph Postgres store, held on a connection
    of their own (blocking; a coroutine asks on a thread)."""

    def __init__(self, conninfo: str, kwargs: dict[str, Any]) -> None:
        self._conninfo = conninfo
        self._kwargs = {k: v for k, v in kwargs.items() if k not in _NOT_OURS}
        self._guard = threading.Lock()
        self._conn: Any = None

    # -- the connection ----------------------------------------------------------------------
    def _ask(self, key: int, unlock: bool) -> bool:
        """``pg_try_advisory_lock`` (``unlock``: ``pg_advisory_unlock``) of ``key``. On any
        failure the connection is closed (its locks with it) and opened again next time;
        a question on a connection a restarted server dropped is asked once more."""
        import psycopg

        with self._guard:
            opened = self._conn is not None and not self._conn.closed
            try:
                return self._query(key, unlock)
            except psycopg.OperationalError:
                if not opened or unlock:  # a lock to give back went with the connection
                    raise
            return self._query(key, unlock)

    def _query(self, key: int, unlock: bool) -> bool:
        import psycopg
        from psycopg.rows import tuple_row

        try:
            if self._conn is None or self._conn.closed:
                self._conn = psycopg.connect(
                    self._conninfo, **self._kwargs, autocommit=True, row_factory=tuple_row
                )
            if unlock:
                row = self._conn.execute(_UNLOCK, (key,)).fetchone()
            else:
                row = self._conn.execute(_TRY, (key,)).fetchone()
        except BaseException:
            self.close_connection()
            raise
        return bool(row and row[0])

    def close_connection(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            with contextlib.suppress(Exception):
                conn.close()

    def _given_back(self, key: int) -> None:
        import psycopg

        try:
            self._ask(key, True)
        except psycopg.Error as exc:  # closed: the lock went with the connection
            logger.warning("gave back a user's memory lock by closing its connection: %s", exc)

    # -- blocking calls --------------------------------------------------------------------
    @contextlib.contextmanager
    def hold(self, user_id: str, deadline: float, busy: str) -> Iterator[None]:
        """The user's lock until the block ends; ``TimeoutError(busy)`` past ``deadline``
        (``time.monotonic()``)."""
        key = lock_key(user_id)
        while not self._ask(key, False):
            if time.monotonic() > deadline:
                raise TimeoutError(busy)
            time.sleep(_POLL_SECONDS)
        try:
            yield
        finally:
            self._given_back(key)

    # -- coroutines ------------------------------------------------------------------------
    @contextlib.asynccontextmanager
    async def ahold(self, user_id: str, deadline: float, busy: str) -> AsyncIterator[None]:
        """:meth:`hold` for a coroutine. A cancelled wait still learns whether it got the
        lock (the question runs on to its end on its thread), and gives it back if so."""
        key = lock_key(user_id)
        while not await self._aget(key):
            if time.monotonic() > deadline:
                raise TimeoutError(busy)
            await asyncio.sleep(_POLL_SECONDS)
        try:
            yield
        finally:
            await self._agive_back(key)

    async def _aget(self, key: int) -> bool:
        """Ask on a thread of its own, which runs on to its end whatever becomes of the
        caller: a lock got for a caller cancelled meanwhile (or whose loop has closed) is
        given back there, not left to a callback of a loop that may never run again."""
        return await in_thread(
            lambda: self._ask(key, False), unclaimed=functools.partial(self._given_back_if, key)
        )

    def _given_back_if(self, key: int, got: bool) -> None:
        if got:  # got for a caller who is gone
            self._given_back(key)

    async def _agive_back(self, key: int) -> None:
        """Give ``key`` back on a thread that never waits for one of ``in_thread``'s
        bounded pool (a hung backend may fill it while this holds the lock)."""
        try:
            asyncio.get_running_loop()
        except RuntimeError:  # a coroutine closed with its loop: nothing to await on
            on_daemon_thread(lambda: self._given_back(key), "retrievalagent-memory-unlock")
            return
        await in_thread(lambda: self._given_back(key), bounded=False)


#: Connection arguments of the store's that do not fit ours (we set them).
_NOT_OURS = frozenset({"autocommit", "row_factory", "prepare_threshold", "cursor_factory"})


def _connection_of(store: Any) -> tuple[str, dict[str, Any]] | None:
    """How to open a connection to ``store``'s database: its pool's conninfo and
    arguments, or its connection's (with the password, which ``info.dsn`` leaves out)."""
    conn: Any = getattr(store, "conn", None)
    if hasattr(conn, "conninfo") and hasattr(conn, "kwargs"):  # a psycopg pool
        return str(conn.conninfo), dict(conn.kwargs or {})
    info = getattr(conn, "info", None)
    if info is None:
        return None
    password = getattr(info, "password", None)
    return str(info.dsn), ({"password": password} if password else {})


def shared_locks(engine: Any) -> SharedLocks | None:
    """The shared locks of a memory engine: a LangGraph Postgres store's, else None."""
    postgres = sys.modules.get("langgraph.store.postgres")
    if postgres is None:  # not imported, so not the engine: nothing to import for others
        return None
    if not isinstance(engine, postgres.PostgresStore | postgres.AsyncPostgresStore):
        return None
    where = _connection_of(engine)
    if where is None:
        return None
    locks = SharedLocks(*where)
    weakref.finalize(engine, locks.close_connection)  # the store let go: its locks' too
    return locks

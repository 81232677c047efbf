"""A user's memory writes take turns across processes too, where the store is PostgreSQL.

``_locks`` keeps one process's calls of a user from interleaving; two workers of one
deployment (two uvicorn workers, a server and a `memory import` beside it) each have their
own. Between them a fact written from one conversation could replace, unseen, the one the
other wrote a moment before, or come back right after the other erased its conversation.
A LangGraph ``PostgresStore`` (or ``AsyncPostgresStore``) already shares one database, so
it holds the lock: a session advisory lock per user, taken with ``pg_try_advisory_lock``
and polled (a blocking wait would tie up the connection every other user of the process
shares). A crashed process's locks go with its session. Other stores have no second
process to meet (``InMemoryStore``), or none this library can lock in (another database):
they get no shared lock.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import logging
import time
from collections.abc import AsyncIterator, Iterator
from typing import Any

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
    """Advisory locks in the database of a LangGraph Postgres store."""

    def __init__(self, store: Any, *, is_async: bool) -> None:
        self._store = store
        self._async = is_async

    # -- blocking calls --------------------------------------------------------------------
    @contextlib.contextmanager
    def hold(self, user_id: str, deadline: float, busy: str) -> Iterator[None]:
        """The user's lock until the block ends; ``TimeoutError(busy)`` past ``deadline``
        (``time.monotonic()``)."""
        with self._connection() as conn:
            if conn is None:
                yield
                return
            key = lock_key(user_id)
            while not _ask(conn, _TRY, key):
                if time.monotonic() > deadline:
                    raise TimeoutError(busy)
                time.sleep(_POLL_SECONDS)
            try:
                yield
            finally:
                _release(conn, key)

    @contextlib.contextmanager
    def _connection(self) -> Iterator[Any]:
        """A connection to hold the lock on for the block (None: no shared lock here)."""
        from psycopg_pool import ConnectionPool

        store = self._store
        if self._async or getattr(store, "pipe", None) is not None:
            yield None  # an async store in a blocking call; a pipeline: see ``_skipped``
            return
        conn = store.conn
        if isinstance(conn, ConnectionPool):
            if (conn.max_size or 0) < 2:  # the store's own calls would wait for this one
                _skipped("a connection pool of one")
                yield None
                return
            with conn.connection() as held:
                yield held
        else:
            yield conn

    # -- coroutines ------------------------------------------------------------------------
    @contextlib.asynccontextmanager
    async def ahold(self, user_id: str, deadline: float, busy: str) -> AsyncIterator[None]:
        """:meth:`hold` for a coroutine (a blocking store's lock is asked on a thread)."""
        if not self._async:
            from retrievalagent._threads import in_thread

            with self._connection() as conn:
                if conn is None:
                    yield
                    return
                key = lock_key(user_id)
                while not await in_thread(lambda: _ask(conn, _TRY, key)):
                    if time.monotonic() > deadline:
                        raise TimeoutError(busy)
                    await asyncio.sleep(_POLL_SECONDS)
                try:
                    yield
                finally:
                    await in_thread(lambda: _release(conn, key))
            return
        async with self._aconnection() as conn:
            if conn is None:
                yield
                return
            key = lock_key(user_id)
            while not await _aask(conn, _TRY, key):
                if time.monotonic() > deadline:
                    raise TimeoutError(busy)
                await asyncio.sleep(_POLL_SECONDS)
            try:
                yield
            finally:
                await _arelease(conn, key)

    @contextlib.asynccontextmanager
    async def _aconnection(self) -> AsyncIterator[Any]:
        from psycopg_pool import AsyncConnectionPool

        store = self._store
        if getattr(store, "pipe", None) is not None:
            yield None
            return
        conn = store.conn
        if isinstance(conn, AsyncConnectionPool):
            if (conn.max_size or 0) < 2:
                _skipped("a connection pool of one")
                yield None
                return
            async with conn.connection() as held:
                yield held
        else:
            yield conn


def _ask(conn: Any, query: str, key: int) -> bool:
    from psycopg.rows import tuple_row

    with (
        contextlib.nullcontext() if conn.autocommit else conn.transaction(),
        conn.cursor(row_factory=tuple_row) as cur,
    ):
        cur.execute(query, (key,))
        row = cur.fetchone()
    return bool(row and row[0])


def _release(conn: Any, key: int) -> None:
    import psycopg

    with contextlib.suppress(psycopg.Error):  # the session is gone, and its locks with it
        _ask(conn, _UNLOCK, key)


async def _aask(conn: Any, query: str, key: int) -> bool:
    from psycopg.rows import tuple_row

    async with contextlib.AsyncExitStack() as stack:
        if not conn.autocommit:
            await stack.enter_async_context(conn.transaction())
        cur = await stack.enter_async_context(conn.cursor(row_factory=tuple_row))
        await cur.execute(query, (key,))
        row = await cur.fetchone()
    return bool(row and row[0])


async def _arelease(conn: Any, key: int) -> None:
    import psycopg

    with contextlib.suppress(psycopg.Error):
        await _aask(conn, _UNLOCK, key)


_SKIPPED: set[str] = set()


def _skipped(why: str) -> None:
    if why not in _SKIPPED:
        _SKIPPED.add(why)
        logger.warning(
            "memory writes of one user are not serialized across processes with %s: "
            "give the PostgresStore a pool of at least 2 connections",
            why,
        )


def shared_locks(engine: Any) -> SharedLocks | None:
    """The shared locks of a memory engine: a LangGraph Postgres store's, else None."""
    try:
        from langgraph.store.postgres import AsyncPostgresStore, PostgresStore
    except ImportError:  # pragma: no cover - the postgres extra is not installed
        return None
    if isinstance(engine, AsyncPostgresStore):
        return SharedLocks(engine, is_async=True)
    if isinstance(engine, PostgresStore):
        return SharedLocks(engine, is_async=False)
    return None

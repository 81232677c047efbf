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
import weakref
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from typing import Any, NamedTuple

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
        # weakly: these locks are kept in a WeakKeyDictionary under the store itself, and a
        # value holding its key would keep both alive for ever
        self._store = weakref.ref(store)
        self._async = is_async

    # -- blocking calls --------------------------------------------------------------------
    @contextlib.contextmanager
    def hold(self, user_id: str, deadline: float, busy: str) -> Iterator[None]:
        """The user's lock until the block ends; ``TimeoutError(busy)`` past ``deadline``
        (``time.monotonic()``)."""
        with self._connection() as session:
            if session is None:
                yield
                return
            key = lock_key(user_id)
            while not _try(session, key):
                if time.monotonic() > deadline:
                    raise TimeoutError(busy)
                time.sleep(_POLL_SECONDS)
            try:
                yield
            finally:
                _release(session, key)

    @contextlib.contextmanager
    def _connection(self) -> Iterator[_Session | None]:
        """A connection to hold the lock on for the block, with what guards its use (None:
        no shared lock here). The store's own connection is shared with its calls on other
        threads, which use it in pipeline mode under the store's lock: ours is taken too."""
        from psycopg_pool import AsyncConnectionPool, ConnectionPool

        store = self._store()
        if store is None or getattr(store, "pipe", None) is not None:
            if store is not None:
                _skipped("a store in pipeline mode")
            yield None
            return
        conn = store.conn
        if self._async:  # a blocking call on an async store: asked on the store's loop
            if isinstance(conn, AsyncConnectionPool):
                _skipped("a blocking call on an AsyncPostgresStore's connection pool")
                yield None
            else:  # (never from the loop's own thread: the store refuses such calls too)
                yield _Session(conn, store.lock, store.loop)
            return
        if isinstance(conn, ConnectionPool):
            if (conn.max_size or 0) < 2:  # the store's own calls would wait for this one
                _skipped("a connection pool of one")
                yield None
                return
            with conn.connection() as held:
                yield _Session(held, contextlib.nullcontext())
        else:
            yield _Session(conn, store.lock)

    # -- coroutines ------------------------------------------------------------------------
    @contextlib.asynccontextmanager
    async def ahold(self, user_id: str, deadline: float, busy: str) -> AsyncIterator[None]:
        """:meth:`hold` for a coroutine (a blocking store's lock is asked on a thread). A
        cancelled wait still learns whether it got the lock, and gives it back if so."""
        async with contextlib.AsyncExitStack() as stack:
            if self._async:
                session = await stack.enter_async_context(self._aconnection())
            else:
                session = stack.enter_context(self._connection())
            if session is None:
                yield
                return
            key = lock_key(user_id)
            ask = _aask if self._async else _threaded_ask
            while not await _settled(ask(session, key, False), session, key, ask):
                if time.monotonic() > deadline:
                    raise TimeoutError(busy)
                await asyncio.sleep(_POLL_SECONDS)
            try:
                yield
            finally:
                await _settled(_given_back(ask, session, key), session, key, ask)

    @contextlib.asynccontextmanager
    async def _aconnection(self) -> AsyncIterator[_Session | None]:
        from psycopg_pool import AsyncConnectionPool

        store = self._store()
        if store is None or getattr(store, "pipe", None) is not None:
            if store is not None:
                _skipped("a store in pipeline mode")
            yield None
            return
        conn = store.conn
        if isinstance(conn, AsyncConnectionPool):
            if (conn.max_size or 0) < 2:
                _skipped("a connection pool of one")
                yield None
                return
            async with conn.connection() as held:
                yield _Session(held, contextlib.nullcontext())
        else:
            yield _Session(conn, store.lock)


class _Session(NamedTuple):
    """A connection the lock is held on, and the lock its use takes; ``loop``: the event
    loop an async connection is used on, for a blocking call."""

    conn: Any
    guard: Any
    loop: asyncio.AbstractEventLoop | None = None


def _ask(session: _Session, key: int, unlock: bool) -> bool:
    """``pg_try_advisory_lock`` (or, ``unlock``, ``pg_advisory_unlock``) of ``key``."""
    from psycopg.rows import tuple_row

    if session.loop is not None:
        asked = asyncio.run_coroutine_threadsafe(_aask(session, key, unlock), session.loop)
        return asked.result()

    conn = session.conn
    with (
        session.guard,
        contextlib.nullcontext() if conn.autocommit else conn.transaction(),
        conn.cursor(row_factory=tuple_row) as cur,
    ):
        if unlock:
            cur.execute(_UNLOCK, (key,))
        else:
            cur.execute(_TRY, (key,))
        row = cur.fetchone()
    return bool(row and row[0])


def _try(session: _Session, key: int) -> bool:
    """``pg_try_advisory_lock``; a call broken off after sending it (Ctrl-C) gives back
    what the database may have granted."""
    import psycopg

    try:
        return _ask(session, key, False)
    except psycopg.Error:  # refused, or the session is gone: nothing granted to give back
        raise
    except BaseException:
        _release(session, key)
        raise


def _release(session: _Session, key: int) -> None:
    import psycopg

    try:
        _ask(session, key, True)
    except psycopg.Error as exc:  # a broken session takes its locks with it
        logger.warning("could not give back a user's memory lock: %s", exc)


async def _aask(session: _Session, key: int, unlock: bool) -> bool:
    from psycopg.rows import tuple_row

    conn = session.conn
    async with contextlib.AsyncExitStack() as stack:
        await stack.enter_async_context(session.guard)
        if not conn.autocommit:
            await stack.enter_async_context(conn.transaction())
        cur = await stack.enter_async_context(conn.cursor(row_factory=tuple_row))
        if unlock:
            await cur.execute(_UNLOCK, (key,))
        else:
            await cur.execute(_TRY, (key,))
        row = await cur.fetchone()
    return bool(row and row[0])


async def _threaded_ask(session: _Session, key: int, unlock: bool) -> bool:
    from retrievalagent._threads import in_thread

    return await in_thread(lambda: _ask(session, key, unlock))


Ask = Callable[[_Session, int, bool], Awaitable[bool]]


async def _given_back(ask: Ask, session: _Session, key: int) -> bool:
    import psycopg

    try:
        await ask(session, key, True)
    except psycopg.Error as exc:
        logger.warning("could not give back a user's memory lock: %s", exc)
    return False


#: Gives-back still running after the call that started them was cancelled.
_PENDING: set[asyncio.Task[Any]] = set()


async def _settled(asked: Awaitable[bool], session: _Session, key: int, ask: Ask) -> bool:
    """``asked``, run to its end even if the caller is cancelled meanwhile: a lock it
    got then is given back (a cancelled coroutine never keeps a user's memory locked)."""
    task: asyncio.Task[bool] = asyncio.ensure_future(asked)
    try:
        return await asyncio.shield(task)
    except asyncio.CancelledError:

        def give_back(done: asyncio.Task[bool]) -> None:
            if not done.cancelled() and done.exception() is None and done.result():
                back = asyncio.ensure_future(_given_back(ask, session, key))
                _PENDING.add(back)
                back.add_done_callback(_PENDING.discard)

        _PENDING.add(task)
        task.add_done_callback(_PENDING.discard)
        task.add_done_callback(give_back)
        raise


_SKIPPED: set[str] = set()


def _skipped(why: str) -> None:
    if why not in _SKIPPED:
        _SKIPPED.add(why)
        logger.warning(
            "memory writes of one user do not take turns across processes with %s "
            "(see 'Seeing and erasing what is remembered' in docs/memory.md)",
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

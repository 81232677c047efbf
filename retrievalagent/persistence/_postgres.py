"""PostgreSQL checkpointers and stores on a connection pool that survives dropped connections.

LangGraph's Postgres classes need connections opened with ``autocommit=True`` (``setup()``
commits its migrations itself), ``prepare_threshold=0`` (no server-side prepared
statements, which break behind PgBouncer-style poolers) and ``row_factory=dict_row`` (their
queries read rows by column name). A single long-lived connection (what
``from_conn_string`` opens) fails for good once the server or a proxy drops it — the
"SSL connection has been closed unexpectedly" reports against ``AsyncPostgresSaver``. The
helpers here open a pool instead:

* ``check=`` runs a cheap no-op query on every checkout, so a connection that died while idle
  (``pg_terminate_backend``, a restarted server, an idle timeout) is replaced before the
  saver sees it;
* ``max_idle`` / ``max_lifetime`` recycle connections before proxies reap them;
* TCP keepalives notice half-open connections on the network path.

``setup()`` runs once per process and database URL, under a PostgreSQL advisory lock so
several processes starting together do not race on ``CREATE TABLE``.

The pool is the returned object's ``.conn``; it is closed at interpreter exit (sync) or
by ``saver.conn.close()`` / ``await saver.conn.close()``.
"""

from __future__ import annotations

import asyncio
import threading
import time
import weakref
import zlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # psycopg is an optional dependency: imported only when used
    from langgraph.checkpoint.postgres import PostgresSaver
    from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver
    from langgraph.store.postgres import AsyncPostgresStore, PostgresStore

__all__ = [
    "apostgres_checkpointer",
    "apostgres_store",
    "connection_kwargs",
    "postgres_checkpointer",
    "postgres_store",
]

_done: set[tuple[str, str]] = set()
_done_lock = threading.Lock()


def _require() -> None:
    try:
        import langgraph.checkpoint.postgres  # noqa: F401
        import psycopg_pool  # noqa: F401
    except ImportError as exc:  # pragma: no cover - depends on the installed extras
        from retrievalagent.errors import ConfigError

        raise ConfigError(
            "PostgreSQL persistence needs `pip install 'retrievalagent[postgres]'` "
            f"(langgraph-checkpoint-postgres and psycopg[pool]): {exc}"
        ) from exc


def connection_kwargs(application_name: str | None = None) -> dict[str, Any]:
    """The connection settings LangGraph's Postgres classes need, plus TCP keepalives."""
    from psycopg.rows import dict_row

    kwargs: dict[str, Any] = {
        "autocommit": True,
        "prepare_threshold": 0,
        "row_factory": dict_row,
        "keepalives": 1,
        "keepalives_idle": 30,
        "keepalives_interval": 10,
        "keepalives_count": 5,
    }
    if application_name:
        kwargs["application_name"] = application_name
    return kwargs


def _pool_args(
    min_size: int,
    max_size: int,
    max_idle: float,
    max_lifetime: float,
    timeout: float,
    application_name: str | None,
) -> dict[str, Any]:
    return {
        "min_size": min_size,
        "max_size": max_size,
        "max_idle": max_idle,
        "max_lifetime": max_lifetime,
        "timeout": timeout,
        "kwargs": connection_kwargs(application_name),
        "name": application_name or "retrievalagent",
    }


def _lock_key(kind: str) -> int:
    return zlib.crc32(f"retrievalagent.setup.{kind}".encode())


def _first_time(kind: str, url: str) -> bool:
    with _done_lock:
        return (kind, url) not in _done


def _mark_done(kind: str, url: str) -> None:
    with _done_lock:
        _done.add((kind, url))


# The lock is taken with pg_try_advisory_lock in a polling loop, not pg_advisory_lock: the
# migrations run CREATE INDEX CONCURRENTLY, which waits for every open transaction, and a
# session blocked inside pg_advisory_lock is one — the two would deadlock.
_TRY_LOCK = "SELECT pg_try_advisory_lock(%s) AS ok"
_UNLOCK = "SELECT pg_advisory_unlock(%s)"
_POLL = 0.05


def _setup(pool: Any, kind: str, url: str, make: Any, timeout: float) -> None:
    """Run ``make(conn).setup()`` once per process, one process at a time."""
    if not _first_time(kind, url):
        return
    key, deadline = _lock_key(kind), time.monotonic() + timeout
    with pool.connection() as conn:
        while not conn.execute(_TRY_LOCK, (key,)).fetchone()["ok"]:
            if time.monotonic() > deadline:
                raise TimeoutError(f"another process kept the {kind} setup lock for {timeout}s")
            time.sleep(_POLL)
        try:
            make(conn).setup()
        finally:
            conn.execute(_UNLOCK, (key,))
    _mark_done(kind, url)


async def _asetup(pool: Any, kind: str, url: str, make: Any, timeout: float) -> None:
    if not _first_time(kind, url):
        return
    key, deadline = _lock_key(kind), time.monotonic() + timeout
    async with pool.connection() as conn:
        while not (await (await conn.execute(_TRY_LOCK, (key,))).fetchone())["ok"]:
            if time.monotonic() > deadline:
                raise TimeoutError(f"another process kept the {kind} setup lock for {timeout}s")
            await asyncio.sleep(_POLL)
        try:
            await make(conn).setup()
        finally:
            await conn.execute(_UNLOCK, (key,))
    _mark_done(kind, url)


def _open_pool(url: str, args: dict[str, Any]) -> Any:
    from psycopg_pool import ConnectionPool

    pool = ConnectionPool(url, check=ConnectionPool.check_connection, open=False, **args)
    pool.open(wait=True, timeout=args["timeout"])
    return pool


async def _aopen_pool(url: str, args: dict[str, Any]) -> Any:
    from psycopg_pool import AsyncConnectionPool

    pool = AsyncConnectionPool(url, check=AsyncConnectionPool.check_connection, open=False, **args)
    await pool.open(wait=True, timeout=args["timeout"])
    return pool


def postgres_checkpointer(
    url: str,
    *,
    min_size: int = 1,
    max_size: int = 10,
    max_idle: float = 300.0,
    max_lifetime: float = 1800.0,
    timeout: float = 30.0,
    application_name: str | None = None,
) -> PostgresSaver:
    """A ready ``PostgresSaver`` on a self-healing connection pool (``setup()`` done).

    Args:
        url: A libpq connection string, e.g. ``"postgresql://user:pass@host:5432/db"``.
        min_size: Connections kept open.
        max_size: Most connections open at once.
        max_idle: Seconds an unused connection above ``min_size`` is kept.
        max_lifetime: Seconds after which a connection is replaced.
        timeout: Seconds to wait for a connection (also for opening the pool).
        application_name: Shown in ``pg_stat_activity``.
    """
    _require()
    from langgraph.checkpoint.postgres import PostgresSaver

    args = _pool_args(min_size, max_size, max_idle, max_lifetime, timeout, application_name)
    pool = _open_pool(url, args)
    try:
        _setup(pool, "checkpointer", url, PostgresSaver, max(timeout, 60.0))
    except BaseException:
        pool.close()
        raise
    saver = PostgresSaver(pool)
    weakref.finalize(saver, pool.close)  # also runs at interpreter exit
    return saver


async def apostgres_checkpointer(
    url: str,
    *,
    min_size: int = 1,
    max_size: int = 10,
    max_idle: float = 300.0,
    max_lifetime: float = 1800.0,
    timeout: float = 30.0,
    application_name: str | None = None,
) -> AsyncPostgresSaver:
    """Async :func:`postgres_checkpointer`: an ``AsyncPostgresSaver`` on an async pool.

    Call it on the event loop that will use the saver; close the pool with
    ``await saver.conn.close()``.
    """
    _require()
    from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver

    args = _pool_args(min_size, max_size, max_idle, max_lifetime, timeout, application_name)
    pool = await _aopen_pool(url, args)
    try:
        await _asetup(pool, "checkpointer", url, AsyncPostgresSaver, max(timeout, 60.0))
    except BaseException:
        await pool.close()
        raise
    return AsyncPostgresSaver(pool)


def postgres_store(
    url: str,
    *,
    index: dict[str, Any] | None = None,
    min_size: int = 1,
    max_size: int = 10,
    max_idle: float = 300.0,
    max_lifetime: float = 1800.0,
    timeout: float = 30.0,
    application_name: str | None = None,
) -> PostgresStore:
    """A ready ``PostgresStore`` on a self-healing pool (``setup()`` done).

    ``index`` is LangGraph's vector index config (``{"dims", "embed", "fields"}``); it
    needs the pgvector extension. Without it, memory recall is scored by the agent.
    """
    _require()
    from langgraph.store.postgres import PostgresStore

    args = _pool_args(min_size, max_size, max_idle, max_lifetime, timeout, application_name)
    pool = _open_pool(url, args)
    kind = "store+vector" if index else "store"
    try:
        _setup(pool, kind, url, lambda c: PostgresStore(c, index=index), max(timeout, 60.0))  # type: ignore[arg-type]
    except BaseException:
        pool.close()
        raise
    store = PostgresStore(pool, index=index)  # type: ignore[arg-type]
    weakref.finalize(store, pool.close)
    return store


async def apostgres_store(
    url: str,
    *,
    index: dict[str, Any] | None = None,
    min_size: int = 1,
    max_size: int = 10,
    max_idle: float = 300.0,
    max_lifetime: float = 1800.0,
    timeout: float = 30.0,
    application_name: str | None = None,
) -> AsyncPostgresStore:
    """Async :func:`postgres_store`; close the pool with ``await store.conn.close()``."""
    _require()
    from langgraph.store.postgres import AsyncPostgresStore

    args = _pool_args(min_size, max_size, max_idle, max_lifetime, timeout, application_name)
    pool = await _aopen_pool(url, args)
    kind = "store+vector" if index else "store"
    try:
        await _asetup(
            pool,
            kind,
            url,
            lambda c: AsyncPostgresStore(c, index=index),
            max(timeout, 60.0),  # type: ignore[arg-type]
        )
    except BaseException:
        await pool.close()
        raise
    return AsyncPostgresStore(pool, index=index)  # type: ignore[arg-type]

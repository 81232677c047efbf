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
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any, TypedDict, TypeVar

if TYPE_CHECKING:  # psycopg is an optional dependency: imported only when used
    from langgraph.checkpoint.postgres import PostgresSaver
    from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver
    from langgraph.store.postgres import AsyncPostgresStore, PostgresStore
    from langgraph.store.postgres.base import PostgresIndexConfig
    from typing_extensions import Unpack

__all__ = [
    "PoolOptions",
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


@dataclass(frozen=True)
class PoolOptions:
    """The connection pool behind a saver or store (the keyword arguments of the helpers).

    Args:
        min_size: Connections kept open.
        max_size: Most connections open at once.
        max_idle: Seconds an unused connection above ``min_size`` is kept.
        max_lifetime: Seconds after which a connection is replaced.
        timeout: Seconds to wait for a connection (also for opening the pool).
        application_name: Shown in ``pg_stat_activity``.
    """

    min_size: int = 1
    max_size: int = 10
    max_idle: float = 300.0
    max_lifetime: float = 1800.0
    timeout: float = 30.0
    application_name: str | None = None

    def pool_args(self) -> dict[str, Any]:
        """Keyword arguments of ``ConnectionPool`` / ``AsyncConnectionPool``."""
        args = asdict(self)
        name = args.pop("application_name")
        return {**args, "kwargs": connection_kwargs(name), "name": name or "retrievalagent"}

    @property
    def setup_timeout(self) -> float:
        """Seconds ``setup()`` may wait for another process's migrations."""
        return max(self.timeout, 60.0)


class _PoolKeywords(TypedDict, total=False):
    """``PoolOptions`` as keyword arguments (their types; the defaults are the class's)."""

    min_size: int
    max_size: int
    max_idle: float
    max_lifetime: float
    timeout: float
    application_name: str | None


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


def _open_pool(url: str, options: PoolOptions) -> Any:
    from psycopg_pool import ConnectionPool

    pool = ConnectionPool(
        url, check=ConnectionPool.check_connection, open=False, **options.pool_args()
    )
    pool.open(wait=True, timeout=options.timeout)
    return pool


async def _aopen_pool(url: str, options: PoolOptions) -> Any:
    from psycopg_pool import AsyncConnectionPool

    pool = AsyncConnectionPool(
        url, check=AsyncConnectionPool.check_connection, open=False, **options.pool_args()
    )
    await pool.open(wait=True, timeout=options.timeout)
    return pool


_Made = TypeVar("_Made")


def _ready(url: str, kind: str, make: Callable[[Any], _Made], options: PoolOptions) -> _Made:
    """``make(pool)`` with its tables set up; the pool closes with it (or at exit)."""
    pool = _open_pool(url, options)
    try:
        _setup(pool, kind, url, make, options.setup_timeout)
    except BaseException:
        pool.close()
        raise
    made = make(pool)
    weakref.finalize(made, pool.close)
    return made


async def _aready(url: str, kind: str, make: Callable[[Any], _Made], options: PoolOptions) -> _Made:
    """Async ``_ready``; the caller closes the pool (``await made.conn.close()``)."""
    pool = await _aopen_pool(url, options)
    try:
        await _asetup(pool, kind, url, make, options.setup_timeout)
    except BaseException:
        await pool.close()
        raise
    return make(pool)


def _store_kind(index: PostgresIndexConfig | None) -> str:
    return "store+vector" if index else "store"


def postgres_checkpointer(url: str, **options: Unpack[_PoolKeywords]) -> PostgresSaver:
    """A ready ``PostgresSaver`` on a self-healing connection pool (``setup()`` done).

    Args:
        url: A libpq connection string, e.g. ``"postgresql://user:pass@host:5432/db"``.
        **options: The pool's :class:`PoolOptions` (``min_size``, ``max_size``,
            ``max_idle``, ``max_lifetime``, ``timeout``, ``application_name``).
    """
    _require()
    from langgraph.checkpoint.postgres import PostgresSaver

    return _ready(url, "checkpointer", PostgresSaver, PoolOptions(**options))


async def apostgres_checkpointer(url: str, **options: Unpack[_PoolKeywords]) -> AsyncPostgresSaver:
    """Async :func:`postgres_checkpointer`: an ``AsyncPostgresSaver`` on an async pool.

    Call it on the event loop that will use the saver; close the pool with
    ``await saver.conn.close()``.
    """
    _require()
    from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver

    return await _aready(url, "checkpointer", AsyncPostgresSaver, PoolOptions(**options))


def postgres_store(
    url: str, *, index: PostgresIndexConfig | None = None, **options: Unpack[_PoolKeywords]
) -> PostgresStore:
    """A ready ``PostgresStore`` on a self-healing pool (``setup()`` done).

    ``index`` is LangGraph's vector index config (``{"dims", "embed", "fields"}``); it
    needs the pgvector extension. Without it, memory recall is scored by the agent.
    ``options`` are the pool's :class:`PoolOptions`.
    """
    _require()
    from langgraph.store.postgres import PostgresStore

    def make(conn: Any) -> PostgresStore:
        return PostgresStore(conn, index=index)

    return _ready(url, _store_kind(index), make, PoolOptions(**options))


async def apostgres_store(
    url: str, *, index: PostgresIndexConfig | None = None, **options: Unpack[_PoolKeywords]
) -> AsyncPostgresStore:
    """Async :func:`postgres_store`; close the pool with ``await store.conn.close()``."""
    _require()
    from langgraph.store.postgres import AsyncPostgresStore

    def make(conn: Any) -> AsyncPostgresStore:
        return AsyncPostgresStore(conn, index=index)

    return await _aready(url, _store_kind(index), make, PoolOptions(**options))

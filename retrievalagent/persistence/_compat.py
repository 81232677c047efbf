"""``from_conn_string(...)`` results that also work without ``with``.

Why: LangGraph's ``from_conn_string`` helpers are context managers, so code that calls
``.setup()`` on the result directly (as our documentation's examples do) fails with
``AttributeError: '_GeneratorContextManager' object has no attribute 'setup'``. This module
makes both styles work, without changing what ``with`` does.

What is patched, exactly (and nothing else):

==============================================  =====================================
class                                           module it is defined in
==============================================  =====================================
``PostgresSaver.from_conn_string``              ``langgraph.checkpoint.postgres``
``AsyncPostgresSaver.from_conn_string``         ``langgraph.checkpoint.postgres.aio``
``PostgresStore.from_conn_string``              ``langgraph.store.postgres.base``
``AsyncPostgresStore.from_conn_string``         ``langgraph.store.postgres.aio``
``SqliteSaver.from_conn_string``                ``langgraph.checkpoint.sqlite``
==============================================  =====================================

When: at ``import retrievalagent`` for the modules already imported, and otherwise by a
``sys.meta_path`` finder that patches each module right after it has executed. Nothing is
imported eagerly (psycopg is not loaded by retrievalagent). :func:`unpatch_from_conn_string`
restores the original classmethods and removes the finder; :func:`patch_from_conn_string`
puts them back.

How: the patched classmethod calls the original and returns a :class:`LazyConnection`
wrapping the original context manager. It is two things at once:

* **the original context manager** — ``with X.from_conn_string(url) as saver`` (and
  ``async with`` for the async classes) enters and exits the very context manager LangGraph
  returned and yields the real saver/store, exactly as before;
* **a lazy proxy** — any other use (``cp.setup()``, ``await store.setup()``, passing it to
  ``init_agent``) opens a fresh context manager from the same arguments on first use and
  forwards attribute access to the real object. Coroutine methods of an async class open it
  on the caller's event loop; a sync first use of an async class from sync code opens it on
  a private event loop thread (its sync methods work; LangGraph's async stores can then not
  be awaited from another loop), and from async code it is refused with a message asking
  for ``await x.setup()`` first.

A lazily opened connection is closed when the last agent using it closes, at interpreter
exit, or by ``close()`` / ``await aclose()``; a later use opens a new one. ``isinstance``
checks against the saver/store class see the proxy, not the real object: pass the proxy to
``init_agent`` (which unwraps it) or use ``with`` when you hand it to LangGraph directly.
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import functools
import importlib.abc
import importlib.machinery
import inspect
import sys
import threading
from collections.abc import Callable, Coroutine, Iterator
from types import ModuleType
from typing import Any

__all__ = [
    "PATCHED",
    "AsyncLazyConnection",
    "LazyConnection",
    "patch_from_conn_string",
    "unpatch_from_conn_string",
]

#: module -> classes in it whose ``from_conn_string`` is patched
PATCHED: dict[str, tuple[str, ...]] = {
    "langgraph.checkpoint.postgres": ("PostgresSaver",),
    "langgraph.checkpoint.postgres.aio": ("AsyncPostgresSaver",),
    "langgraph.store.postgres.base": ("PostgresStore",),
    "langgraph.store.postgres.aio": ("AsyncPostgresStore",),
    "langgraph.checkpoint.sqlite": ("SqliteSaver",),
}

_MARK = "__retrievalagent_original__"
_OWN = frozenset(
    {
        "_ra_cls",
        "_ra_factory",
        "_ra_cm",
        "_ra_lazy",
        "_ra_target",
        "_ra_loop",
        "_ra_thread",
        "_ra_users",
        "_ra_lock",
    }
)
_open: set[LazyConnection] = set()  # strong refs: an open connection is never GC-closed
_open_lock = threading.Lock()
_CLOSE_TIMEOUT = 10.0


class LazyConnection:
    """The result of a patched ``from_conn_string``; see the module docstring."""

    def __init__(self, cls: type, factory: Callable[[], Any], cm: Any) -> None:
        object.__setattr__(self, "_ra_cls", cls)
        object.__setattr__(self, "_ra_factory", factory)
        object.__setattr__(self, "_ra_cm", cm)  # what `with` enters, untouched
        object.__setattr__(self, "_ra_lazy", None)
        object.__setattr__(self, "_ra_target", None)
        object.__setattr__(self, "_ra_loop", None)
        object.__setattr__(self, "_ra_thread", None)
        object.__setattr__(self, "_ra_users", 0)
        object.__setattr__(self, "_ra_lock", threading.RLock())

    # -- the original context manager ---------------------------------------------------
    def __enter__(self) -> Any:
        return self._ra_cm.__enter__()

    def __exit__(self, *exc: Any) -> Any:
        return self._ra_cm.__exit__(*exc)

    # -- direct use -----------------------------------------------------------------------
    @property
    def is_open(self) -> bool:
        """True while a lazily opened connection is held."""
        return self._ra_target is not None

    def _ra_open(self) -> Any:
        with self._ra_lock:
            if self._ra_target is None:
                lazy = self._ra_factory()
                self._ra_hold(lazy, lazy.__enter__())
            return self._ra_target

    def _ra_hold(
        self,
        lazy: Any,
        target: Any,
        loop: asyncio.AbstractEventLoop | None = None,
        runner: _LoopThread | None = None,
    ) -> Any:
        """Keep ``target``, opened by entering ``lazy`` (on ``loop``, run by ``runner``),
        until ``close`` (``target`` None: forget what was kept); the caller holds
        ``_ra_lock``. The registry closed at exit follows."""
        object.__setattr__(self, "_ra_target", target)
        object.__setattr__(self, "_ra_lazy", lazy)
        object.__setattr__(self, "_ra_loop", loop)
        object.__setattr__(self, "_ra_thread", runner)
        with _open_lock:
            if target is None:
                _open.discard(self)
            else:
                _open.add(self)
        return target

    def _ra_release(self) -> tuple[Any, asyncio.AbstractEventLoop | None, _LoopThread | None]:
        """Forget the kept connection (a later use opens a new one); returns what closing
        it takes: the entered context manager (None if none), its loop and loop thread."""
        with self._ra_lock:
            kept = self._ra_lazy, self._ra_loop, self._ra_thread
            self._ra_hold(None, None)
        return kept

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__") or name in _OWN:
            raise AttributeError(name)
        return self._ra_forward(name)

    def _ra_forward(self, name: str) -> Any:
        """Attribute ``name`` of the real object (opened on first use)."""
        return getattr(self._ra_open(), name)

    def __setattr__(self, name: str, value: Any) -> None:
        setattr(self._ra_open(), name, value)

    def __retrievalagent_target__(self) -> Any:
        """The real saver/store (opened if needed)."""
        return self._ra_open()

    def __retrievalagent_acquire__(self) -> tuple[Any, Callable[[], None]]:
        """The real object for one agent, and the callback that agent runs when it closes."""
        target = self._ra_open()
        with self._ra_lock:
            object.__setattr__(self, "_ra_users", self._ra_users + 1)
        released = threading.Event()

        def release() -> None:
            if released.is_set():
                return
            released.set()
            with self._ra_lock:
                object.__setattr__(self, "_ra_users", max(0, self._ra_users - 1))
                last = self._ra_users == 0
            if last:
                self.close()

        return target, release

    def close(self) -> None:
        """Close the lazily opened connection (a later use opens a new one)."""
        lazy, _, _ = self._ra_release()
        if lazy is not None:
            lazy.__exit__(None, None, None)

    def __repr__(self) -> str:  # never shows the connection string (it may hold a password)
        state = "open" if self.is_open else "not opened"
        return f"<{self._ra_cls.__name__}.from_conn_string(...) lazy connection, {state}>"


class _LoopThread:
    """An event loop on a daemon thread, for a sync first use of an async class."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(
            target=self.loop.run_forever, name="retrievalagent-conn-loop", daemon=True
        )
        self.thread.start()

    def run(self, coro: Coroutine[Any, Any, Any], timeout: float | None = None) -> Any:
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout)

    def stop(self) -> None:
        async def cancel_rest() -> None:  # e.g. a store's batching task: end it cleanly
            rest = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
            for task in rest:
                task.cancel()
            await asyncio.gather(*rest, return_exceptions=True)

        with contextlib.suppress(Exception):
            self.run(cancel_rest(), timeout=_CLOSE_TIMEOUT)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(_CLOSE_TIMEOUT)
        if not self.thread.is_alive():
            self.loop.close()


class AsyncLazyConnection(LazyConnection):
    """:class:`LazyConnection` for the async classes (``async with`` and awaited methods)."""

    async def __aenter__(self) -> Any:
        return await self._ra_cm.__aenter__()

    async def __aexit__(self, *exc: Any) -> Any:
        return await self._ra_cm.__aexit__(*exc)

    def __enter__(self) -> Any:  # the async classes were never sync context managers
        raise TypeError(f"use `async with {self._ra_cls.__name__}.from_conn_string(...)`")

    def __exit__(self, *exc: Any) -> Any:  # pragma: no cover - __enter__ always raises
        raise TypeError("not a sync context manager")

    async def _ra_aopen(self) -> Any:
        if self._ra_target is not None:
            return self._ra_target
        lazy = self._ra_factory()
        target = await lazy.__aenter__()
        with self._ra_lock:
            winner = self._ra_target
            if winner is None:
                return self._ra_hold(lazy, target, asyncio.get_running_loop())
        await lazy.__aexit__(None, None, None)  # another task won the race: keep theirs
        return winner

    def _ra_open(self) -> Any:
        with self._ra_lock:
            if self._ra_target is None:
                _refuse_inside_a_loop(self._ra_cls.__name__)
                runner = _LoopThread()
                lazy = self._ra_factory()
                try:
                    target = runner.run(lazy.__aenter__(), timeout=60)
                except BaseException:
                    runner.stop()
                    raise
                self._ra_hold(lazy, target, runner.loop, runner)
            return self._ra_target

    def _ra_forward(self, name: str) -> Any:
        if self._ra_target is None and inspect.iscoroutinefunction(
            getattr(self._ra_cls, name, None)
        ):
            # `await store.setup()` before anything else: open on the caller's loop
            @functools.wraps(getattr(self._ra_cls, name))
            async def call(*args: Any, **kwargs: Any) -> Any:
                target = await self._ra_aopen()
                return await getattr(target, name)(*args, **kwargs)

            return call
        return super()._ra_forward(name)

    async def aclose(self) -> None:
        """Close the lazily opened connection from async code."""
        lazy, loop, runner = self._ra_release()
        if lazy is None:
            return
        if runner is not None:
            await asyncio.wrap_future(
                asyncio.run_coroutine_threadsafe(lazy.__aexit__(None, None, None), runner.loop)
            )
            runner.stop()
        elif loop is asyncio.get_running_loop():
            await lazy.__aexit__(None, None, None)
        else:
            await asyncio.to_thread(_exit_elsewhere, lazy, loop)

    def close(self) -> None:
        lazy, loop, runner = self._ra_release()
        if lazy is None:
            return
        if runner is not None:
            try:
                runner.run(lazy.__aexit__(None, None, None), timeout=_CLOSE_TIMEOUT)
            finally:
                runner.stop()
            return
        try:
            running = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        if running is not None and running is loop:  # cannot block our own loop: schedule
            task = loop.create_task(lazy.__aexit__(None, None, None))
            _pending.add(task)
            task.add_done_callback(_pending.discard)
            return
        _exit_elsewhere(lazy, loop)


_pending: set[asyncio.Task[Any]] = set()


def _refuse_inside_a_loop(name: str) -> None:
    """A sync first use from async code would bind the object to a private loop, where
    LangGraph's async stores cannot be awaited from the caller's loop: ask for an await."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return
    from retrievalagent.errors import ConfigError

    raise ConfigError(
        f"{name}.from_conn_string(...) was used from async code before it was opened: "
        f"`await x.setup()` (or any awaited call) first, or use `async with "
        f"{name}.from_conn_string(...) as x`"
    )


def _exit_elsewhere(lazy: Any, loop: asyncio.AbstractEventLoop | None) -> None:
    """Exit an async context manager opened on ``loop`` from a thread not running it."""
    if loop is not None and loop.is_running():
        asyncio.run_coroutine_threadsafe(lazy.__aexit__(None, None, None), loop).result(
            _CLOSE_TIMEOUT
        )
        return
    # The owning loop has finished (e.g. asyncio.run returned): closing a psycopg / aiosqlite
    # connection needs no loop-bound state, so a fresh loop can do it.
    fresh = asyncio.new_event_loop()
    try:
        fresh.run_until_complete(asyncio.wait_for(lazy.__aexit__(None, None, None), _CLOSE_TIMEOUT))
    finally:
        fresh.close()


def close_all() -> None:
    """Close every lazily opened connection (runs at interpreter exit)."""
    with _open_lock:
        conns = list(_open)
    for conn in conns:
        with contextlib.suppress(Exception):
            conn.close()


atexit.register(close_all)


# -- patching ----------------------------------------------------------------------------
def _patched_classmethod(original: classmethod[Any, Any, Any]) -> classmethod[Any, Any, Any]:
    func = original.__func__

    @functools.wraps(func)
    def from_conn_string(cls: type, *args: Any, **kwargs: Any) -> LazyConnection:
        factory = functools.partial(func, cls, *args, **kwargs)
        cm = factory()  # LangGraph's own context manager: nothing is connected yet
        kind = AsyncLazyConnection if hasattr(cm, "__aenter__") else LazyConnection
        return kind(cls, factory, cm)

    setattr(from_conn_string, _MARK, original)
    return classmethod(from_conn_string)


def _patchable(module: ModuleType) -> Iterator[tuple[Any, classmethod[Any, Any, Any]]]:
    """The classes of ``module`` named in ``PATCHED`` and their own ``from_conn_string``."""
    for name in PATCHED.get(module.__name__, ()):
        cls = getattr(module, name, None)
        current = None if cls is None else cls.__dict__.get("from_conn_string")
        if cls is not None and current is not None:
            yield cls, current


def _patch_module(module: ModuleType) -> None:
    for cls, current in _patchable(module):
        if not hasattr(current.__func__, _MARK):
            cls.from_conn_string = _patched_classmethod(current)


def _unpatch_module(module: ModuleType) -> None:
    for cls, current in _patchable(module):
        if hasattr(current.__func__, _MARK):
            cls.from_conn_string = getattr(current.__func__, _MARK)


class _PatchingLoader(importlib.abc.Loader):
    """Runs the real loader, then patches the module it produced."""

    def __init__(self, loader: Any) -> None:
        self._loader = loader

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType | None:
        module: ModuleType | None = self._loader.create_module(spec)
        return module

    def exec_module(self, module: ModuleType) -> None:
        self._loader.exec_module(module)
        if _finder in sys.meta_path:
            _patch_module(module)

    def __getattr__(self, name: str) -> Any:  # get_source, get_resource_reader, ...
        return getattr(self._loader, name)


class _PatchFinder(importlib.abc.MetaPathFinder):
    """Finds the patched modules through the other finders and wraps their loader."""

    def find_spec(
        self, fullname: str, path: Any, target: ModuleType | None = None
    ) -> importlib.machinery.ModuleSpec | None:
        if fullname not in PATCHED:
            return None
        for finder in sys.meta_path:
            if finder is self or not hasattr(finder, "find_spec"):
                continue
            spec: importlib.machinery.ModuleSpec | None = finder.find_spec(fullname, path, target)
            if spec is None:
                continue
            if spec.loader is not None and hasattr(spec.loader, "exec_module"):
                spec.loader = _PatchingLoader(spec.loader)
            return spec
        return None


_finder = _PatchFinder()


def patch_from_conn_string() -> None:
    """Install the patch (done when retrievalagent is imported; idempotent)."""
    if _finder not in sys.meta_path:
        sys.meta_path.insert(0, _finder)
    for name in PATCHED:
        module = sys.modules.get(name)
        if module is not None:
            _patch_module(module)


def unpatch_from_conn_string() -> None:
    """Restore LangGraph's original ``from_conn_string`` classmethods."""
    with contextlib.suppress(ValueError):
        sys.meta_path.remove(_finder)
    for name in PATCHED:
        module = sys.modules.get(name)
        if module is not None:
            _unpatch_module(module)

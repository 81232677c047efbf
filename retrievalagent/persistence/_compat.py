"""``from_conn_string(...)`` results that also work without ``with``.

Why: LangGraph's ``from_conn_string`` helpers are context managers, so code that calls
``.setup()`` on the result directly (as our documentation's examples do) fails with
``AttributeError: '_GeneratorContextManager' object has no attribute 'setup'``. This module
makes both styles work, without changing what ``with`` does.

What is patched in LangGraph, exactly (and nothing else): one classmethod of five classes.

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

What the patched classmethod returns: an instance of ``Lazy<Class>``, a subclass of the
class it was called on (made once per class), holding no connection yet. It is both:

* **the original context manager** — ``with X.from_conn_string(url) as saver`` (and
  ``async with`` for the async classes) enters the very context manager LangGraph's
  ``from_conn_string`` returned and yields LangGraph's own object, exactly as before;
* **a real saver / store** — ``isinstance(x, PostgresSaver)`` holds, so LangGraph's own
  checks accept it (``StateGraph(...).compile(checkpointer=x)``, the checkpoint
  conformance suite). Every method the class adds to LangGraph's base class
  (``setup``, ``put``, ``aget_tuple``, ``batch``, ...) opens a connection on first use, by
  entering LangGraph's original ``from_conn_string`` with the same arguments, and runs on
  the object that yields; other attributes (``conn``, ``index_config``) are read from it.
  What the class leaves to the base class stays the base class's (``PostgresSaver.aput``
  still raises ``NotImplementedError``), so capability checks find the class's own.
  Attributes set on it apply to the object it runs on (for a saver, a copy of it: this is
  how LangGraph's ``with_allowlist`` copies set ``serde``).

Coroutine methods of an async class open it on the caller's event loop; a sync first use of
an async class from sync code opens it on a private event loop thread (its sync methods
work; LangGraph's async stores can then not be awaited from another loop), and from async
code it is refused with a message asking for ``await x.setup()`` first.

A lazily opened connection is closed when the last agent using it closes, at interpreter
exit, or by ``close()`` / ``await aclose()``; a later use opens a new one.
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import copy
import functools
import importlib.abc
import importlib.machinery
import inspect
import sys
import threading
from collections.abc import AsyncIterator, Callable, Coroutine, Iterator
from types import FunctionType, ModuleType
from typing import Any

from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.store.base import BaseStore

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
_open: set[_Opener] = set()  # strong refs: an open connection is never GC-closed
_open_lock = threading.Lock()
_CLOSE_TIMEOUT = 10.0


# -- one from_conn_string call's connection -------------------------------------------------------
class _Opener:
    """Opens LangGraph's own context manager on first use and keeps what it yields."""

    def __init__(self, name: str, factory: Callable[[], Any], cm: Any) -> None:
        self.name = name  # the class name, for messages
        self.factory = factory  # a fresh context manager from the same arguments
        self.cm = cm  # what `with` enters, untouched
        self.entered: Any = None
        self.target: Any = None
        self.loop: asyncio.AbstractEventLoop | None = None
        self.runner: _LoopThread | None = None
        self.users = 0
        self.lock = threading.RLock()

    def open(self) -> Any:
        """The real saver/store, opened if needed."""
        target = self.target  # every call of a lazy saver passes here: no lock once open
        if target is not None:
            return target
        with self.lock:
            if self.target is None:
                entered = self.factory()
                self.hold(entered, entered.__enter__())
            return self.target

    async def aopen(self) -> Any:
        return self.open()

    def hold(
        self,
        entered: Any,
        target: Any,
        loop: asyncio.AbstractEventLoop | None = None,
        runner: _LoopThread | None = None,
    ) -> Any:
        """Keep ``target``, opened by entering ``entered`` (on ``loop``, run by ``runner``),
        until ``close`` (``target`` None: forget what was kept); the caller holds ``lock``.
        The registry closed at exit follows."""
        self.target, self.entered, self.loop, self.runner = target, entered, loop, runner
        with _open_lock:
            if target is None:
                _open.discard(self)
            else:
                _open.add(self)
        return target

    def release(self) -> tuple[Any, asyncio.AbstractEventLoop | None, _LoopThread | None]:
        """Forget the kept connection (a later use opens a new one); returns what closing
        it takes: the entered context manager (None if none), its loop and loop thread."""
        with self.lock:
            kept = self.entered, self.loop, self.runner
            self.hold(None, None)
        return kept

    def acquire(self) -> tuple[Any, Callable[[], None]]:
        """The real object for one agent, and the callback that agent runs when it closes."""
        target = self.open()
        with self.lock:
            self.users += 1
        released = threading.Event()

        def release() -> None:
            if released.is_set():
                return
            released.set()
            with self.lock:
                self.users = max(0, self.users - 1)
                last = self.users == 0
            if last:
                self.close()

        return target, release

    def close(self) -> None:
        entered, _, _ = self.release()
        if entered is not None:
            entered.__exit__(None, None, None)


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


class _AsyncOpener(_Opener):
    """:class:`_Opener` for the async classes: opened on the caller's loop when awaited."""

    async def aopen(self) -> Any:
        if self.target is not None:
            return self.target
        entered = self.factory()
        target = await entered.__aenter__()
        with self.lock:
            winner = self.target
            if winner is None:
                return self.hold(entered, target, asyncio.get_running_loop())
        await entered.__aexit__(None, None, None)  # another task won the race: keep theirs
        return winner

    def open(self) -> Any:
        with self.lock:
            if self.target is None:
                _refuse_inside_a_loop(self.name)
                runner = _LoopThread()
                entered = self.factory()
                try:
                    target = runner.run(entered.__aenter__(), timeout=60)
                except BaseException:
                    runner.stop()
                    raise
                self.hold(entered, target, runner.loop, runner)
            return self.target

    async def aclose(self) -> None:
        entered, loop, runner = self.release()
        if entered is None:
            return
        if runner is not None:
            await asyncio.wrap_future(
                asyncio.run_coroutine_threadsafe(entered.__aexit__(None, None, None), runner.loop)
            )
            runner.stop()
        elif loop is asyncio.get_running_loop():
            await entered.__aexit__(None, None, None)
        else:
            await asyncio.to_thread(_exit_elsewhere, entered, loop)

    def close(self) -> None:
        entered, loop, runner = self.release()
        if entered is None:
            return
        if runner is not None:
            try:
                runner.run(entered.__aexit__(None, None, None), timeout=_CLOSE_TIMEOUT)
            finally:
                runner.stop()
            return
        try:
            running = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        if running is not None and running is loop:  # cannot block our own loop: schedule
            task = loop.create_task(entered.__aexit__(None, None, None))
            _pending.add(task)
            task.add_done_callback(_pending.discard)
            return
        _exit_elsewhere(entered, loop)


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


def _exit_elsewhere(entered: Any, loop: asyncio.AbstractEventLoop | None) -> None:
    """Exit an async context manager opened on ``loop`` from a thread not running it."""
    if loop is not None and loop.is_running():
        asyncio.run_coroutine_threadsafe(entered.__aexit__(None, None, None), loop).result(
            _CLOSE_TIMEOUT
        )
        return
    # The owning loop has finished (e.g. asyncio.run returned): closing a psycopg / aiosqlite
    # connection needs no loop-bound state, so a fresh loop can do it.
    fresh = asyncio.new_event_loop()
    try:
        fresh.run_until_complete(
            asyncio.wait_for(entered.__aexit__(None, None, None), _CLOSE_TIMEOUT)
        )
    finally:
        fresh.close()


def close_all() -> None:
    """Close every lazily opened connection (runs at interpreter exit)."""
    with _open_lock:
        openers = list(_open)
    for opener in openers:
        with contextlib.suppress(Exception):
            opener.close()


atexit.register(close_all)


# -- the objects from_conn_string returns -----------------------------------------------------------
class LazyConnection:
    """Mixed into ``Lazy<Class>``, the subclass of a saver/store class that a patched
    ``from_conn_string`` returns an instance of; see the module docstring."""

    __slots__ = ()
    _ra: _Opener

    def __init__(self, opener: _Opener) -> None:  # the class's own __init__ runs on open
        self.__dict__["_ra"] = opener

    # -- the original context manager ---------------------------------------------------
    def __enter__(self) -> Any:
        return self._ra.cm.__enter__()

    def __exit__(self, *exc: Any) -> Any:
        return self._ra.cm.__exit__(*exc)

    # -- direct use -----------------------------------------------------------------------
    @property
    def is_open(self) -> bool:
        """True while a lazily opened connection is held."""
        return self._ra.target is not None

    def close(self) -> None:
        """Close the lazily opened connection (a later use opens a new one)."""
        self._ra.close()

    def _ra_open(self) -> Any:
        """The object this one's methods run on (opened if needed)."""
        return self._ra_as_set(self._ra.open())

    async def _ra_aopen(self) -> Any:
        return self._ra_as_set(await self._ra.aopen())

    def _ra_as_set(self, target: Any) -> Any:
        """``target`` with the attributes set on this object: a saver's copy (it may not
        change the saver others share), the store itself."""
        mine = {k: v for k, v in self.__dict__.items() if not k.startswith("_ra")}
        if not mine:
            return target
        kept = self.__dict__.get("_ra_view")
        if kept is not None and kept[0] is target:
            return kept[1]
        view = copy.copy(target) if isinstance(target, BaseCheckpointSaver) else target
        for name, value in mine.items():
            setattr(view, name, value)
        self.__dict__["_ra_view"] = (target, view)
        return view

    def __getattr__(self, name: str) -> Any:  # only for what the instance does not have
        if name.startswith(("__", "_ra")):
            raise AttributeError(name)
        mine = self.__dict__
        if name in mine:  # set on it, shadowed by the class's slot
            return mine[name]
        if "_ra" not in mine:  # half built (copy.copy): nothing to read from yet
            raise AttributeError(name)
        return getattr(self._ra_open(), name)

    def __setattr__(self, name: str, value: Any) -> None:
        self.__dict__[name] = value
        self.__dict__.pop("_ra_view", None)

    def __del__(self) -> None:
        """Nothing to do: the class's own finalizer belongs to the object that opened."""

    def _ra_acquire(self) -> tuple[Any, Callable[[], None]]:
        """The opened object for one agent, and the callback that agent runs when it closes."""
        target, release = self._ra.acquire()
        return self._ra_as_set(target), release

    def __repr__(self) -> str:  # never shows the connection string (it may hold a password)
        state = "open" if self.is_open else "not opened"
        return f"<{self._ra.name}.from_conn_string(...) lazy connection, {state}>"


class AsyncLazyConnection(LazyConnection):
    """:class:`LazyConnection` for the async classes (``async with`` and awaited methods)."""

    __slots__ = ()
    _ra: _AsyncOpener

    async def __aenter__(self) -> Any:
        return await self._ra.cm.__aenter__()

    async def __aexit__(self, *exc: Any) -> Any:
        return await self._ra.cm.__aexit__(*exc)

    def __enter__(self) -> Any:  # the async classes were never sync context managers
        raise TypeError(f"use `async with {self._ra.name}.from_conn_string(...)`")

    def __exit__(self, *exc: Any) -> Any:  # pragma: no cover - __enter__ always raises
        raise TypeError("not a sync context manager")

    async def aclose(self) -> None:
        """Close the lazily opened connection from async code."""
        await self._ra.aclose()


def _runs_on_opened(name: str, func: FunctionType) -> Callable[..., Any]:
    """A method that runs ``name`` of the opened object, in ``func``'s kind (plain,
    coroutine, async generator)."""
    call: Callable[..., Any]
    if inspect.isasyncgenfunction(func):

        async def agen(self: LazyConnection, *args: Any, **kwargs: Any) -> AsyncIterator[Any]:
            target = await self._ra_aopen()
            async for item in getattr(target, name)(*args, **kwargs):
                yield item

        call = agen
    elif inspect.iscoroutinefunction(func):

        async def coro(self: LazyConnection, *args: Any, **kwargs: Any) -> Any:
            target = await self._ra_aopen()
            return await getattr(target, name)(*args, **kwargs)

        call = coro
    else:

        def plain(self: LazyConnection, *args: Any, **kwargs: Any) -> Any:
            return getattr(self._ra_open(), name)(*args, **kwargs)

        call = plain
    return functools.update_wrapper(call, func)


def _own_methods(cls: type) -> Iterator[tuple[str, FunctionType]]:
    """The methods ``cls`` adds to (or overrides in) LangGraph's base saver/store class,
    as ``cls`` resolves them; dunders are left alone."""
    base = next((b for b in (BaseCheckpointSaver, BaseStore) if issubclass(cls, b)), object)
    inherited = set(base.__mro__)
    seen = set(dir(AsyncLazyConnection))
    for klass in cls.__mro__:
        for name, attr in vars(klass).items():
            if name in seen or name.startswith("__"):
                continue
            seen.add(name)
            if klass not in inherited and isinstance(attr, FunctionType):
                yield name, attr


@functools.cache
def _lazy_class(cls: type, is_async: bool) -> type:
    mixin = AsyncLazyConnection if is_async else LazyConnection
    namespace: dict[str, Any] = {
        name: _runs_on_opened(name, func) for name, func in _own_methods(cls)
    }
    namespace.update(
        __module__=__name__,
        __qualname__=f"Lazy{cls.__name__}",
        __doc__=f"A {cls.__name__} that opens its connection on first use.",
        _ra_class=cls,
    )
    return type(f"Lazy{cls.__name__}", (mixin, cls), namespace)


# -- patching ----------------------------------------------------------------------------
def _patched_classmethod(original: classmethod[Any, Any, Any]) -> classmethod[Any, Any, Any]:
    func = original.__func__

    @functools.wraps(func)
    def from_conn_string(cls: type, *args: Any, **kwargs: Any) -> LazyConnection:
        cls = getattr(cls, "_ra_class", cls)  # called on a Lazy<Class>: its real class
        factory = functools.partial(func, cls, *args, **kwargs)
        cm = factory()  # LangGraph's own context manager: nothing is connected yet
        is_async = hasattr(cm, "__aenter__")
        opener = (_AsyncOpener if is_async else _Opener)(cls.__name__, factory, cm)
        lazy: LazyConnection = _lazy_class(cls, is_async)(opener)
        return lazy

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

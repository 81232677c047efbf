"""Accepting checkpointers and stores in the forms users actually have them.

LangGraph's ``from_conn_string`` helpers return context managers, and it is natural to pass
one straight to ``init_agent(checkpointer=SqliteSaver.from_conn_string("memory.db"))``. Such
a context manager is entered here and exited when the agent closes. What the patched
helpers return used without ``with`` (a saver/store that opens its connection on first use,
see :mod:`retrievalagent.persistence._compat`) is opened here and used as the object it
opened; its connection closes when the last agent using it closes.
"""

from __future__ import annotations

import contextlib
from typing import Any

from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.store.base import BaseStore

from retrievalagent.errors import ConfigError
from retrievalagent.persistence._compat import LazyConnection

__all__ = ["resolve_checkpointer", "resolve_store"]


def _wrong(obj: Any, kind: type, what: str) -> ConfigError:
    named = getattr(type(obj), "_ra_class", type(obj)).__name__  # Lazy<Class>: the class
    return ConfigError(f"{what} must be a LangGraph {kind.__name__}, not {named}")


def _unwrap(obj: Any, kind: type, what: str, stack: contextlib.ExitStack) -> Any:
    if isinstance(obj, kind) and isinstance(obj, LazyConnection):
        target, release = obj._ra_acquire()  # from_conn_string used without `with`
        stack.callback(release)
        return target
    if obj is None or isinstance(obj, kind):
        return obj
    if isinstance(obj, LazyConnection):  # a store passed as a checkpointer or the reverse
        raise _wrong(obj, kind, what)
    if hasattr(obj, "__enter__") and hasattr(obj, "__exit__"):
        entered = stack.enter_context(obj)
        if isinstance(entered, kind):
            return entered
        raise ConfigError(
            f"{what}: the context manager gave a {type(entered).__name__}, not a {kind.__name__}"
        )
    if hasattr(obj, "__aenter__"):
        raise ConfigError(
            f"{what} is an async context manager; open it first: "
            f"`async with X.from_conn_string(...) as {what}:` and pass the result"
        )
    raise _wrong(obj, kind, what)


def resolve_checkpointer(obj: Any, stack: contextlib.ExitStack) -> BaseCheckpointSaver[Any] | None:
    """A checkpointer from a saver or a context manager that yields one."""
    saver: BaseCheckpointSaver[Any] | None = _unwrap(
        obj, BaseCheckpointSaver, "checkpointer", stack
    )
    return saver


def resolve_store(obj: Any, stack: contextlib.ExitStack) -> BaseStore | None:
    """A store from a ``BaseStore`` or a context manager that yields one."""
    store: BaseStore | None = _unwrap(obj, BaseStore, "memory_store", stack)
    return store

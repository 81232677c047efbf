"""Accepting checkpointers and stores in the forms users actually have them.

LangGraph's ``from_conn_string`` helpers return context managers, and it is natural to pass
one straight to ``init_agent(checkpointer=SqliteSaver.from_conn_string("memory.db"))``. Such
a context manager is entered here and exited when the agent closes. A
:class:`~retrievalagent.persistence._compat.LazyConnection` (what the patched helpers return)
is unwrapped to its real saver/store; its connection closes when the last agent using it
closes.
"""

from __future__ import annotations

import contextlib
from typing import Any

from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.store.base import BaseStore

from retrievalagent.errors import ConfigError

__all__ = ["resolve_checkpointer", "resolve_store"]


def _checked(obj: Any, kind: type, what: str) -> Any:
    if not isinstance(obj, kind):
        raise ConfigError(f"{what} must be a LangGraph {kind.__name__}, not {type(obj).__name__}")
    return obj


def _unwrap(obj: Any, kind: type, what: str, stack: contextlib.ExitStack) -> Any:
    if obj is None or isinstance(obj, kind):
        return obj
    acquire = getattr(obj, "__retrievalagent_acquire__", None)
    if callable(acquire):  # a from_conn_string result made usable without `with`
        target, release = acquire()
        stack.callback(release)
        return _checked(target, kind, what)
    inner = getattr(obj, "__retrievalagent_target__", None)
    if callable(inner):
        return _checked(inner(), kind, what)
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
    raise ConfigError(f"{what} must be a LangGraph {kind.__name__}, not {type(obj).__name__}")


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

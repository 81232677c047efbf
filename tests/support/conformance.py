"""Running LangGraph's checkpoint conformance suite (``langgraph.checkpoint.conformance``)
from a test.

The suite only calls the async methods (``aput``, ``aget_tuple``, ...). LangGraph's sync
savers (``SqliteSaver``, ``PostgresSaver``) do not implement those, so on them the suite
detects nothing (``PostgresSaver``) or fails everything with ``NotImplementedError``
(``SqliteSaver``), however correct their sync methods are. :func:`sync_methods_awaited`
lets the suite reach a sync saver's own methods: each awaited call runs the sync method in a
worker thread, and a capability exists on it exactly when the saver's class implements the
sync method.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from typing import Any

from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.checkpoint.conformance import checkpointer_test, validate
from langgraph.checkpoint.conformance.capabilities import DetectedCapabilities
from langgraph.checkpoint.conformance.report import CapabilityReport

__all__ = ["detected", "run_suite", "summary", "sync_methods_awaited"]

# the suite's capabilities, by the sync method behind each async one
_SYNC_OF = {
    "aput": "put",
    "aput_writes": "put_writes",
    "aget_tuple": "get_tuple",
    "alist": "list",
    "adelete_thread": "delete_thread",
    "adelete_for_runs": "delete_for_runs",
    "acopy_thread": "copy_thread",
    "aprune": "prune",
}


def _implements(cls: type, method: str) -> bool:
    return getattr(cls, method, None) is not getattr(BaseCheckpointSaver, method)


def _awaited(sync: str) -> Callable[..., Any]:
    async def call(self: Any, *args: Any, **kwargs: Any) -> Any:
        return await asyncio.to_thread(getattr(self.inner, sync), *args, **kwargs)

    return call


def _awaited_list() -> Callable[..., Any]:
    async def alist(self: Any, *args: Any, **kwargs: Any) -> AsyncIterator[Any]:
        items = await asyncio.to_thread(lambda: list(self.inner.list(*args, **kwargs)))
        for item in items:
            yield item

    return alist


def sync_methods_awaited(saver: BaseCheckpointSaver[Any]) -> BaseCheckpointSaver[Any]:
    """A saver whose async methods run ``saver``'s sync ones (those its class implements)."""
    kind = type(saver)
    namespace: dict[str, Any] = {
        "__init__": lambda self, inner: setattr(self, "inner", inner),
        "get_next_version": lambda self, current, channel: self.inner.get_next_version(
            current, channel
        ),
    }
    for amethod, sync in _SYNC_OF.items():
        if _implements(kind, sync):
            namespace[amethod] = _awaited_list() if sync == "list" else _awaited(sync)
    facade = type(f"Awaited{kind.__name__}", (BaseCheckpointSaver,), namespace)
    result: BaseCheckpointSaver[Any] = facade(saver)
    return result


def detected(saver: BaseCheckpointSaver[Any]) -> set[str]:
    """The capabilities the suite detects on ``saver`` (by its type, as the suite does)."""
    return {cap.value for cap in DetectedCapabilities.from_instance(saver).detected}


async def run_suite(name: str, factory: Callable[[], AsyncIterator[Any]]) -> CapabilityReport:
    """Run the whole suite; ``factory`` yields a fresh saver per capability."""
    return await validate(checkpointer_test(name=name)(factory))


def summary(report: CapabilityReport) -> dict[str, tuple[int, int]]:
    """capability -> (tests passed, tests failed), for the detected capabilities."""
    return {
        cap: (result.tests_passed, result.tests_failed)
        for cap, result in report.results.items()
        if result.detected
    }

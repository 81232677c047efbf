"""One implementation of a backend operation for both the sync and the async API.

A backend writes each operation once, as a generator that *yields* the I/O it needs (an
``IO`` request) and receives the result; ``run`` drives it with blocking calls, ``arun``
with awaited ones. The logic between the I/O calls -- planning the batch, scoring, merging
-- so exists once, as in langgraph's ``BaseStore`` (operations built as data, one
``batch``/``abatch`` pair).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Generator
from dataclasses import dataclass
from typing import Any, TypeVar

__all__ = ["IO", "Plan", "arun", "attempt", "run"]

T = TypeVar("T")


@dataclass(frozen=True)
class IO:
    """One I/O step: the sync and the async way to perform it."""

    sync: Callable[[], Any]
    async_: Callable[[], Awaitable[Any]]


Plan = Generator[IO, Any, T]


def run(plan: Plan[T]) -> T:
    """Drive ``plan`` with blocking calls. A step's exception (Ctrl-C too) is raised inside
    the plan, where it stood, so that a plan can set right what it wrote before raising it."""
    try:
        step = next(plan)
        while True:
            try:
                result = step.sync()
            except BaseException as exc:
                step = plan.throw(exc)
                continue
            step = plan.send(result)
    except StopIteration as done:
        value: T = done.value
        return value


async def arun(plan: Plan[T]) -> T:
    """Drive ``plan`` with awaited calls (a step's exception, a cancellation too, is raised
    inside the plan, as ``run`` does)."""
    try:
        step = next(plan)
        while True:
            try:
                result = await step.async_()
            except BaseException as exc:
                step = plan.throw(exc)
                continue
            step = plan.send(result)
    except StopIteration as done:
        value: T = done.value
        return value


def attempt(step: IO) -> IO:
    """``step``, handing back the exception it raises instead of raising it: for a plan
    that must go on (and raise it after) when one step fails."""

    def sync() -> Any:
        try:
            return step.sync()
        except Exception as exc:
            return exc

    async def async_() -> Any:
        try:
            return await step.async_()
        except Exception as exc:
            return exc

    return IO(sync, async_)

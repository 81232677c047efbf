"""Bounded retries of chat-model calls, shared by the sync and async paths.

A hosted model fails now and then for reasons that go away: rate limits (429), timeouts,
dropped connections, overloaded servers (5xx). Those are retried with exponential back-off
and jitter, a bounded number of times; then the call raises :class:`ModelError` naming the
model, the role of the call and the cause. Errors that a retry cannot fix (a bad key, a bad
request) raise :class:`ModelError` at once. ``ValueError`` / ``TypeError`` (a reply that does
not parse or validate) pass through unchanged: the caller decides what a bad reply means.

Provider SDKs retry on their own too (the openai client twice by default). Models the agent
builds from a string get those retries turned off (see ``resolve_model``), so one policy
applies; a model instance passed in keeps its client's setting and the two multiply:
``(1 + model_retries) * (1 + client max_retries)`` requests at most.
"""

from __future__ import annotations

import asyncio
import logging
import random
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TypeVar

from retrievalagent.errors import ModelError

__all__ = ["RetryPolicy", "is_transient"]

logger = logging.getLogger("retrievalagent")
T = TypeVar("T")

# Exception class names (anywhere in the MRO) of provider SDKs that mean "try again later".
_TRANSIENT_NAMES = frozenset(
    {
        "APIConnectionError",  # openai, anthropic (APITimeoutError is a subclass)
        "APITimeoutError",
        "RateLimitError",
        "InternalServerError",
        "ServiceUnavailableError",
        "OverloadedError",
        "TimeoutException",  # httpx
        "TransportError",  # httpx: ConnectError, ReadError, RemoteProtocolError, ...
        "ResourceExhausted",  # google
        "ServiceUnavailable",
        "DeadlineExceeded",
    }
)


def _status(exc: BaseException) -> int | None:
    for holder in (exc, getattr(exc, "response", None)):
        status = getattr(holder, "status_code", None)
        if isinstance(status, int):
            return status
    return None


def is_transient(exc: BaseException) -> bool:
    """True for errors a later attempt may not hit: 408/409/429/5xx, timeouts, connections."""
    if isinstance(exc, TimeoutError | ConnectionError):  # incl. ConnectionResetError
        return True
    status = _status(exc)
    if status is not None:
        return status in (408, 409, 429) or status >= 500
    return any(cls.__name__ in _TRANSIENT_NAMES for cls in type(exc).__mro__)


def _passes_through(exc: BaseException) -> bool:
    """Errors that are not the model service failing: bad replies, graph control flow."""
    if isinstance(exc, ValueError | TypeError):
        return True
    return any(cls.__name__ == "GraphBubbleUp" for cls in type(exc).__mro__)


def _retry_after(exc: BaseException) -> float:
    headers = getattr(getattr(exc, "response", None), "headers", None)
    try:
        hint: float = float(headers.get("retry-after")) if headers is not None else 0.0
        return max(0.0, hint)
    except (TypeError, ValueError):
        return 0.0


def _cause(exc: BaseException) -> str:
    text = " ".join(str(exc).split())
    return f"{type(exc).__name__}: {text[:300]}" if text else type(exc).__name__


@dataclass(frozen=True)
class RetryPolicy:
    """How a model call is retried.

    Args:
        retries: Retries after the first attempt (0 = none).
        backoff: Seconds before the first retry; doubled for each further one.
        max_backoff: Longest single wait.
    """

    retries: int = 3
    backoff: float = 0.5
    max_backoff: float = 20.0

    def delay(self, attempt: int, exc: BaseException | None = None) -> float:
        """Seconds to wait after failed attempt number ``attempt`` (0-based)."""
        base = min(self.max_backoff, self.backoff * (2.0**attempt))
        jittered = base * random.uniform(0.5, 1.0)
        hinted = min(self.max_backoff, _retry_after(exc)) if exc is not None else 0.0
        return max(jittered, hinted)

    def _next(self, exc: Exception, attempt: int, model: str, role: str) -> float:
        """The wait before the next attempt, or raise what the caller should see."""
        if _passes_through(exc):
            raise exc
        tries = attempt + 1
        if not is_transient(exc):
            raise ModelError(
                f"chat model {model!r} failed ({role}): {_cause(exc)}; not retried "
                "(not a transient error)",
                model=model,
                role=role,
                attempts=tries,
                original=exc,
            ) from exc
        if attempt >= self.retries:
            raise ModelError(
                f"chat model {model!r} failed ({role}) after {tries} attempt(s): {_cause(exc)}",
                model=model,
                role=role,
                attempts=tries,
                original=exc,
            ) from exc
        wait = self.delay(attempt, exc)
        logger.warning(
            "chat model %r (%s) failed with %s; retry %d of %d in %.2fs",
            model,
            role,
            type(exc).__name__,
            tries,
            self.retries,
            wait,
        )
        return wait

    def call(self, fn: Callable[[], T], *, model: str, role: str) -> T:
        """``fn()`` with retries (sync)."""
        attempt = 0
        while True:
            try:
                return fn()
            except Exception as exc:
                time.sleep(self._next(exc, attempt, model, role))
            attempt += 1

    async def acall(self, factory: Callable[[], Awaitable[T]], *, model: str, role: str) -> T:
        """``await factory()`` with retries (async); waits without blocking the loop."""
        attempt = 0
        while True:
            try:
                return await factory()
            except Exception as exc:
                await asyncio.sleep(self._next(exc, attempt, model, role))
            attempt += 1

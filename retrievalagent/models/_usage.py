"""What each chat-model call costs: tokens and wall time, gathered per graph node.

A hosted model bills per token and makes the user wait per round trip, so every call the
agent makes is counted where it is made. A node opens a :class:`Meter` (a context
variable, so the model roles need no extra argument and sync, async and threaded calls
land in the node that made them); each call records its role, the tokens the provider
reported (LangChain's ``usage_metadata``) and its wall time, retries included. A provider
that reports no usage gets an estimate of 4 characters a token, and the event says
``"estimated": true``. A call that failed (its retries spent, or an error retrying cannot
fix) is counted too: its time, and no tokens, since no reply came back to bill. The node puts :meth:`Meter.event` into its trace event as
``usage``, and :func:`turn_usage` adds a turn's events up per role.
"""

from __future__ import annotations

import contextvars
import time
from collections.abc import Awaitable, Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeVar

from retrievalagent.trace import Usage, UsageTotals

if TYPE_CHECKING:
    from retrievalagent.models._retry import RetryPolicy

T = TypeVar("T")

__all__ = [
    "CHARS_PER_TOKEN",
    "Meter",
    "ametered_call",
    "estimate_tokens",
    "metered_call",
    "metering",
    "record",
    "turn_usage",
]

#: The estimate used when a provider reports no usage: characters per token.
CHARS_PER_TOKEN = 4
_FIELDS = ("calls", "input_tokens", "output_tokens", "ms")

_current: contextvars.ContextVar[Meter | None] = contextvars.ContextVar(
    "retrievalagent_meter", default=None
)


def estimate_tokens(text: str) -> int:
    """Tokens of ``text`` at :data:`CHARS_PER_TOKEN` characters a token (at least 1)."""
    return max(1, -(-len(text) // CHARS_PER_TOKEN)) if text else 0


def _text(value: Any) -> str:
    content = getattr(value, "content", value)
    if isinstance(content, list):
        return "".join(b.get("text", "") if isinstance(b, dict) else str(b) for b in content)
    if isinstance(content, str):
        return content
    return "" if content is None else str(content)


def _reply_text(reply: Any) -> str:
    """What the model wrote: the text, plus tool-call arguments (structured output)."""
    text = _text(reply)
    for call in getattr(reply, "tool_calls", None) or []:
        args = call.get("args") if isinstance(call, Mapping) else None
        text += str(args or "")
    return text


@dataclass
class Meter:
    """The calls one node made: role, tokens in and out, milliseconds, estimated or not."""

    calls: list[dict[str, Any]] = field(default_factory=list)

    def add(
        self,
        role: str,
        prompt: Sequence[Any],
        reply: Any,
        ms: float,
        *,
        fallback_output: str = "",
        failed: bool = False,
    ) -> dict[str, Any]:
        """Record one call; ``reply`` is the model's message (or None if it is not at hand;
        ``failed``: none came back, so no tokens)."""
        usage = getattr(reply, "usage_metadata", None)
        if failed:
            call = {"role": role, "input_tokens": 0, "output_tokens": 0, "estimated": False}
        elif isinstance(usage, Mapping) and (
            usage.get("input_tokens") or usage.get("output_tokens")
        ):
            call = {
                "role": role,
                "input_tokens": int(usage.get("input_tokens") or 0),
                "output_tokens": int(usage.get("output_tokens") or 0),
                "estimated": False,
            }
        else:
            output = _reply_text(reply) if reply is not None else fallback_output
            call = {
                "role": role,
                "input_tokens": sum(estimate_tokens(_text(m)) for m in prompt),
                "output_tokens": estimate_tokens(output),
                "estimated": True,
            }
        call["ms"] = round(ms, 3)
        self.calls.append(call)
        return call

    def event(self) -> Usage | None:
        """The node's ``usage`` trace field: totals of its calls, and ``by_role`` when it
        made calls of more than one role; None when it made none."""
        if not self.calls:
            return None
        roles = {c["role"] for c in self.calls}
        totals = _totals(self.calls)
        out: Usage = {
            "calls": totals["calls"],
            "input_tokens": totals["input_tokens"],
            "output_tokens": totals["output_tokens"],
            "ms": totals["ms"],
            "estimated": totals["estimated"],
            "role": self.calls[0]["role"] if len(roles) == 1 else "mixed",
        }
        if len(roles) > 1:
            out["by_role"] = {r: _totals([c for c in self.calls if c["role"] == r]) for r in roles}
        return out


def _totals(calls: Sequence[Mapping[str, Any]]) -> UsageTotals:
    return {
        "calls": len(calls),
        "input_tokens": sum(int(c["input_tokens"]) for c in calls),
        "output_tokens": sum(int(c["output_tokens"]) for c in calls),
        "ms": round(sum(float(c["ms"]) for c in calls), 3),
        "estimated": any(c["estimated"] for c in calls),
    }


@contextmanager
def metering() -> Iterator[Meter]:
    """Collect the calls made inside the block (this thread or task) into a new Meter."""
    meter = Meter()
    token = _current.set(meter)
    try:
        yield meter
    finally:
        _current.reset(token)


def record(
    role: str,
    prompt: Sequence[Any],
    reply: Any,
    start: float,
    *,
    fallback_output: str = "",
    failed: bool = False,
) -> None:
    """Record a call that started at ``start`` (``time.perf_counter()``) into the open meter
    (a call made outside any node, e.g. by a user's own code, is not recorded)."""
    meter = _current.get()
    if meter is not None:
        ms = (time.perf_counter() - start) * 1e3
        meter.add(role, prompt, reply, ms, fallback_output=fallback_output, failed=failed)


def turn_usage(trace: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """A turn's model usage from its trace: per role, and ``total``.

    Each role (and the total) has ``calls``, ``input_tokens``, ``output_tokens``, ``ms``
    and ``estimated`` (True when any call's tokens were estimated).
    """
    roles: dict[str, dict[str, Any]] = {}
    for event in trace:
        usage = event.get("usage") if isinstance(event, Mapping) else None
        if not isinstance(usage, Mapping):
            continue
        parts = usage.get("by_role") or {usage.get("role", event.get("node", "?")): usage}
        for role, part in parts.items():
            into = roles.setdefault(role, {k: 0 for k in _FIELDS} | {"estimated": False})
            for key in _FIELDS:
                into[key] += part.get(key, 0)
            into["estimated"] = bool(into["estimated"] or part.get("estimated"))
    total = {k: 0 for k in _FIELDS} | {"estimated": False}
    for part in roles.values():
        for key in _FIELDS:
            total[key] += part[key]
        total["estimated"] = bool(total["estimated"] or part["estimated"])
    for part in [*roles.values(), total]:
        part["ms"] = round(part["ms"], 3)
    return {**roles, "total": total}


def _raw(reply: Any) -> Any:
    """The raw message of an ``include_raw`` reply (None when the model gave no such dict)."""
    return reply.get("raw") if isinstance(reply, Mapping) and "raw" in reply else None


def _dumped(reply: Any) -> str:
    """A structured value as text, to estimate its tokens when there is no raw message."""
    from pydantic import BaseModel

    if isinstance(reply, BaseModel):
        return reply.model_dump_json()
    return "" if _raw(reply) is not None else str(reply)


def _settle(role: str, prompt: Sequence[Any], reply: Any, start: float) -> None:
    """Record a finished call: a chat message as it is, a structured reply by its raw
    message (or, from a model that gives none, by its value as text)."""
    if hasattr(reply, "content"):
        record(role, prompt, reply, start)
    else:
        record(role, prompt, _raw(reply), start, fallback_output=_dumped(reply))


def _failed(role: str, prompt: Sequence[Any], start: float, exc: BaseException) -> None:
    """Record a call that raised: a reply that did not parse still cost a call (its tokens
    estimated); a call that got no reply (``ModelError``, cancelled) cost its time only."""
    if isinstance(exc, ValueError | TypeError):
        record(role, prompt, None, start)
    else:
        record(role, prompt, None, start, failed=True)


def metered_call(
    role: str, prompt: Sequence[Any], call: Callable[[], T], retry: RetryPolicy, model: str
) -> T:
    """``call()`` through ``retry``, recorded as one ``role`` call (a reply that did not
    parse still cost a call, and is recorded before its error goes up)."""
    start = time.perf_counter()
    try:
        reply = retry.call(call, model=model, role=role)
    except BaseException as exc:
        _failed(role, prompt, start, exc)
        raise
    _settle(role, prompt, reply, start)
    return reply


async def ametered_call(
    role: str,
    prompt: Sequence[Any],
    call: Callable[[], Awaitable[T]],
    retry: RetryPolicy,
    model: str,
) -> T:
    """:func:`metered_call` for async model calls."""
    start = time.perf_counter()
    try:
        reply = await retry.acall(call, model=model, role=role)
    except BaseException as exc:
        _failed(role, prompt, start, exc)
        raise
    _settle(role, prompt, reply, start)
    return reply

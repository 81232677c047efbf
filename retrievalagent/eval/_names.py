"""How ``evaluate``'s messages name its inputs: ``questions=`` when Python called it,
``--questions`` when ``retrievalagent eval`` did, so every error names what the caller typed.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar

__all__ = ["arg", "cli_names", "given"]

#: Each input: how Python passes it, and the command's flag for it.
_NAMES = {
    "beir": ("beir=", "--beir"),
    "questions": ("questions=", "--questions"),
    "docs": ("docs=", "--docs"),
    "derive_from": ("derive_from=", "--derive-from"),
    "collection": ("collection=", "--collection"),
    "llm_questions": ("llm_questions=", "--llm-questions"),
    "model": ("model=", "--model"),
    "tune": ("tune=True", "--tune"),
    "run_out": ("run_out=", "--run-out"),
    "split": ("split=", "--split"),
    "max_queries": ("max_queries=", "--max-queries"),
}

_from_cli: ContextVar[bool] = ContextVar("retrievalagent_eval_cli_names", default=False)


def arg(name: str) -> str:
    """How the caller spells the input ``name``."""
    python, flag = _NAMES[name]
    return flag if _from_cli.get() else python


def given(name: str, value: object) -> str:
    """The input ``name`` with the value it was given: ``--beir ./set`` or ``beir='./set'``."""
    python, flag = _NAMES[name]
    return f"{flag} {value}" if _from_cli.get() else f"{python}{str(value)!r}"


@contextmanager
def cli_names() -> Iterator[None]:
    """Inside this block, messages name the command's flags."""
    token = _from_cli.set(True)
    try:
        yield
    finally:
        _from_cli.reset(token)

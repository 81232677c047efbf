"""Temporary replacement of an agent's parts (``RetrievalAgent.override``).

Overrides are kept as layers over the parts the agent was built with, so blocks that
overlap without nesting (two asyncio tasks, two threads) still leave the agent as built
once the last one exits: each exit removes its own layer and the parts are recomputed,
instead of each block putting back whatever it found on entry.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any

from retrievalagent.errors import ConfigError

__all__ = ["Overrides", "Slot"]

#: where one replaceable part lives: an object and the name of its attribute
Slot = tuple[object, str]

#: what each part must offer, checked on entry so a wrong object fails there, not mid-turn
_NEEDS: Mapping[str, tuple[str, ...]] = {
    "answerer": ("answer", "aanswer", "streams_tokens"),
    "grader": ("grade", "agrade"),
    "rewriter": ("rewrite", "arewrite"),
    "ingest_embeddings": ("embed_documents",),
    "searcher": ("search", "asearch", "plan", "dense_hits", "lexical_hits", "rank"),
}


def _check(name: str, part: object) -> None:
    missing = [attr for attr in _NEEDS.get(name, ()) if not hasattr(part, attr)]
    if missing:
        raise ConfigError(
            f"override({name}=...): a {type(part).__name__} lacks {', '.join(missing)} "
            f"(a {name} needs {', '.join(_NEEDS[name])})"
        )


class Overrides:
    """The override layers of one agent."""

    def __init__(self, slots: Mapping[str, Slot]) -> None:
        self._slots = dict(slots)
        # the parts as built: they change only through layers, so read them once
        self._built = {name: getattr(*slot) for name, slot in self._slots.items()}
        self._layers: list[tuple[object, dict[str, Any]]] = []
        self._lock = threading.Lock()

    @contextmanager
    def layer(self, parts: Mapping[str, Any]) -> Iterator[None]:
        """Install ``parts`` (``None`` values are ignored) until the block exits."""
        chosen = {name: part for name, part in parts.items() if part is not None}
        for name, part in chosen.items():
            if name not in self._slots:
                raise TypeError(f"override() got an unexpected part {name!r}")
            _check(name, part)
        token = object()
        with self._lock:
            self._layers.append((token, chosen))
            self._apply()
        try:
            yield
        finally:
            with self._lock:
                self._layers = [entry for entry in self._layers if entry[0] is not token]
                self._apply()

    def _apply(self) -> None:
        current = dict(self._built)
        for _, parts in self._layers:
            current.update(parts)
        for name, part in current.items():
            setattr(*self._slots[name], part)

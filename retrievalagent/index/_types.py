"""Plain data passed between the index, the searches and fusion."""

from __future__ import annotations

import math
import numbers
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from retrievalagent.errors import ConfigError

__all__ = ["Condition", "Hit", "Sparse", "parse_filter"]

# Payload keys the library owns; every other filter key addresses the caller's metadata.
TOP_LEVEL_KEYS = frozenset({"source", "doc_hash", "position", "chunk_id"})


@dataclass(frozen=True, slots=True)
class Sparse:
    """A sparse query or document vector (term ids and weights)."""

    indices: list[int]
    values: list[float]

    def __bool__(self) -> bool:
        return bool(self.indices)


@dataclass(slots=True)
class Hit:
    """One passage returned by a search, with the payload it was indexed with."""

    id: str
    score: float
    payload: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Condition:
    """One payload condition: ``match`` a value, ``any`` of values, or a ``range``."""

    key: str
    kind: str  # "match" | "any" | "range"
    value: Any


def _bounds(key: str, spec: Mapping[str, Any]) -> dict[str, Any]:
    """A range's bounds, each a finite number: a string would fail deep in the engine, and
    NaN compares false with everything, so its range would silently match nothing."""
    for bound, value in spec.items():
        if isinstance(value, bool) or not isinstance(value, numbers.Real):
            raise ConfigError(
                f"filter {key!r}: {bound} must be a number, got {type(value).__name__} {value!r}"
            )
        if not math.isfinite(value):
            raise ConfigError(f"filter {key!r}: {bound} must be a finite number, got {value!r}")
    return dict(spec)


def parse_filter(spec: Mapping[str, Any] | None) -> list[Condition]:
    """Conditions from a metadata filter such as ``{"lang": "en", "year": {"gte": 2020}}``.

    Keys address the caller's metadata (``metadata.<key>``), except the library's own
    payload keys (``source``, ``doc_hash``, ``position``). A list value matches any of its
    items; a dict with ``gt``/``gte``/``lt``/``lte`` is a numeric range.
    """
    if spec is None:
        return []
    if not isinstance(spec, Mapping):
        raise ConfigError(
            f"filter must be a dict of metadata key -> value, not {type(spec).__name__}"
        )
    conditions = []
    for key, value in spec.items():
        if not isinstance(key, str) or not key:
            raise ConfigError(f"filter keys must be non-empty strings, got {key!r}")
        path = key if key in TOP_LEVEL_KEYS or key.startswith("metadata.") else f"metadata.{key}"
        if isinstance(value, Mapping):
            bad = set(value) - {"gt", "gte", "lt", "lte"}
            if bad or not value:
                raise ConfigError(
                    f"filter {key!r}: a range accepts the keys gt, gte, lt, lte, got {sorted(value)}"
                )
            conditions.append(Condition(path, "range", _bounds(key, value)))
        elif isinstance(value, list | tuple | set | frozenset):
            items = list(value)
            if not items or not all(
                isinstance(v, str | int) and not isinstance(v, bool) for v in items
            ):
                raise ConfigError(f"filter {key!r}: a list must hold strings or integers")
            conditions.append(Condition(path, "any", items))
        elif isinstance(value, str | int | bool):
            conditions.append(Condition(path, "match", value))
        else:
            raise ConfigError(
                f"filter {key!r}: unsupported value {value!r}; use a string, integer, boolean, "
                "list, or range dict"
            )
    return conditions

"""What both index backends say alike: filters from ``Condition`` lists, points, hits
and scroll paging.

qdrant-client and qdrant-edge spell filters and points with classes of the same fields
(``Filter``, ``FieldCondition``, ``MatchValue``, ``MatchAny``, ``SparseVector``); only some
names differ (``Range`` / ``RangeFloat``, ``PointStruct`` / ``Point``). So each backend
hands its engine's classes to a ``Dialect`` and the rules live here once: what each
condition kind means, that a delete needs a condition, how staged chunks are hidden or
picked, and how a chunk's two vectors and payload make a point.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from retrievalagent.errors import VectorIndexError
from retrievalagent.index._base import (
    DENSE,
    IS_STAGED,
    SPARSE,
    Conditions,
    DenseBatch,
    Payloads,
)
from retrievalagent.index._types import Condition, Hit, Sparse

__all__ = ["Dialect", "hit", "records"]

FilterT = TypeVar("FilterT")


def hit(point: Any) -> Hit:
    """A scored point of either engine as a ``Hit``."""
    return Hit(id=str(point.id), score=float(point.score), payload=dict(point.payload or {}))


def records(
    scroll: Callable[[Any], tuple[Sequence[Any], Any]],
) -> Iterator[tuple[str, dict[str, Any]]]:
    """Every record of a scroll, page after page, as its id and payload; ``scroll`` takes
    the offset of the page (None first) and returns its records and the next offset."""
    offset = None
    while True:
        page, offset = scroll(offset)
        yield from ((str(r.id), dict(r.payload or {})) for r in page)
        if offset is None:
            return


@dataclass(frozen=True)
class Dialect(Generic[FilterT]):
    """One engine's filters and points (its classes as fields)."""

    filter: Callable[..., FilterT]
    field_condition: Callable[..., Any]
    match_value: Callable[..., Any]
    match_any: Callable[..., Any]
    range: Callable[..., Any]
    point: Callable[..., Any]
    sparse_vector: Callable[..., Any]

    def sparse(self, vector: Sparse) -> Any:
        return self.sparse_vector(indices=vector.indices, values=vector.values)

    def points(
        self, ids: Sequence[str], dense: DenseBatch, sparse: Sequence[Sparse], payloads: Payloads
    ) -> list[Any]:
        """Chunks as the engine's points: a named dense and BM25 vector, and the payload."""
        return [
            self.point(
                id=pid,
                vector={DENSE: list(map(float, vec)), SPARSE: self.sparse(sp)},
                payload=payload,
            )
            for pid, vec, sp, payload in zip(ids, dense, sparse, payloads, strict=True)
        ]

    def condition(self, c: Condition) -> Any:
        """One ``Condition`` as the engine's field condition."""
        if c.kind == "match":
            return self.field_condition(key=c.key, match=self.match_value(value=c.value))
        if c.kind == "any":
            return self.field_condition(key=c.key, match=self.match_any(any=c.value))
        return self.field_condition(key=c.key, range=self.range(**c.value))

    def build(self, conditions: Conditions, must_not: Conditions = ()) -> FilterT | None:
        """Chunks matching every one of ``conditions`` and none of ``must_not``; None when
        both are empty (no filter: every chunk)."""
        if not conditions and not must_not:
            return None
        return self.filter(
            must=[self.condition(c) for c in conditions] or None,
            must_not=[self.condition(c) for c in must_not] or None,
        )

    def deleting(self, conditions: Conditions, must_not: Conditions = ()) -> FilterT:
        """``build`` for a delete, which must never select every chunk by accident."""
        flt = self.build(conditions, must_not)
        if flt is None:
            raise VectorIndexError("refusing to delete without conditions")
        return flt

    def visible(self, conditions: Conditions = (), any_staged: bool = True) -> FilterT | None:
        """``conditions`` minus staged chunks (the exclusion can be left out when the caller
        knows nothing is staged)."""
        return self.build(conditions, [IS_STAGED] if any_staged else ())

    def staged(self, conditions: Conditions = ()) -> FilterT:
        """Only the staged chunks matching ``conditions``."""
        return self.filter(must=[self.condition(c) for c in (*conditions, IS_STAGED)])

"""Fusion of the dense and BM25 ranked lists into one.

Reciprocal rank fusion only sees ranks; with a strong dense retriever and a weak BM25 list
it can rank below dense alone. The score-based fusions normalise each list and mix them;
``adaptive`` also moves weight, per query, toward the list that is more sure of its top
results. Which one is the default is decided by the benchmarks (see docs/benchmarks.md).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from retrievalagent.config import FUSION_METHODS
from retrievalagent.retrieval._types import Hit

__all__ = ["FusedHit", "Fuser", "fuse", "make_fuser"]


@dataclass(slots=True)
class FusedHit:
    """A passage after fusion, with where each retriever ranked it (1-based; None = absent)."""

    id: str
    score: float
    payload: dict[str, Any]
    dense_rank: int | None = None
    dense_score: float | None = None
    lexical_rank: int | None = None
    lexical_score: float | None = None
    extra: dict[str, Any] = field(default_factory=dict)


class Fuser(Protocol):
    """Turns the dense and lexical result lists into one ranked list."""

    name: str

    def __call__(self, dense: Sequence[Hit], lexical: Sequence[Hit]) -> list[FusedHit]: ...


def _collect(dense: Sequence[Hit], lexical: Sequence[Hit]) -> dict[str, FusedHit]:
    merged: dict[str, FusedHit] = {}
    for rank, hit in enumerate(dense, 1):
        merged[hit.id] = FusedHit(hit.id, 0.0, hit.payload, dense_rank=rank, dense_score=hit.score)
    for rank, hit in enumerate(lexical, 1):
        item = merged.get(hit.id)
        if item is None:
            item = merged[hit.id] = FusedHit(hit.id, 0.0, hit.payload)
        item.lexical_rank, item.lexical_score = rank, hit.score
    return merged


def _ranked(items: dict[str, FusedHit]) -> list[FusedHit]:
    # Ties break toward the better dense rank, then the id, so results are deterministic.
    return sorted(
        items.values(),
        key=lambda h: (-h.score, h.dense_rank or 1 << 30, h.lexical_rank or 1 << 30, h.id),
    )


@dataclass(frozen=True)
class RRF:
    """Reciprocal rank fusion, optionally weighted: ``sum(w / (k + rank))``."""

    k: int = 60
    dense_weight: float = 0.5
    name: str = "rrf"

    def __call__(self, dense: Sequence[Hit], lexical: Sequence[Hit]) -> list[FusedHit]:
        items = _collect(dense, lexical)
        wd, wl = 2 * self.dense_weight, 2 * (1 - self.dense_weight)
        for h in items.values():
            h.score = (wd / (self.k + h.dense_rank) if h.dense_rank else 0.0) + (
                wl / (self.k + h.lexical_rank) if h.lexical_rank else 0.0
            )
        return _ranked(items)


def _dense_norm(score: float | None) -> float:
    # Cosine similarity: its theoretical range is known, so no per-query min-max (which
    # would stretch a list of uniformly poor matches to look confident).
    return 0.0 if score is None else max(0.0, min(1.0, score))


def _lexical_norm(scores: Sequence[float]) -> tuple[float, float]:
    # BM25 has no fixed maximum: scale by the best score of this query, floor at 0.
    top = max(scores, default=0.0)
    return (top, 0.0) if top > 0 else (1.0, 0.0)


@dataclass(frozen=True)
class Convex:
    """``w * cosine + (1 - w) * bm25 / max_bm25``, missing scores counted as 0.

    With ``adaptive=True`` the BM25 weight shrinks for queries whose BM25 list is flat
    (its best hit barely beats the rest: the terms matched nothing distinctive) and the
    dense weight shrinks when the dense list is flat, so each query leans on the retriever
    that separates its candidates.
    """

    dense_weight: float = 0.5
    adaptive: bool = False
    name: str = "convex"

    def __call__(self, dense: Sequence[Hit], lexical: Sequence[Hit]) -> list[FusedHit]:
        items = _collect(dense, lexical)
        top, _ = _lexical_norm([h.score for h in lexical])
        wd, wl = self.dense_weight, 1 - self.dense_weight
        if self.adaptive and dense and lexical:
            sd, sl = (
                _separation([h.score for h in dense]),
                _separation([h.score / top for h in lexical]),
            )
            if sd + sl > 0:
                wd, wl = wd * (0.5 + sd / (sd + sl)), wl * (0.5 + sl / (sd + sl))
                total = wd + wl
                wd, wl = wd / total, wl / total
        elif not lexical:
            wd, wl = 1.0, 0.0
        elif not dense:
            wd, wl = 0.0, 1.0
        for h in items.values():
            h.score = wd * _dense_norm(h.dense_score) + wl * (
                (h.lexical_score or 0.0) / top if h.lexical_score else 0.0
            )
            h.extra = {"w_dense": round(wd, 3), "w_lexical": round(wl, 3)}
        return _ranked(items)


def _separation(scores: Sequence[float], head: int = 10) -> float:
    """How far the best score stands above the mean of the top ``head`` (0 = flat list)."""
    top = list(scores[:head])
    if len(top) < 2:
        return 0.0
    mean = sum(top) / len(top)
    return max(0.0, top[0] - mean)


def make_fuser(method: str, *, rrf_k: int = 60, dense_weight: float = 0.5) -> Fuser:
    """The fuser named ``method`` (one of ``FUSION_METHODS``)."""
    if method == "rrf":
        return RRF(k=rrf_k, dense_weight=0.5, name="rrf")
    if method == "weighted_rrf":
        return RRF(k=rrf_k, dense_weight=dense_weight, name="weighted_rrf")
    if method == "convex":
        return Convex(dense_weight=dense_weight, name="convex")
    if method == "adaptive":
        return Convex(dense_weight=dense_weight, adaptive=True, name="adaptive")
    raise ValueError(f"unknown fusion {method!r}; accepted: {', '.join(FUSION_METHODS)}")


def fuse(
    method: str, dense: Sequence[Hit], lexical: Sequence[Hit], **kwargs: Any
) -> list[FusedHit]:
    """Fuse two ranked lists with the named method."""
    return make_fuser(method, **kwargs)(dense, lexical)

"""Fusion of the dense and BM25 ranked lists into one.

Reciprocal rank fusion only sees ranks; with one strong and one weak retriever it can rank
below the strong one alone. The score-based fusions min-max normalise each candidate list
and mix them with a convex combination (``convex``, the default). ``adaptive`` also moves
weight away from BM25, per query, when part of the query's terms occur nowhere in the
corpus: BM25 is then blind to that part of the question (a synonym, a spelling variant)
and the dense list, which matches meaning, deserves more trust. On a small corpus many
ordinary words are absent, so that signal fires too often there; it is an option, not the
default. The default method and its weight are chosen by ``bench/quality.py`` on held-out
queries (see docs/benchmarks.md).

Equal fused scores are ordered by a fixed key, so the same index content and query always
give the same list. The first key is the hit's *lead* in each list, weighted as the
fusion weighs the lists: how far (min-max normalised, like the fusion) its score stands
above the next lower score there, the bottom of the list counting as 0. A token found in
one chunk only is the sole BM25 hit (lead 1.0) while the dense list's top usually leads
its runner-up by a hair, so the exact match wins their tie. Then the better dense rank,
the better BM25 rank and the id decide. Each list is also put in (score desc, id) order
first, since an engine returns equal scores in the order it stored them, which differs
between two indexes of the same documents; ``dense_rank`` and ``lexical_rank`` count in
that order.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from retrievalagent.config import FUSION_METHODS
from retrievalagent.index import Hit

__all__ = ["FusedHit", "Fuser", "make_fuser"]


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
    #: how far it stands above the next lower score of each list (min-max scaled; ties)
    dense_lead: float = 0.0
    lexical_lead: float = 0.0


class Fuser(Protocol):
    """Turns the dense and lexical result lists into one ranked list.

    ``coverage`` is the share (by weight) of the BM25 query's terms that occur in the corpus
    (1.0 when unknown); fusers that do not use it ignore it.
    """

    @property
    def name(self) -> str:
        """The method's name, as traces and reports show it."""

    @property
    def uses_coverage(self) -> bool:
        """Whether the fuser reads ``coverage`` (so the searcher computes it)."""

    def __call__(
        self, dense: Sequence[Hit], lexical: Sequence[Hit], coverage: float = 1.0
    ) -> list[FusedHit]: ...


def _ordered(hits: Sequence[Hit]) -> list[Hit]:
    """``hits`` best first, equal scores by id (the engine's order among them is not fixed)."""
    return sorted(hits, key=lambda h: (-h.score, h.id))


def _leads(hits: Sequence[Hit]) -> list[float]:
    """Per hit of an ordered list: its min-max normalised margin over the next lower score
    in the list (below the last one: 0); a flat list's hits all lead by 1."""
    low, high = _bounds([h.score for h in hits])
    out: list[float] = []
    below = 0.0
    for i in range(len(hits) - 1, -1, -1):
        norm = _minmax(hits[i].score, low, high)
        if i + 1 < len(hits) and hits[i + 1].score < hits[i].score:
            below = _minmax(hits[i + 1].score, low, high)
        out.append(norm - below)
    return out[::-1]


def _collect(dense: Sequence[Hit], lexical: Sequence[Hit]) -> dict[str, FusedHit]:
    merged: dict[str, FusedHit] = {}
    dense, lexical = _ordered(dense), _ordered(lexical)
    for rank, (hit, lead) in enumerate(zip(dense, _leads(dense), strict=True), 1):
        if hit.id not in merged:
            merged[hit.id] = FusedHit(
                hit.id, 0.0, hit.payload, dense_rank=rank, dense_score=hit.score, dense_lead=lead
            )
    for rank, (hit, lead) in enumerate(zip(lexical, _leads(lexical), strict=True), 1):
        item = merged.get(hit.id)
        if item is None:
            item = merged[hit.id] = FusedHit(hit.id, 0.0, hit.payload)
        if item.lexical_rank is None:
            item.lexical_rank, item.lexical_score = rank, hit.score
            item.lexical_lead = lead
    return merged


def _ranked(items: dict[str, FusedHit], wd: float, wl: float) -> list[FusedHit]:
    """Best fused score first; ties to the larger weighted lead, the better dense rank, the
    better BM25 rank, then the smaller id."""
    last = 1 << 30
    return sorted(
        items.values(),
        key=lambda h: (
            -h.score,
            -(wd * h.dense_lead + wl * h.lexical_lead),
            h.dense_rank or last,
            h.lexical_rank or last,
            h.id,
        ),
    )


@dataclass(frozen=True)
class RRF:
    """Reciprocal rank fusion, optionally weighted: ``sum(w / (k + rank))``."""

    k: int = 60
    dense_weight: float = 0.5
    name: str = "rrf"
    uses_coverage: bool = False

    def __call__(
        self, dense: Sequence[Hit], lexical: Sequence[Hit], coverage: float = 1.0
    ) -> list[FusedHit]:
        items = _collect(dense, lexical)
        wd, wl = 2 * self.dense_weight, 2 * (1 - self.dense_weight)
        for h in items.values():
            h.score = (wd / (self.k + h.dense_rank) if h.dense_rank else 0.0) + (
                wl / (self.k + h.lexical_rank) if h.lexical_rank else 0.0
            )
        return _ranked(items, wd, wl)


def _minmax(score: float | None, low: float, high: float) -> float:
    """``score`` scaled to [0, 1] within its list; a flat list counts as all 1."""
    if score is None:
        return 0.0
    return (score - low) / (high - low) if high > low else 1.0


def _bounds(scores: Sequence[float]) -> tuple[float, float]:
    return (min(scores), max(scores)) if scores else (0.0, 0.0)


@dataclass(frozen=True)
class Convex:
    """``w * minmax(dense) + (1 - w) * minmax(bm25)``; a passage missing from a list gets 0.

    Each list is min-max normalised over its own candidates (``fetch_k`` of them), which
    puts cosine similarities and unbounded BM25 scores on one scale. With
    ``adaptive=True`` the BM25 weight becomes ``(1 - w) * coverage ** coverage_power``
    and the dense weight the rest, so a query whose words the corpus lacks leans on the
    dense list.
    """

    dense_weight: float = 0.5
    adaptive: bool = False
    coverage_power: float = 2.0
    name: str = "convex"

    @property
    def uses_coverage(self) -> bool:
        return self.adaptive

    def weights(self, has_dense: bool, has_lexical: bool, coverage: float) -> tuple[float, float]:
        if not has_lexical:
            return 1.0, 0.0
        if not has_dense:
            return 0.0, 1.0
        wl = 1.0 - self.dense_weight
        if self.adaptive:
            wl *= max(0.0, min(1.0, coverage)) ** self.coverage_power
        return 1.0 - wl, wl

    def __call__(
        self, dense: Sequence[Hit], lexical: Sequence[Hit], coverage: float = 1.0
    ) -> list[FusedHit]:
        items = _collect(dense, lexical)
        wd, wl = self.weights(bool(dense), bool(lexical), coverage)
        dlo, dhi = _bounds([h.score for h in dense])
        llo, lhi = _bounds([h.score for h in lexical])
        extra = {"w_dense": round(wd, 3), "w_lexical": round(wl, 3)}
        for h in items.values():
            h.score = wd * _minmax(h.dense_score, dlo, dhi) + wl * _minmax(
                h.lexical_score, llo, lhi
            )
            h.extra = dict(extra)
        return _ranked(items, wd, wl)


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

"""Fusion quality: nDCG@10 and recall@10 of BM25, dense and their fusions on every eval set.

    python -m bench.quality                  # all sets (manpages, pydocs, aliases)
    python -m bench.quality --sets pydocs    # one set

Protocol. Each set's queries are split in two halves by a hash of the query id (``dev`` and
``test``). Every tunable fusion (the weight of weighted RRF, of the convex combination, of
the adaptive one, and the candidate depth ``fetch_k``) is tuned on the dev halves only:
the chosen setting maximises the *worst* ratio, over the sets, of hybrid nDCG@10 to the
better single retriever (ties: the mean nDCG). Test-half numbers are what the docs quote.
As a second check, each method is also tuned on one set alone and scored on the others.

The index is the library's own (``add_documents`` into the embedded Qdrant engine, BM25
by ``LexicalEncoder``, dense by the packaged MiniLM); passage vectors come from the
benchmark vector cache. The two candidate lists come from ``HybridSearcher.dense_hits``
and ``lexical_hits`` (the calls the graph's search nodes make) and are fused by the
library's fusers, offline, for every setting; one end-to-end pass of
``agent.search`` with the shipped defaults confirms the offline numbers.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from bench._common import (
    CachedEmbeddings,
    build_collection,
    ndcg_recall,
    open_agent,
    setup_logging,
    write_result,
)
from retrievalagent.config import Settings
from retrievalagent.index._types import Hit
from retrievalagent.retrieval import make_fuser

log = logging.getLogger("bench.quality")

SETS = ("manpages", "pydocs", "aliases")
MAX_FETCH = 100
FETCH_KS = (20, 30, 50, 100)
WEIGHTS = tuple(round(w, 2) for w in np.arange(0.1, 0.91, 0.05))
K = 10
TIE = 0.005  # worst-ratio difference under which two settings count as equally good


@dataclass
class QueryLists:
    id: str
    query: str
    relevant: list[str]
    dense: list[Hit]
    lexical: list[Hit]
    split: str
    coverage: float = 1.0


def split_of(query_id: str) -> str:
    return "dev" if int(hashlib.sha1(query_id.encode()).hexdigest(), 16) % 2 == 0 else "test"


def corpus_of(name: str) -> str:
    """The set whose corpus ``name`` uses (``aliases`` queries the manpages corpus)."""
    from bench.datasets import path

    manifest = path(name) / "manifest.json"
    if manifest.exists():
        return json.loads(manifest.read_text()).get("corpus") or name
    return name


def collect(name: str, embeddings: CachedEmbeddings) -> list[QueryLists]:
    """Both ranked lists (``MAX_FETCH`` deep) for every query of set ``name``."""
    from bench.datasets import load

    corpus, queries = load(name)
    base = corpus_of(name)
    build_collection(f"eval-{base}", corpus, embeddings)
    embeddings.embed_array([q["query"] for q in queries])  # fill the cache in one batch
    agent = open_agent(f"eval-{base}", embeddings=embeddings)
    out = []
    try:
        searcher = agent.searcher
        for q in queries:
            vector = searcher.embedder.embed(q["query"])
            dense = searcher.dense_hits(vector, limit=MAX_FETCH)
            lexical = searcher.lexical_hits(q["query"], limit=MAX_FETCH)
            pids = searcher.index.retrieve(list({h.id for h in dense + lexical}))
            for h in dense + lexical:
                h.payload = {"source": pids[h.id]["source"]}
            out.append(
                QueryLists(
                    q["id"],
                    q["query"],
                    list(q["relevant"]),
                    dense,
                    lexical,
                    split_of(q["id"]),
                    searcher.coverage(q["query"]),
                )
            )
    finally:
        agent.close()
    return out


# A "method" maps the two candidate lists of one query (and the share of its BM25 terms
# found in the corpus) to a ranked list of passage ids.
Method = Callable[[Sequence[Hit], Sequence[Hit], float], list[str]]


def _pids(hits: Sequence[Any]) -> list[str]:
    return [h.payload.get("source", h.id) for h in hits]


def single(which: str, fetch_k: int) -> Method:
    if which == "dense":
        return lambda d, lx, c: _pids(d[:fetch_k])
    return lambda d, lx, c: _pids(lx[:fetch_k])


def fused(method: str, fetch_k: int, **params: Any) -> Method:
    fuser = make_fuser(method, **params)
    return lambda d, lx, c: _pids(fuser(d[:fetch_k], lx[:fetch_k], c))


def score(lists: Sequence[QueryLists], method: Method) -> dict[str, float]:
    nd, rc = [], []
    for q in lists:
        n, r = ndcg_recall(method(q.dense, q.lexical, q.coverage), q.relevant, K)
        nd.append(n)
        rc.append(r)
    return {"ndcg@10": round(float(np.mean(nd)), 4), "recall@10": round(float(np.mean(rc)), 4)}


def part(lists: Sequence[QueryLists], split: str) -> list[QueryLists]:
    return list(lists) if split == "all" else [q for q in lists if q.split == split]


@dataclass(frozen=True)
class Candidate:
    """One setting of one fusion family."""

    family: str
    method: str
    fetch_k: int
    params: tuple[tuple[str, Any], ...]

    def build(self) -> Method:
        return fused(self.method, self.fetch_k, **dict(self.params))

    def label(self) -> str:
        extra = ", ".join(f"{k}={v}" for k, v in self.params)
        return f"{self.method}(fetch_k={self.fetch_k}{', ' + extra if extra else ''})"


def candidates() -> list[Candidate]:
    out = [Candidate("rrf", "rrf", f, (("rrf_k", 60),)) for f in FETCH_KS]
    for family in ("weighted_rrf", "convex", "adaptive"):
        for f in FETCH_KS:
            for w in WEIGHTS:
                params: tuple[tuple[str, Any], ...] = (("dense_weight", float(w)),)
                if family == "weighted_rrf":
                    params = (("rrf_k", 60), *params)
                out.append(Candidate(family, family, f, params))
    return out


def objective(per_set: dict[str, dict[str, float]], best_single: dict[str, float]) -> tuple:
    """Worst hybrid / best-single ratio over the sets, then the mean nDCG."""
    ratios = [per_set[s]["ndcg@10"] / best_single[s] for s in per_set]
    return (round(min(ratios), 4), float(np.mean([v["ndcg@10"] for v in per_set.values()])))


def tune(
    data: dict[str, list[QueryLists]], on: dict[str, str], cands: list[Candidate]
) -> tuple[dict[str, Candidate], dict[str, list[dict[str, Any]]]]:
    """The best candidate of each family, scored on the ``on`` split of each set.

    Within a family, any setting whose worst ratio is within ``TIE`` of the best counts as
    a tie, and the smallest ``fetch_k`` among the ties wins (fewer candidates = less work
    per query), then the best objective. Also returns, per family and ``fetch_k``, its best
    weight and score (the landscape shown in the docs).
    """
    singles = {
        s: max(
            score(part(data[s], on[s]), single("dense", MAX_FETCH))["ndcg@10"],
            score(part(data[s], on[s]), single("bm25", MAX_FETCH))["ndcg@10"],
        )
        for s in on
    }
    scored: dict[str, list[tuple[tuple, Candidate, dict[str, float]]]] = {}
    for cand in cands:
        method = cand.build()
        per_set = {s: score(part(data[s], on[s]), method) for s in on}
        scored.setdefault(cand.family, []).append(
            (objective(per_set, singles), cand, {s: v["ndcg@10"] for s, v in per_set.items()})
        )
    chosen: dict[str, Candidate] = {}
    landscape: dict[str, list[dict[str, Any]]] = {}
    for family, rows in scored.items():
        top = max(key for key, _, _ in rows)
        ties = [r for r in rows if r[0][0] >= top[0] - TIE]
        chosen[family] = min(ties, key=lambda r: (r[1].fetch_k, tuple(-x for x in r[0])))[1]
        for fk in sorted({c.fetch_k for _, c, _ in rows}):
            key, cand, per = max((r for r in rows if r[1].fetch_k == fk), key=lambda r: r[0])
            landscape.setdefault(family, []).append(
                {
                    "fetch_k": fk,
                    "params": dict(cand.params),
                    "worst_ratio": key[0],
                    "mean_ndcg@10": round(key[1], 4),
                    "ndcg@10": per,
                }
            )
    return chosen, landscape


# Per-query work beyond the two searches: the adaptive fusion asks the engine which query
# terms occur in the corpus; the others need nothing more.
EXTRA_COST = {"rrf": 0, "weighted_rrf": 0, "convex": 0, "adaptive": 1}


def recommend(
    chosen: dict[str, Candidate], landscape: dict[str, list[dict[str, Any]]]
) -> Candidate:
    """The method to ship: the best dev worst-ratio, ties (within ``TIE``) to the cheaper."""
    ratio = {
        fam: max(row["worst_ratio"] for row in landscape[fam] if row["fetch_k"] == cand.fetch_k)
        for fam, cand in chosen.items()
    }
    top = max(ratio.values())
    ties = [fam for fam in chosen if ratio[fam] >= top - TIE]
    best = min(ties, key=lambda f: (EXTRA_COST.get(f, 1), chosen[f].fetch_k, -ratio[f]))
    return chosen[best]


def end_to_end(name: str, lists: Sequence[QueryLists], embeddings: CachedEmbeddings) -> dict:
    """``agent.search`` with the shipped defaults on the test half (no offline fusion)."""
    agent = open_agent(f"eval-{corpus_of(name)}", embeddings=embeddings)
    nd, rc = [], []
    try:
        for q in part(lists, "test"):
            hits = agent.search(q.query, top_k=K)
            n, r = ndcg_recall([h["source"] for h in hits], q.relevant, K)
            nd.append(n)
            rc.append(r)
        cfg = agent.settings
    finally:
        agent.close()
    return {
        "fusion": cfg.fusion,
        "fetch_k": cfg.fetch_k,
        "dense_weight": cfg.dense_weight,
        "rrf_k": cfg.rrf_k,
        "ndcg@10": round(float(np.mean(nd)), 4),
        "recall@10": round(float(np.mean(rc)), 4),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sets", default=",".join(SETS))
    args = parser.parse_args(argv)
    setup_logging()
    started = time.perf_counter()
    sets = [s.strip() for s in args.sets.split(",") if s.strip()]
    embeddings = CachedEmbeddings()
    data = {s: collect(s, embeddings) for s in sets}
    defaults = Settings.load(env={})
    cands = candidates()

    # 1. tuned on the dev halves of every set, reported on the test halves
    chosen, landscape = tune(data, {s: "dev" for s in sets}, cands)
    used = {
        "rrf": (("rrf_k", defaults.rrf_k),),
        "weighted_rrf": (("rrf_k", defaults.rrf_k), ("dense_weight", defaults.dense_weight)),
    }.get(defaults.fusion, (("dense_weight", defaults.dense_weight),))
    shipped = Candidate("default", defaults.fusion, defaults.fetch_k, used)
    rows: dict[str, dict[str, Any]] = {}
    for s in sets:
        rows[s] = {"queries": {sp: len(part(data[s], sp)) for sp in ("dev", "test", "all")}}
        for split in ("dev", "test", "all"):
            lists = part(data[s], split)
            res = {
                "bm25": score(lists, single("bm25", MAX_FETCH)),
                "dense": score(lists, single("dense", MAX_FETCH)),
                "rrf(k=60)": score(lists, fused("rrf", shipped.fetch_k, rrf_k=60)),
            }
            for fam, cand in chosen.items():
                res[f"{fam}*"] = score(lists, cand.build())
            res["default"] = score(lists, shipped.build())
            rows[s][split] = res
    tuned = {
        fam: {"setting": c.label(), "params": dict(c.params), "fetch_k": c.fetch_k}
        for fam, c in chosen.items()
    }

    # 2. tuned on one set alone, scored on every other set (all queries)
    cross: dict[str, dict[str, Any]] = {}
    if len(sets) > 1:
        for src in sets:
            picks, _ = tune(data, {src: "all"}, cands)
            cross[src] = {
                fam: {
                    "setting": c.label(),
                    "scores": {s: score(data[s], c.build())["ndcg@10"] for s in sets if s != src},
                }
                for fam, c in picks.items()
            }

    e2e = {s: end_to_end(s, data[s], embeddings) for s in sets}
    verdict = {}
    for s in sets:
        test = rows[s]["test"]
        best_single = max(test["bm25"]["ndcg@10"], test["dense"]["ndcg@10"])
        verdict[s] = {
            "best_single": best_single,
            "default": test["default"]["ndcg@10"],
            "ratio": round(test["default"]["ndcg@10"] / best_single, 4),
        }
    recommended = recommend(chosen, landscape)
    write_result(
        "quality",
        {
            "protocol": {
                "split": "sha1(query id) parity: dev / test halves of each set",
                "tuned_on": (
                    "dev halves of all sets; objective = worst hybrid/best-single ratio, "
                    f"ties within {TIE} go to the smaller fetch_k"
                ),
                "reported_on": "test halves",
                "k": K,
                "candidates_per_list_max": MAX_FETCH,
                "weights_grid": list(WEIGHTS),
                "fetch_k_grid": list(FETCH_KS),
            },
            "shipped_default": shipped.label(),
            "recommended_on_dev": recommended.label(),
            "shipped_is_recommended": recommended.label() == shipped.label(),
            "tuned": tuned,
            "dev_landscape": landscape,
            "sets": rows,
            "cross_set": cross,
            "end_to_end_default": e2e,
            "target_fusion_never_loses": verdict,
        },
        started,
    )
    for s in sets:
        print(f"\n{s} (test half, {rows[s]['queries']['test']} queries)")
        for m, v in rows[s]["test"].items():
            print(f"  {m:16s} nDCG@10 {v['ndcg@10']:.4f}  recall@10 {v['recall@10']:.4f}")
        print(f"  end-to-end default: {e2e[s]}")
    for fam, t in tuned.items():
        print(f"tuned {fam}: {t['setting']}")
    print(f"recommended on dev: {recommended.label()}; shipped: {shipped.label()}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

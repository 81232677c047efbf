"""The retrieval metrics ``retrievalagent eval`` reports, computed the way trec_eval does.

A run is, per query, the document ids best first; qrels are, per query, a grade per
document (grade > 0 = relevant). Definitions (those of trec_eval / pytrec_eval, which
``ir-measures`` runs, so the numbers can be checked with either):

* nDCG@k: ``sum(grade_i / log2(i + 1))`` over the first k ranks, divided by the same sum
  for the best possible order of the judged grades (linear gain, as trec_eval).
* Recall@k: relevant documents in the first k, divided by all relevant documents.
* MRR@k: ``1 / rank`` of the first relevant document within the first k, else 0.

A document id should appear once per ranking: :func:`first_occurrences` keeps each id at
its best rank (the BEIR convention for a document split into several passages).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence

__all__ = ["METRICS", "first_occurrences", "mean_scores", "mrr", "ndcg", "recall", "score_query"]

#: The metrics reported, in table order.
METRICS = ("ndcg@10", "recall@10", "recall@100", "mrr@10")


def first_occurrences(ids: Iterable[str]) -> list[str]:
    """``ids`` with every repeat removed: each id stays at its first (best) rank."""
    return list(dict.fromkeys(ids))


def ndcg(ranked: Sequence[str], qrels: Mapping[str, int], k: int) -> float:
    dcg = sum(
        qrels.get(doc, 0) / math.log2(rank + 1)
        for rank, doc in enumerate(ranked[:k], 1)
        if qrels.get(doc, 0) > 0
    )
    ideal = sorted((g for g in qrels.values() if g > 0), reverse=True)[:k]
    best = sum(g / math.log2(rank + 1) for rank, g in enumerate(ideal, 1))
    return dcg / best if best > 0 else 0.0


def recall(ranked: Sequence[str], qrels: Mapping[str, int], k: int) -> float:
    relevant = {doc for doc, g in qrels.items() if g > 0}
    if not relevant:
        return 0.0
    return len(relevant.intersection(ranked[:k])) / len(relevant)


def mrr(ranked: Sequence[str], qrels: Mapping[str, int], k: int) -> float:
    for rank, doc in enumerate(ranked[:k], 1):
        if qrels.get(doc, 0) > 0:
            return 1.0 / rank
    return 0.0


def score_query(ranked: Sequence[str], qrels: Mapping[str, int]) -> dict[str, float]:
    """Every metric of :data:`METRICS` for one query's ranking (ids already de-duplicated)."""
    return {
        "ndcg@10": ndcg(ranked, qrels, 10),
        "recall@10": recall(ranked, qrels, 10),
        "recall@100": recall(ranked, qrels, 100),
        "mrr@10": mrr(ranked, qrels, 10),
    }


def mean_scores(
    run: Mapping[str, Sequence[str]], qrels: Mapping[str, Mapping[str, int]]
) -> dict[str, float]:
    """The mean of each metric over the queries of ``qrels`` that have a relevant document.

    A query missing from ``run`` counts as an empty ranking (0 on every metric).
    """
    queries = [q for q, grades in qrels.items() if any(g > 0 for g in grades.values())]
    totals = dict.fromkeys(METRICS, 0.0)
    for q in queries:
        for name, value in score_query(run.get(q, []), qrels[q]).items():
            totals[name] += value
    return {name: (total / len(queries) if queries else 0.0) for name, total in totals.items()}

"""Retrieval quality on your own corpus: ``evaluate`` (and ``retrievalagent eval``).

Scores BM25 alone, dense alone, the current hybrid settings, the best fusion settings
found on a dev half of the queries (``tune=True``) and a reranker's lift, with nDCG@10,
Recall@10, Recall@100 and MRR@10, on a BEIR folder, on questions over an existing
collection, or on a test set derived from the documents' headings. See
``docs/evaluation.md``.
"""

from retrievalagent.eval._data import (
    TestSet,
    derive_from_chunks,
    derive_from_headings,
    load_beir,
    load_questions,
)
from retrievalagent.eval._evaluate import EvalReport, Setting, evaluate
from retrievalagent.eval._metrics import METRICS, mean_scores, mrr, ndcg, recall

__all__ = [
    "METRICS",
    "EvalReport",
    "Setting",
    "TestSet",
    "derive_from_chunks",
    "derive_from_headings",
    "evaluate",
    "load_beir",
    "load_questions",
    "mean_scores",
    "mrr",
    "ndcg",
    "recall",
]

"""Retrieval quality on your own corpus: ``evaluate`` (and ``retrievalagent eval``).

Scores BM25 alone, dense alone, the current hybrid settings, the best fusion settings
found on a dev half of the queries (``tune=True``) and a reranker's lift, with nDCG@10,
Recall@10, Recall@100 and MRR@10, on a BEIR folder, on questions over an existing
collection, or on a test set derived from the documents' headings. See
``docs/evaluation.md``. ``evaluate`` and the ``EvalReport`` it returns (its settings are
``Setting`` objects) are the documented API; the loaders and metric functions score test sets
and runs of your own.
"""

from retrievalagent.eval._data import TestSet, derive_from_headings, load_beir
from retrievalagent.eval._evaluate import EvalReport, Setting, evaluate
from retrievalagent.eval._metrics import mean_scores, mrr, ndcg, recall
from retrievalagent.eval._names import cli_names
from retrievalagent.eval._plot import plot_report

__all__ = [
    "EvalReport",
    "Setting",
    "TestSet",
    "cli_names",
    "derive_from_headings",
    "evaluate",
    "load_beir",
    "mean_scores",
    "mrr",
    "ndcg",
    "plot_report",
    "recall",
]

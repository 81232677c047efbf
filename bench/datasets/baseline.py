"""Sanity baseline: rank_bm25 (BM25Okapi) recall@10 and nDCG@10 on an evaluation set.

    python -m bench.datasets.baseline manpages pydocs aliases

Tokenizer: lower-case alphanumeric runs, no stemming, no stop words. Two variants are
reported: passage text only, and title + text.
"""

from __future__ import annotations

import math
import sys

import numpy as np


def _metrics(ranked: list[str], relevant: set[str], k: int = 10) -> tuple[float, float]:
    top = ranked[:k]
    hits = [1.0 if d in relevant else 0.0 for d in top]
    recall = sum(hits) / len(relevant)
    dcg = sum(h / math.log2(i + 2) for i, h in enumerate(hits))
    idcg = sum(1.0 / math.log2(i + 2) for i in range(min(len(relevant), k)))
    return recall, dcg / idcg


def evaluate(corpus: list[dict], queries: list[dict], with_title: bool = False) -> dict:
    from rank_bm25 import BM25Okapi

    from .passages import tokenize

    docs = [tokenize((p["title"] + "\n" if with_title else "") + p["text"]) for p in corpus]
    ids = [p["id"] for p in corpus]
    bm25 = BM25Okapi(docs)
    r_sum = n_sum = 0.0
    for q in queries:
        scores = bm25.get_scores(tokenize(q["query"]))
        top = np.argsort(-scores, kind="stable")[:10]
        r, n = _metrics([ids[i] for i in top], set(q["relevant"]))
        r_sum += r
        n_sum += n
    m = len(queries)
    return {"recall@10": round(r_sum / m, 4), "ndcg@10": round(n_sum / m, 4), "queries": m}


def report(name: str) -> dict:
    from . import load

    corpus, queries = load(name)
    out = {
        "text": evaluate(corpus, queries),
        "title+text": evaluate(corpus, queries, with_title=True),
    }
    if queries and "description" in queries[0]:  # manpages: without the function name
        desc = [dict(q, query=q["description"]) for q in queries]
        out["text, description only"] = evaluate(corpus, desc)
    if queries and "base_query" in queries[0]:  # aliases: the same queries before re-wording
        base = [dict(q, query=q["base_query"]) for q in queries]
        out["text, base queries"] = evaluate(corpus, base)
    print(f"{name}: BM25Okapi {out}")
    return out


if __name__ == "__main__":
    for arg in sys.argv[1:] or ["manpages", "pydocs", "aliases"]:
        report(arg)

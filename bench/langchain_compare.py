"""What users would pick instead: LangChain's ``EnsembleRetriever`` on the same sets.

    python -m bench.langchain_compare                   # quality + latency on every eval set
    python -m bench.langchain_compare --latency-queries 50

Built the way LangChain's documentation shows hybrid search: ``BM25Retriever.from_documents``
(langchain-community, rank_bm25 under it, its default whitespace tokenizer) and a vector
store retriever (``InMemoryVectorStore`` with the *same* packaged MiniLM embeddings)
combined by ``EnsembleRetriever(retrievers=[bm25, vector], weights=[0.5, 0.5])``
(weighted reciprocal rank fusion, c=60); each retriever returns ``k=10``.
Both systems index the same text per passage (title line + passage).

Quality: nDCG@10 / recall@10 on the test halves (the split of ``bench.quality``) and on
all queries. Latency: ``EnsembleRetriever.invoke`` against ``agent.search`` (top 10), each
query timed for both in alternating order, the query-vector cache of the agent cleared
before each call (LangChain has none).
"""

from __future__ import annotations

import argparse
import logging
import random
import time
import warnings
from typing import Any

import numpy as np

from bench._common import (
    CachedEmbeddings,
    build_collection,
    ndcg_recall,
    open_agent,
    setup_logging,
    summary,
    write_result,
)
from bench.quality import SETS, corpus_of, split_of

log = logging.getLogger("bench.langchain")
K = 10


def lc_text(passage: dict[str, Any]) -> str:
    title = " ".join(str(passage.get("title") or "").split())
    return f"{title}\n{passage['text']}" if title else passage["text"]


def build_ensemble(corpus: list[dict[str, Any]], embeddings: Any) -> tuple[Any, Any, Any]:
    from langchain_core.documents import Document
    from langchain_core.vectorstores import InMemoryVectorStore

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        from langchain_classic.retrievers import EnsembleRetriever
        from langchain_community.retrievers import BM25Retriever

    docs = [Document(page_content=lc_text(p), metadata={"pid": p["id"]}) for p in corpus]
    bm25 = BM25Retriever.from_documents(docs)
    bm25.k = K
    store = InMemoryVectorStore.from_documents(docs, embedding=embeddings)
    vector = store.as_retriever(search_kwargs={"k": K})
    ensemble = EnsembleRetriever(retrievers=[bm25, vector], weights=[0.5, 0.5])
    return ensemble, bm25, store


def evaluate(retriever: Any, queries: list[dict[str, Any]]) -> dict[str, dict[str, float]]:
    res: dict[str, list[tuple[float, float]]] = {"all": [], "test": []}
    for q in queries:
        docs = retriever.invoke(q["query"])
        m = ndcg_recall([d.metadata["pid"] for d in docs], q["relevant"], K)
        res["all"].append(m)
        if split_of(q["id"]) == "test":
            res["test"].append(m)
    return {
        split: {
            "ndcg@10": round(float(np.mean([m[0] for m in ms])), 4),
            "recall@10": round(float(np.mean([m[1] for m in ms])), 4),
        }
        for split, ms in res.items()
    }


def ours(agent: Any, queries: list[dict[str, Any]]) -> dict[str, dict[str, float]]:
    res: dict[str, list[tuple[float, float]]] = {"all": [], "test": []}
    for q in queries:
        hits = agent.search(q["query"], top_k=K)
        m = ndcg_recall([h["source"] for h in hits], q["relevant"], K)
        res["all"].append(m)
        if split_of(q["id"]) == "test":
            res["test"].append(m)
    return {
        split: {
            "ndcg@10": round(float(np.mean([m[0] for m in ms])), 4),
            "recall@10": round(float(np.mean([m[1] for m in ms])), 4),
        }
        for split, ms in res.items()
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sets", default=",".join(SETS))
    parser.add_argument("--latency-queries", type=int, default=100)
    args = parser.parse_args(argv)
    setup_logging()
    started = time.perf_counter()
    from bench.datasets import load
    from retrievalagent.embeddings import MiniLMEmbeddings

    cached = CachedEmbeddings()
    model = MiniLMEmbeddings().load()
    results: dict[str, Any] = {}
    for name in [s.strip() for s in args.sets.split(",") if s.strip()]:
        corpus, queries = load(name)
        base = corpus_of(name)
        build_collection(f"eval-{base}", corpus, cached)
        cached.embed_array([q["query"] for q in queries])
        t = time.perf_counter()
        ensemble, bm25, store = build_ensemble(corpus, cached)
        lc_build_s = time.perf_counter() - t

        # quality, with cached query vectors on both sides (identical to the model's)
        agent = open_agent(f"eval-{base}", embeddings=cached)
        try:
            quality = {
                "ours_default": ours(agent, queries),
                "langchain_ensemble": evaluate(ensemble, queries),
                "langchain_bm25_only": evaluate(bm25, queries),
                "langchain_vector_only": evaluate(
                    store.as_retriever(search_kwargs={"k": K}), queries
                ),
            }
        finally:
            agent.close()

        # latency, with the real model embedding every query on both sides
        store.embedding = model
        agent = open_agent(f"eval-{base}")
        agent.embeddings.load()
        rng = random.Random(11)
        sample = [q["query"] for q in rng.sample(queries, min(args.latency_queries, len(queries)))]
        times: dict[str, list[float]] = {"ours": [], "langchain": []}
        try:
            for q in sample[:5]:  # warm-up
                agent.search(q, top_k=K)
                ensemble.invoke(q)
            cache = agent.searcher.embedder._cache
            for i, q in enumerate(sample):
                for who in ("ours", "langchain") if i % 2 == 0 else ("langchain", "ours"):
                    cache.clear()
                    t = time.perf_counter()
                    if who == "ours":
                        agent.search(q, top_k=K)
                    else:
                        ensemble.invoke(q)
                    times[who].append((time.perf_counter() - t) * 1e3)
        finally:
            agent.close()
        results[name] = {
            "passages": len(corpus),
            "queries": len(queries),
            "quality": quality,
            "latency_ms": {who: summary(v) for who, v in times.items()},
            "langchain_build_s_cached_vectors": round(lc_build_s, 2),
        }
        log.info(
            "%s: ours %.4f vs ensemble %.4f nDCG@10 (test); p50 %.1f vs %.1f ms",
            name,
            quality["ours_default"]["test"]["ndcg@10"],
            quality["langchain_ensemble"]["test"]["ndcg@10"],
            results[name]["latency_ms"]["ours"]["p50"],
            results[name]["latency_ms"]["langchain"]["p50"],
        )
    write_result(
        "langchain_compare",
        {
            "setup": {
                "bm25": "langchain_community BM25Retriever.from_documents (default tokenizer), k=10",
                "vector": "langchain_core InMemoryVectorStore + packaged MiniLM, k=10",
                "ensemble": "langchain_classic EnsembleRetriever weights=[0.5, 0.5], c=60",
            },
            "sets": results,
        },
        started,
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

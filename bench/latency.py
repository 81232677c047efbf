"""Retrieval and graph latency against the engine's own query time, and peak RSS, by size.

    python -m bench.latency                       # 1k, 10k and 100k chunks
    python -m bench.latency --sizes 1k,10k        # skip the 100k index
    python -m bench.latency --queries 200 --rounds 3

Each size runs in a fresh process that opens the index with ``init_agent`` (the packaged
MiniLM model, the embedded Qdrant engine, and a zero-latency fake chat model), so its peak
RSS is that of an agent serving that index. For every query, in random order, the worker
times:

- ``embed``: the raw embedder's ``embed_query`` (no cache);
- ``engine_dense`` / ``engine_sparse``: the engine's own ``EdgeShard.query`` for the same
  dense / BM25 vector (``fetch_k`` hits, no payload), prepared outside the timer;
- ``search``: ``HybridSearcher.search`` (embed + both searches + fusion), query cache cleared;
- ``invoke``: ``agent.invoke`` with the fake model (the whole graph), query cache cleared;
- ``graph_floor``: LangGraph alone -- a graph with the agent's state schema and as many
  steps as the agent runs per turn, whose nodes do nothing. No graph of that many steps
  can add less than this to retrieval, so ``(search + graph_floor) / search`` bounds the
  thin-graph ratio from below.

Indexes are built once from cached passage vectors (see ``bench/_common.py``); building
the 100k index the first time embeds 100k passages (about an hour on 2 cores).
"""

from __future__ import annotations

import argparse
import json
import logging
import random
import subprocess
import sys
import time
from typing import Any

from bench import _scale
from bench._common import (
    REPO,
    current_rss_mb,
    median,
    peak_rss_mb,
    setup_logging,
    summary,
    write_result,
)

log = logging.getLogger("bench.latency")

STEPS = ("embed", "engine_dense", "engine_sparse", "search", "invoke", "graph_floor")


def graph_floor(steps: int) -> Any:
    """A compiled graph of ``steps`` no-op nodes in a line, over the agent's state schema."""
    from langgraph.graph import END, START, StateGraph

    from retrievalagent.graph._builder import _node
    from retrievalagent.graph._state import AgentState

    def noop(name: str) -> Any:
        return lambda state, config: {"trace": [{"node": name}]}

    graph = StateGraph(AgentState)
    names = [f"step{i}" for i in range(steps)]
    for name in names:
        graph.add_node(name, _node(noop(name), None, name))
    for a, b in zip([START, *names], [*names, END], strict=True):
        graph.add_edge(a, b)
    return graph.compile()


def worker(size: str, n_queries: int, rounds: int, seed: int = 7) -> dict[str, Any]:
    """Measure one size in this process (run by the parent in a fresh interpreter)."""
    import qdrant_edge as qe

    from bench._common import open_agent
    from retrievalagent.index._base import DENSE, SPARSE
    from tests.support.chat import ScriptedChatModel

    started = time.perf_counter()
    agent = open_agent(_scale.collection(size), model=ScriptedChatModel())
    searcher = agent.searcher
    agent.embeddings.load()
    open_s = time.perf_counter() - started
    shard = agent.index.shard
    fetch_k, top_k = searcher.fetch_k, agent.settings.top_k
    queries = _scale.queries(n_queries)
    rss_loaded = current_rss_mb()

    requests: dict[str, tuple[Any, Any]] = {}
    for q in queries:
        vec = agent.embeddings.embed_query(q)
        sp = searcher.encoder.encode_query(q)
        requests[q] = (
            qe.QueryRequest(
                limit=fetch_k, query=qe.Query.Nearest(vec, using=DENSE), with_payload=False
            ),
            qe.QueryRequest(
                limit=fetch_k,
                query=qe.Query.Nearest(qe.SparseVector(sp.indices, sp.values), using=SPARSE),
                with_payload=False,
            ),
        )

    samples: dict[str, list[float]] = {s: [] for s in STEPS}
    parts: dict[str, list[float]] = {
        "dense_ms": [],
        "lexical_ms": [],
        "fuse_ms": [],
        "embed_ms": [],
    }
    no_embed: list[float] = []
    per_query_ratio: list[float] = []
    cache = searcher.embedder._cache

    def run(step: str, q: str) -> float:
        if step == "embed":
            t = time.perf_counter()
            agent.embeddings.embed_query(q)
            return (time.perf_counter() - t) * 1e3
        if step in ("engine_dense", "engine_sparse"):
            req = requests[q][0 if step == "engine_dense" else 1]
            t = time.perf_counter()
            shard.query(req)
            return (time.perf_counter() - t) * 1e3
        cache.clear()
        if step == "search":
            t = time.perf_counter()
            _, timings = searcher.search(q, top_k)
            ms = (time.perf_counter() - t) * 1e3
            for key in parts:
                parts[key].append(timings[key])
            no_embed.append(ms - timings["embed_ms"])
            return ms
        if step == "graph_floor":
            t = time.perf_counter()
            floor.invoke({"question": q})
            return (time.perf_counter() - t) * 1e3
        t = time.perf_counter()
        agent.invoke(q)
        return (time.perf_counter() - t) * 1e3

    # as many steps as a plain turn runs (prepare ... write_memory, no rewrite)
    turn_steps = len(agent.invoke(queries[0])["trace"])
    floor = graph_floor(turn_steps)

    rng = random.Random(seed)
    for q in queries[:10]:  # warm-up: model, engine caches, graph compilation paths
        for step in STEPS:
            run(step, q)
    for _ in range(rounds):
        order = list(queries)
        rng.shuffle(order)
        for q in order:
            steps = list(STEPS)
            rng.shuffle(steps)
            got = {step: run(step, q) for step in steps}
            for step, ms in got.items():
                samples[step].append(ms)
            per_query_ratio.append(
                got["search"] / (got["embed"] + got["engine_dense"] + got["engine_sparse"])
            )
    info = agent.index.shard.info()
    out = {
        "size": size,
        "chunks": agent.count(),
        "fetch_k": fetch_k,
        "top_k": top_k,
        "queries": len(queries),
        "rounds": rounds,
        "turn_steps": turn_steps,
        "open_seconds": round(open_s, 3),
        "segments": getattr(info, "segments_count", None),
        "ms": {step: summary(v) for step, v in samples.items()},
        "search_parts_ms": {k: summary(v) for k, v in parts.items()},
        "search_excluding_embed_ms": summary(no_embed),
        "search_over_engine_per_query_median": round(median(per_query_ratio), 3),
        "rss_mb": {"after_open": rss_loaded, "peak": peak_rss_mb()},
    }
    agent.close()
    return out


def _spawn(size: str, n_queries: int, rounds: int) -> dict[str, Any]:
    cmd = [
        sys.executable,
        "-m",
        "bench.latency",
        "--worker",
        size,
        "--queries",
        str(n_queries),
        "--rounds",
        str(rounds),
    ]
    proc = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        sys.stderr.write(proc.stderr)
        raise SystemExit(f"latency worker for {size} failed ({proc.returncode})")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def verdicts(results: dict[str, dict[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if "10k" in results:
        r = results["10k"]["ms"]
        engine = r["embed"]["p50"] + r["engine_dense"]["p50"] + r["engine_sparse"]["p50"]
        out["retrieval_near_engine_10k"] = {
            "search_p50_ms": r["search"]["p50"],
            "embed_plus_engine_p50_ms": round(engine, 3),
            "ratio": round(r["search"]["p50"] / engine, 3),
            "target": 1.5,
            "pass": r["search"]["p50"] <= 1.5 * engine,
        }
        out["thin_graph_10k"] = {
            "invoke_p50_ms": r["invoke"]["p50"],
            "search_p50_ms": r["search"]["p50"],
            "ratio": round(r["invoke"]["p50"] / r["search"]["p50"], 3),
            "target": 1.5,
            "pass": r["invoke"]["p50"] <= 1.5 * r["search"]["p50"],
        }
        if "graph_floor" in r:
            floor = r["graph_floor"]["p50"]
            out["thin_graph_10k"]["langgraph_floor_ms"] = floor
            out["thin_graph_10k"]["floor_ratio"] = round(
                (r["search"]["p50"] + floor) / r["search"]["p50"], 3
            )
    if "100k" in results:
        p95 = results["100k"]["search_excluding_embed_ms"]["p95"]
        out["p95_excluding_embedding_100k"] = {
            "p95_ms": p95,
            "target_ms": 50,
            "pass": p95 <= 50,
        }
        peak = results["100k"]["rss_mb"]["peak"]
        out["peak_rss_100k"] = {"peak_mb": peak, "target_mb": 1536, "pass": peak <= 1536}
    if "10k" in results:
        out["peak_rss_10k"] = {"peak_mb": results["10k"]["rss_mb"]["peak"]}
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", default="1k,10k,100k")
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:
        print(json.dumps(worker(args.worker, args.queries, args.rounds)))
        return 0
    setup_logging()
    started = time.perf_counter()
    sizes = _scale.parse_sizes(args.sizes)
    builds = {size: _scale.ensure(size) for size in sizes}
    results: dict[str, dict[str, Any]] = {}
    for size in sizes:
        t = time.perf_counter()
        results[size] = _spawn(size, args.queries, args.rounds)
        results[size]["build"] = builds[size]
        results[size]["run_seconds"] = round(time.perf_counter() - t, 1)
        r = results[size]["ms"]
        log.info(
            "%s: search p50 %.2f ms (embed %.2f + dense %.2f + sparse %.2f), invoke p50 %.2f ms, "
            "peak RSS %.0f MB",
            size,
            r["search"]["p50"],
            r["embed"]["p50"],
            r["engine_dense"]["p50"],
            r["engine_sparse"]["p50"],
            r["invoke"]["p50"],
            results[size]["rss_mb"]["peak"],
        )
    write_result(
        "latency",
        {"sizes": results, "targets": verdicts(results)},
        started,
    )
    print(json.dumps(verdicts(results), indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

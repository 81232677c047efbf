"""What persistence costs: latency a checkpointer adds to a turn, and the client-side memory
scan of a store without a vector index.

    python bench/persistence/bench_checkpointers.py                 # defaults below
    python bench/persistence/bench_checkpointers.py --turns 200 --memories 1000
    RAG_TEST_POSTGRES_URL=postgresql://... python bench/persistence/bench_checkpointers.py

Part 1 — checkpointers. One offline agent per checkpointer (bundled sample docs, the
packaged embedder, a throwaway embedded index each), all answering the same questions.
Turns are interleaved: every round runs one turn on each agent, in a shuffled order, so
machine noise hits every variant alike. A thread gets 5 turns, then a new thread starts
(histories stay realistic). The first rounds are warm-up and dropped. Reported per variant:
p50/p95 of ``invoke`` and the *added* p50: the median of the per-round difference to
MemorySaver (paired), plus checkpoints written per turn. ``postgres-exit`` runs the same
graph with LangGraph's ``durability="exit"`` (one checkpoint per turn) for comparison.

Part 2 — store scan. 1,000 memories of one user in a PostgresStore without pgvector (and in
an InMemoryStore for reference); ``StoreBackend.search`` with the agent's default scan
limit (500) and with 1,000, timing the fetch and the scoring apart.

Results: ``bench/results/persistence.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import shutil
import statistics
import sys
import time
import uuid
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))
os.environ.setdefault("MEM0_TELEMETRY", "False")

RESULT = REPO / "bench" / "results" / "persistence.json"
TURNS_PER_THREAD = 5


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    if not ordered:
        return float("nan")
    k = (len(ordered) - 1) * q
    lo, hi = int(k), min(int(k) + 1, len(ordered) - 1)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (k - lo)


def stats(ms: list[float]) -> dict[str, float]:
    return {
        "n": len(ms),
        "p50_ms": round(pct(ms, 0.5), 3),
        "p95_ms": round(pct(ms, 0.95), 3),
        "mean_ms": round(statistics.fmean(ms), 3) if ms else float("nan"),
    }


def machine() -> dict[str, Any]:
    from importlib import metadata

    def version(name: str) -> str | None:
        try:
            return metadata.version(name)
        except metadata.PackageNotFoundError:
            return None

    return {
        "python": platform.python_version(),
        "os": f"{platform.system()} {platform.release()}",
        "cores": os.cpu_count(),
        "load_avg_at_start": list(os.getloadavg()),
        "packages": {
            p: version(p)
            for p in (
                "langgraph",
                "langgraph-checkpoint",
                "langgraph-checkpoint-postgres",
                "langgraph-checkpoint-sqlite",
                "psycopg",
                "psycopg-pool",
            )
        },
    }


def schema_url(url: str, schema: str) -> str:
    from urllib.parse import quote

    sep = "&" if "?" in url else "?"
    return f"{url}{sep}options={quote(f'-csearch_path={schema}')}"


class Schema:
    """A fresh schema in the benchmark database, dropped on exit."""

    def __init__(self, url: str) -> None:
        import psycopg

        self.base = url
        self.name = f"ra_bench_{uuid.uuid4().hex[:10]}"
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute(f'CREATE SCHEMA "{self.name}"')
        self.url = schema_url(url, self.name)
        server = psycopg.connect(url, autocommit=True)
        self.server_version = server.info.server_version
        server.close()

    def drop(self) -> None:
        import psycopg

        with psycopg.connect(self.base, autocommit=True) as conn:
            conn.execute(f'DROP SCHEMA IF EXISTS "{self.name}" CASCADE')


# -- part 1: checkpointers ------------------------------------------------------------------------
def bench_checkpointers(url: str, turns: int, warmup: int, seed: int) -> dict[str, Any]:
    from langgraph.checkpoint.memory import MemorySaver
    from langgraph.checkpoint.postgres import PostgresSaver
    from langgraph.checkpoint.sqlite import SqliteSaver

    from retrievalagent import init_agent, sample_docs_path
    from retrievalagent.embeddings import MiniLMEmbeddings
    from retrievalagent.persistence import postgres_checkpointer

    questions = [
        q["question"] for q in json.loads((Path(sample_docs_path()) / "questions.json").read_text())
    ]
    embeddings = MiniLMEmbeddings().load()
    schema = Schema(url)
    tmp = Path(os.environ.get("TMPDIR", "/tmp")) / f"ra-bench-{uuid.uuid4().hex[:8]}"
    tmp.mkdir(parents=True)
    opened: list[Any] = []
    agents: dict[str, Any] = {}
    try:
        single = PostgresSaver.from_conn_string(schema.url)  # one connection (the docs' way)
        single.setup()
        opened.append(single)
        pooled = postgres_checkpointer(schema.url)
        opened.append(pooled.conn)  # the pool
        sqlite = SqliteSaver.from_conn_string(str(tmp / "checkpoints.db"))
        opened.append(sqlite)
        savers = {
            "memory": MemorySaver(),
            "sqlite": sqlite,
            "postgres": single,
            "postgres-pool": pooled,
            "postgres-exit": pooled,
        }
        for name, saver in savers.items():
            rag = init_agent(
                f"bench-{name}",
                backend_url=":memory:",
                embeddings=embeddings,
                checkpointer=saver,
                data_dir=tmp / "data",
            )
            rag.add_documents(sample_docs_path(), progress=False)
            agents[name] = rag

        rng = random.Random(seed)
        samples: dict[str, list[float]] = {name: [] for name in agents}
        paired: dict[str, list[float]] = {name: [] for name in agents if name != "memory"}
        thread = {name: uuid.uuid4().hex for name in agents}
        for turn in range(warmup + turns):
            if turn % TURNS_PER_THREAD == 0:
                thread = {name: uuid.uuid4().hex for name in agents}
            question = questions[turn % len(questions)]
            order = list(agents)
            rng.shuffle(order)
            took: dict[str, float] = {}
            for name in order:
                rag = agents[name]
                config = {"configurable": {"thread_id": thread[name], "user_id": "bench"}}
                start = time.perf_counter()
                if name == "postgres-exit":
                    rag.graph.invoke(*rag.graph_args(question, config), durability="exit")
                else:
                    rag.invoke(question, config)
                took[name] = (time.perf_counter() - start) * 1e3
            if turn >= warmup:
                for name, ms in took.items():
                    samples[name].append(ms)
                for name in paired:
                    paired[name].append(took[name] - took["memory"])

        per_turn: dict[str, float] = {}
        turns_in_last_thread = (warmup + turns - 1) % TURNS_PER_THREAD + 1
        for name, rag in agents.items():
            config = {"configurable": {"thread_id": thread[name]}}
            written = sum(1 for _ in rag.checkpointer.list(config))
            per_turn[name] = round(written / turns_in_last_thread, 1)
        return {
            "questions": len(questions),
            "turns_measured": turns,
            "warmup_turns": warmup,
            "turns_per_thread": TURNS_PER_THREAD,
            "postgres_server_version": schema.server_version,
            "invoke": {name: stats(ms) for name, ms in samples.items()},
            "added_p50_ms_vs_memory": {
                name: round(pct(diffs, 0.5), 3) for name, diffs in paired.items()
            },
            "checkpoints_per_turn": per_turn,
        }
    finally:
        for rag in agents.values():
            rag.close()
        for conn in opened:
            conn.close()
        schema.drop()
        shutil.rmtree(tmp, ignore_errors=True)


# -- part 2: the client-side store scan ------------------------------------------------------------
def bench_store_scan(url: str, memories: int, repeats: int) -> dict[str, Any]:
    from langgraph.store.memory import InMemoryStore
    from langgraph.store.postgres import PostgresStore

    from retrievalagent.embeddings import MiniLMEmbeddings
    from retrievalagent.memory import StoreBackend
    from retrievalagent.retrieval import QueryEmbedder

    base = MiniLMEmbeddings().load()
    embedder = QueryEmbedder(base)
    name = f"{base.model_name}:{base.dimension}"
    facts = [
        f'"term {i}" is called "alias {i % 97}-{i}" in these documents (note {i})'
        for i in range(memories)
    ]
    vectors = base.embed_documents(facts)
    schema = Schema(url)
    out: dict[str, Any] = {"memories_per_user": memories, "repeats": repeats}
    try:
        with PostgresStore.from_conn_string(schema.url) as pg:
            pg.setup()
            stores = {"postgres": pg, "in_memory": InMemoryStore()}
            for label, store in stores.items():
                for i, (fact, vec) in enumerate(zip(facts, vectors, strict=True)):
                    store.put(
                        ("memories", "bench-user"),
                        f"m{i}",
                        {"text": fact, "embedding": vec, "embedding_model": name},
                        index=False,
                    )
                for scan_limit in (500, memories):
                    backend = StoreBackend(store, embedder, name, scan_limit)
                    query = "what is alias 42 called?"
                    backend.search(query, "bench-user", 5)  # warm: query vector cached
                    total, fetch = [], []
                    for _ in range(repeats):
                        t0 = time.perf_counter()
                        _, scanned = backend.search(query, "bench-user", 5)
                        total.append((time.perf_counter() - t0) * 1e3)
                        t1 = time.perf_counter()
                        store.search(("memories", "bench-user"), limit=backend._fetch_limit())
                        fetch.append((time.perf_counter() - t1) * 1e3)
                    out[f"{label}_scan{scan_limit}"] = {
                        "scanned": scanned,
                        "search": stats(total),
                        "fetch_only": stats(fetch),
                        "scoring_p50_ms": round(pct(total, 0.5) - pct(fetch, 0.5), 3),
                    }
        return out
    finally:
        schema.drop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--url",
        default=os.environ.get(
            "RAG_TEST_POSTGRES_URL", "postgresql://postgres@127.0.0.1:5432/test"
        ),
    )
    parser.add_argument("--turns", type=int, default=150, help="measured turns per variant")
    parser.add_argument("--warmup", type=int, default=20)
    parser.add_argument("--memories", type=int, default=1000)
    parser.add_argument("--repeats", type=int, default=30)
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args()
    started = time.perf_counter()
    record: dict[str, Any] = {
        "benchmark": "persistence",
        "created": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "command": "python bench/persistence/bench_checkpointers.py " + " ".join(sys.argv[1:]),
        "machine": machine(),
        "mode": "offline (no LLM): extractive answers, evidence grades",
        "checkpointers": bench_checkpointers(args.url, args.turns, args.warmup, args.seed),
        "store_scan": bench_store_scan(args.url, args.memories, args.repeats),
    }
    record["run_seconds"] = round(time.perf_counter() - started, 1)
    RESULT.parent.mkdir(parents=True, exist_ok=True)
    RESULT.write_text(json.dumps(record, indent=2) + "\n")
    print(json.dumps({k: record[k] for k in ("checkpointers", "store_scan")}, indent=2))


if __name__ == "__main__":
    main()

"""What does recalling long-term memory add to a turn?  ``python -m bench.memory.recall_latency``

Per backend -- ``store`` (LangGraph ``InMemoryStore``), ``postgres`` (``PostgresStore`` at
``RAG_TEST_POSTGRES_URL``, in a schema of its own that is dropped afterwards) and ``mem0``
(``memory=True``: the embedded mem0 with its local Qdrant) -- an agent over the man-pages
index (``memory-aliases``, 5,235 passages, packaged MiniLM) gets ``--memories`` (1,000)
memories for each of two users, written through the backend's own ``add``: search facts
keyed by their alias (each embedded as the question that taught it) and ten preferences.

Then ``--questions`` new questions (longer phrasings of man page queries; about a third
contain an alias the user has a fact for, so key lookups hit) are asked by the first user:

* ``read_memory_ms``: the ``read_memory`` node's own time from the trace (the recall: key
  lookups, similarity search, preferences), on turns stopped after ``fuse``. It includes
  embedding the question, which the node shares with the dense search running beside it
  (whichever asks first computes it, the other waits for the same vector).
* ``turn_to_fuse_ms``: wall time of the turn up to ``fuse`` with this backend, and
  ``without_memory`` the same questions on an identical agent with no memory (alternating
  with the memory agent, question by question, so machine load hits both alike);
  ``added_p50_ms`` is the median of the paired differences. ``read_memory`` runs beside
  the dense search, so a turn pays only what recall takes beyond it.
* ``direct_recall_ms``: ``backend.recall(RecallRequest)`` called directly with the
  question's vector already cached (what the dense search leaves behind in a turn).

Results: ``bench/results/memory_recall_latency.json``. ``--limit N``: N memories and N
questions (a smoke test).
"""

from __future__ import annotations

import argparse
import logging
import os
import random
import statistics
import sys
import time
import uuid
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

os.environ.setdefault("MEM0_TELEMETRY", "False")

from langgraph.store.memory import InMemoryStore

from bench._common import (
    CachedEmbeddings,
    build_collection,
    open_agent,
    setup_logging,
    summary,
    write_result,
)
from retrievalagent.embeddings import MiniLMEmbeddings
from retrievalagent.memory import MemoryRecord, RecallRequest
from retrievalagent.memory._keys import alias_key, question_keys

__all__ = ["main"]

SEED = 20261125
COLLECTION = "memory-aliases"
BACKENDS = ("store", "postgres", "mem0")
USERS = ("latency-user", "latency-other")
PREFERENCES = 10


# --------------------------------------------------------------------------- data
def workload(n_memories: int, n_questions: int) -> tuple[list[dict[str, Any]], list[str]]:
    """Memories (per user) and the questions asked, from the alias set's text."""
    from bench.datasets import load, load_controls

    _, base = load("manpages")
    _, alias_queries = load("aliases")
    controls = load_controls("aliases")
    rng = random.Random(SEED)
    real = sorted({(q["alias"], q["canonical"]) for q in alias_queries})
    taught = [q["query"] for q in base]
    memories: list[dict[str, Any]] = []
    for i in range(n_memories - PREFERENCES):
        if i < len(real):
            alias, canonical = real[i]
        else:  # made-up words: each one a distinct key, none in any question
            alias, canonical = f"zq{i:04d}word", rng.choice(("remove", "directory", "socket"))
        memories.append(
            {
                "kind": "search_fact",
                "alias": alias,
                "fact": f'"{alias}" is called "{canonical}" in these documents',
                "question": f"{taught[i % len(taught)]} ({alias})",
            }
        )
    for i in range(PREFERENCES):
        memories.append(
            {"kind": "preference", "alias": f"subject{i}", "fact": f"Preference number {i}."}
        )
    asks = [p for q in alias_queries for p in q["phrasings"]]
    others = [p for c in controls for p in c["phrasings"]]
    rng.shuffle(asks)
    rng.shuffle(others)
    n_alias = n_questions // 3
    questions = asks[:n_alias] + others[: n_questions - n_alias]
    rng.shuffle(questions)
    return memories, questions


def seed(agent: Any, memories: list[dict[str, Any]]) -> float:
    """Write every memory for both users through the backend; returns seconds taken."""
    backend = agent.memory
    encoder = agent.searcher.encoder
    started = time.perf_counter()
    for user in USERS:
        for m in memories:
            if m["kind"] == "preference":
                record = MemoryRecord(
                    fact=m["fact"],
                    question="",
                    answer="",
                    user_id=user,
                    kind="preference",
                    key=m["alias"],
                )
            else:
                record = MemoryRecord(
                    fact=m["fact"],
                    question=m["question"],
                    answer="",
                    user_id=user,
                    metadata={"collection": COLLECTION},
                    kind="search_fact",
                    key=alias_key(encoder, m["alias"]),
                    alias=m["alias"],
                )
            backend.add(record)
    return time.perf_counter() - started


# --------------------------------------------------------------------------- backends
@contextmanager
def postgres_schema_url(prefix: str = "membench") -> Iterator[str]:
    """A connection string to ``RAG_TEST_POSTGRES_URL`` whose search path is a schema of
    its own, dropped afterwards."""
    import psycopg

    url = os.environ.get("RAG_TEST_POSTGRES_URL", "postgresql://postgres@127.0.0.1:5432/test")
    schema = f"{prefix}_{uuid.uuid4().hex[:10]}"
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(f'CREATE SCHEMA "{schema}"')
    sep = "&" if "?" in url else "?"
    try:
        yield f"{url}{sep}options=-csearch_path%3D{schema}"
    finally:
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


@contextmanager
def postgres_store() -> Iterator[Any]:
    from langgraph.store.postgres import PostgresStore

    with postgres_schema_url() as url, PostgresStore.from_conn_string(url) as store:
        store.setup()
        yield store


@contextmanager
def memory_agent(backend: str, embeddings: Any) -> Iterator[Any]:
    if backend == "store":
        agent = open_agent(COLLECTION, embeddings=embeddings, memory_store=InMemoryStore())
        try:
            yield agent
        finally:
            agent.close()
    elif backend == "postgres":
        with postgres_store() as store:
            agent = open_agent(COLLECTION, embeddings=embeddings, memory_store=store)
            try:
                yield agent
            finally:
                agent.close()
    else:
        agent = open_agent(COLLECTION, embeddings=embeddings, memory=True)
        try:
            for user in USERS:  # a fresh start, whatever an earlier run left
                agent.forget(user)
            yield agent
        finally:
            for user in USERS:
                agent.forget(user)
            agent.close()


# --------------------------------------------------------------------------- timing
def to_fuse(
    agent: Any, question: str, user: str, config: dict[str, Any] | None = None
) -> tuple[float, dict[str, Any]]:
    """Seconds from the call to ``fuse`` and the ``read_memory`` event (``config``: the
    run's config, ``{"configurable": {"user_id": user}}`` by default)."""
    event: dict[str, Any] = {}
    started = time.perf_counter()
    stream = agent.stream(question, config=config or {"configurable": {"user_id": user}})
    try:
        for item in stream:
            if item["type"] != "node":
                continue
            for trace in item["update"].get("trace") or []:
                if trace.get("node") == "read_memory":
                    event = trace
            if item["node"] == "fuse":
                return time.perf_counter() - started, event
    finally:
        stream.close()
    raise RuntimeError("the graph ended before fuse")


def measure(backend: str, embeddings: Any, args: argparse.Namespace) -> dict[str, Any]:
    memories, questions = workload(args.memories, args.questions)
    plain = open_agent(COLLECTION, embeddings=embeddings)
    with memory_agent(backend, embeddings) as agent:
        seconds = seed(agent, memories)
        listed = len(agent.list_memories(USERS[0]))
        for q in questions[: args.warmup]:  # warm caches, connections, model sessions
            to_fuse(agent, q + " (warm-up)", USERS[0])
            to_fuse(plain, q + " (warm-up)", USERS[0])
        read_ms, with_ms, without_ms, paired, kept, scanned = [], [], [], [], [], []
        for n, question in enumerate(questions):
            # new text each time: every turn embeds its question, as a real one does
            order = (agent, plain) if n % 2 == 0 else (plain, agent)
            timings = {}
            for a in order:
                took, event = to_fuse(a, question, USERS[0])
                timings[a is agent] = took * 1e3
                if a is agent:
                    read_ms.append(float(event.get("ms", 0.0)))
                    kept.append(int(event.get("n_facts", 0)))
                    scanned.append(int(event.get("n_scanned", 0)))
            with_ms.append(timings[True])
            without_ms.append(timings[False])
            paired.append(timings[True] - timings[False])
        encoder = agent.searcher.encoder
        direct = []
        for question in questions:
            text = question + " (direct)"
            # the vector cached, as a turn's dense search leaves it for the recall
            agent.searcher.embedder.embed(text)
            request = RecallRequest(
                query=text,
                user_id=USERS[0],
                limit=agent.settings.memory_top_k,
                keys=question_keys(encoder, text),
                max_preferences=agent.settings.memory_max_preferences,
            )
            started = time.perf_counter()
            agent.memory.recall(request)
            direct.append((time.perf_counter() - started) * 1e3)
    plain.close()
    return {
        "memories_per_user": len(memories),
        "users": len(USERS),
        "listed_for_user": listed,
        "seed_seconds": round(seconds, 1),
        "questions": len(questions),
        "read_memory_ms": summary(read_ms),
        "turn_to_fuse_ms": {"with_memory": summary(with_ms), "without_memory": summary(without_ms)},
        "added_p50_ms": round(statistics.median(paired), 2),
        "added_ms_paired": summary(paired),
        "direct_recall_ms": summary(direct),
        "facts_kept_per_turn_mean": round(statistics.fmean(kept), 2) if kept else None,
        "turns_with_a_fact": sum(k > 0 for k in kept),
        "scanned_per_turn_median": statistics.median(scanned) if scanned else None,
    }


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--backends", nargs="+", default=list(BACKENDS), choices=list(BACKENDS))
    parser.add_argument("--memories", type=int, default=1000)
    parser.add_argument("--questions", type=int, default=150)
    parser.add_argument("--warmup", type=int, default=10)
    parser.add_argument("--limit", type=int, default=0, help="N memories and questions (smoke)")
    args = parser.parse_args(argv)
    if args.limit:
        args.memories = max(args.limit, PREFERENCES + 1)
        args.questions = args.limit
        args.warmup = min(args.warmup, 2)
    setup_logging()
    logging.getLogger("mem0").setLevel(logging.WARNING)  # a line per seeded memory else
    started = time.perf_counter()
    from bench.datasets import load

    corpus, _ = load("aliases")
    build = build_collection(COLLECTION, corpus, CachedEmbeddings())
    embeddings = MiniLMEmbeddings().load()
    backends = {name: measure(name, embeddings, args) for name in args.backends}
    payload = {
        "command": "python -m bench.memory.recall_latency " + " ".join(argv or sys.argv[1:]),
        "corpus": f"bench.datasets aliases: Linux man-pages ({build['passages']} passages)",
        "protocol": "see bench/memory/recall_latency.py docstring",
        "backends": backends,
        "summary": {
            name: {
                "read_memory_p50_ms": r["read_memory_ms"].get("p50"),
                "read_memory_p95_ms": r["read_memory_ms"].get("p95"),
                "added_per_turn_p50_ms": r["added_p50_ms"],
                "direct_recall_p50_ms": r["direct_recall_ms"].get("p50"),
            }
            for name, r in backends.items()
        },
    }
    write_result("memory_recall_latency", payload, started)
    return payload


if __name__ == "__main__":
    for name, row in main()["summary"].items():
        print(name, row)

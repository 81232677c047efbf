"""One user, 10,000 conversation memories: recall latency and ``remember`` throughput.
``python -m bench.memory.conversation_scale``

Issue 21's scale targets. One user gets ``--memories`` (10,000) conversation memories:
conversations of about ten messages made by recombining the sentences of the
conversation set (``bench/memory/data/conversations.json``): each message takes one to
three sentences said by the same kind of speaker (the user, another named person, the
assistant) somewhere in the set, so the words, lengths and mix of speakers are the set's
while every text is new. Conversations are dated over the two years before ``NOW``, and
every recall is asked at ``NOW``. Queries are the set's questions and the questions its
users asked in their messages (about 390 distinct texts).

Per store backend (``memory``: LangGraph ``InMemoryStore``; ``postgres``: ``PostgresStore``
at ``RAG_TEST_POSTGRES_URL`` in a schema of its own, dropped afterwards) the memories are
written by a *writer* agent through ``remember``. Then, ``--rounds`` times, a fresh
*reader* agent (a second process, as far as memory goes: its own ``StoreBackend`` over the
same store; with PostgreSQL its own connection):

* ``cold_ms``: its first ``recall`` of the user, which loads the 10,000 memories (the
  model, imports and the connection were warmed on another user first);
* ``warm``: ``--queries`` distinct queries, each asked once to ``rag.recall(q, k=10)``
  (``recall_ms``) and once to a graph agent (the ``read_memory`` node's own time, on a
  turn stopped after ``fuse``; ``read_memory_ms``), and embedded once by the packaged
  MiniLM's ``embed_query`` (``embed_ms``), in rotating order. No query is asked twice of
  one agent, so every recall embeds its query;
* ``after_write_ms``: the writer remembers one more conversation, then the reader recalls
  (the incremental path: a stamp moved, what is new is fetched). Measured once the seeded
  memories are older than the reader's look-back (``_LAG_US``), as in a store filled over
  time, and ``after_import_ms`` right after the bulk import, inside it.

Target: recall p50 <= 2 x query-embedding p50 + 10 ms (``budget_ms``), per round; the
verdict uses the median of the rounds.

``remember`` throughput: ``--batches`` batches of ``--batch-conversations`` (100) new
conversations, remembered one ``remember`` call each by an agent whose index of the user
is loaded, against the raw MiniLM ``embed_documents`` of the texts ``remember`` stores
(what was said in each exchange), in one call (``raw_batch``) and one call per
conversation as ``remember`` makes them (``raw_per_conversation``). The order of the
three alternates per batch. Target: ``remember`` >= 0.7 x the raw embedder (one call).
Fifteen batches by default: on a shared 2-core machine the one-call reference alone varies
from 128 to 243 texts/s between the batches of one run, and the median of five moved the
ratio by up to 0.14 between runs of the same code.

mem0 (``mem0``: ``init_agent(memory=True)``, the embedded mem0 ``Memory``; ``mem0-async``:
mem0 ``AsyncMemory`` with the same offline config, through ``aremember`` / ``arecall``):
``--mem0-memories`` memories (each one a mem0 ``add``), then the same recall and
throughput measurements with ``--mem0-queries`` (50) warm queries a round (a recall takes
about a third of a second there); reported, no target.

Results: ``bench/results/memory_conversation_scale.json``. ``--max-load L`` waits (up to
``--max-wait`` s) for the 1-minute load average to fall below L before each round.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import logging
import os
import random
import re
import shutil
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from datetime import datetime, timedelta, timezone
from functools import partial
from pathlib import Path
from typing import Any

os.environ.setdefault("MEM0_TELEMETRY", "False")

from langgraph.store.memory import InMemoryStore

from bench._common import current_rss_mb, read_result, setup_logging, summary, write_result
from bench.memory.conversations import load
from bench.memory.recall_latency import postgres_schema_url, to_fuse
from bench.memory.write_latency import DOCS, IngestMemo
from retrievalagent import init_agent
from retrievalagent.embeddings import MiniLMEmbeddings
from retrievalagent.memory._conversations import exchange_records, said_of
from retrievalagent.memory._store import _LAG_US

__all__ = ["conversations", "main", "queries"]

log = logging.getLogger("bench.conversation_scale")

SEED = 20261126
USER = "scale-user"
WARM_USER = "scale-warm-up"
NOW = datetime(2026, 11, 20, 18, 0, tzinfo=timezone.utc)
SPAN = timedelta(days=730)
STORES = ("memory", "postgres")
MEM0 = ("mem0", "mem0-async")
BACKENDS = (*STORES, *MEM0)
REMEMBER_TARGET = 0.7
EXTRA_MS = 10.0
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+")


# --------------------------------------------------------------------------- data
def _pools() -> dict[str, Any]:
    """The set's sentences by kind of speaker, how many sentences its messages have, the
    names of the other people, and its questions."""
    data = load()
    pools: dict[str, list[str]] = {"user": [], "named": [], "assistant": []}
    lengths: dict[str, list[int]] = {"user": [], "named": [], "assistant": []}
    names: list[str] = []
    asked: list[str] = []
    for user in data["users"]:
        asked += [q["question"] for q in user["questions"]]
        for session in user["sessions"]:
            for message in session["messages"]:
                kind = "named" if message.get("name") else message["role"]
                if message.get("name"):
                    names.append(message["name"])
                sentences = [s for s in _SENTENCE_END.split(message["content"]) if s.strip()]
                pools[kind] += sentences
                lengths[kind].append(len(sentences))
                if kind == "user":
                    asked += [s for s in sentences if s.endswith("?") and len(s) > 15]
    return {"pools": pools, "lengths": lengths, "names": sorted(set(names)), "asked": asked}


def _roles(rng: random.Random, n: int) -> list[str]:
    """A conversation's speakers in the set's proportions: it opens with the user; the
    assistant answers about half the messages of the people."""
    roles = ["user"]
    while len(roles) < n:
        if roles[-1] != "assistant" and rng.random() < 0.55:
            roles.append("assistant")
        else:
            roles.append("named" if rng.random() < 0.36 else "user")
    return roles


def conversations(
    n_memories: int, *, seed: int = SEED, prefix: str = "c", messages: tuple[int, int] = (8, 12)
) -> list[dict[str, Any]]:
    """Conversations of ``messages`` (fewest, most) messages, about ten by default, holding
    ``n_memories`` exchanges in all (an exchange starts at each message not by the
    assistant), dated over ``SPAN`` before ``NOW``, oldest first."""
    src = _pools()
    rng = random.Random(f"{seed}:{prefix}")
    out: list[dict[str, Any]] = []
    said: set[str] = set()
    left = n_memories
    while left > 0:
        roles = _roles(rng, rng.randint(*messages))
        people = [i for i, r in enumerate(roles) if r != "assistant"]
        if len(people) > left:  # the last one: exactly the memories asked for
            roles = roles[: people[left]]
        left -= sum(r != "assistant" for r in roles)
        cast = rng.sample(src["names"], 2)
        said_now = []
        for role in roles:
            text = ""
            while not text or (role != "assistant" and text in said):  # one memory each
                count = min(3, rng.choice(src["lengths"][role]))
                text = " ".join(rng.choice(src["pools"][role]) for _ in range(count))
            said.add(text)
            message: dict[str, Any] = {"role": "assistant" if role == "assistant" else "user"}
            message["content"] = text
            if role == "named":
                message["name"] = rng.choice(cast)
            said_now.append(message)
        out.append({"thread_id": f"{prefix}{len(out):05d}", "messages": said_now})
    step = SPAN / max(1, len(out))
    for i, conv in enumerate(out):
        jitter = timedelta(seconds=rng.uniform(0, step.total_seconds() * 0.8))
        conv["at"] = (NOW - SPAN + i * step + jitter).isoformat(timespec="seconds")
    return out


def queries(seed: int = SEED) -> list[str]:
    """Distinct questions: the set's, then those its users asked in their messages."""
    texts = list(dict.fromkeys(_pools()["asked"]))
    random.Random(seed).shuffle(texts)
    return texts


def said_texts(conversation: dict[str, Any]) -> list[str]:
    """The texts ``remember`` stores and embeds of a conversation: what was said in each
    exchange. (Their clauses' vectors come from the same runs of the model, see
    ``retrievalagent.embeddings._spans``; until 2026-11-27 they were embedded again on their
    own, and this reference counted them as texts too.)"""
    said = [s for i, m in enumerate(conversation["messages"]) if (s := said_of(m, i))]
    records = exchange_records(
        said, user_id=USER, thread_id=conversation["thread_id"], at=conversation["at"]
    )
    return [r.said or r.text for r in records]


# --------------------------------------------------------------------------- backends
class Bench:
    """One backend's agents: a writer, and readers made fresh for each round."""

    def __init__(self, backend: str, embeddings: Any, data: Path) -> None:
        self.backend = backend
        self.embeddings = embeddings
        self.data = data
        self.is_async = backend == "mem0-async"
        self._closers: list[Callable[[], None]] = []
        self._store_factory: Callable[[], Any] | None = None
        self._mem0_config: dict[str, Any] | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._async_memory: Any = None

    # -- making agents ---------------------------------------------------------------
    def open(self, stack: Any) -> None:
        if self.backend == "memory":
            store = InMemoryStore()
            self._store_factory = lambda: store
        elif self.backend == "postgres":
            from langgraph.store.postgres import PostgresStore

            url = stack.enter_context(postgres_schema_url("convscale"))

            def factory() -> Any:
                store = stack.enter_context(PostgresStore.from_conn_string(url))
                store.setup()
                return store

            self._store_factory = factory
        elif self.backend == "mem0-async":
            from retrievalagent.memory._embedded import offline_mem0_config
            from tests.support.memory import mem0_extractor

            self._mem0_config = offline_mem0_config(
                self.data / "mem0-async",
                mem0_extractor(),
                self.embeddings,
                384,
                collection_name="conversations",
            )

    def agent(self, name: str, *, docs: bool = False) -> Any:
        embeddings = self.embeddings
        kwargs: dict[str, Any] = {}
        if self._store_factory is not None:
            kwargs["memory_store"] = self._store_factory()
        elif self.backend == "mem0":
            kwargs["memory"] = True
        else:
            kwargs["mem0_memory"] = self._async_mem0()
        # one collection name per backend: memory=True keeps one mem0 per collection
        agent = init_agent(
            f"scale-{self.backend}" if self.backend == "mem0" else f"scale-{name}",
            backend_url=":memory:",
            data_dir=self.data,
            embeddings=embeddings,
            **kwargs,
        )
        if docs:
            embeddings.ingesting = True
            agent.add_documents(DOCS, progress=False)
            embeddings.ingesting = False
        self._closers.append(agent.close)
        return agent

    def _async_mem0(self) -> Any:
        from mem0 import AsyncMemory

        from retrievalagent.memory import Mem0Backend

        assert self._mem0_config is not None
        if self._async_memory is None:  # one per process, as Qdrant's local mode allows
            self._async_memory = self.run(_build(AsyncMemory, self._mem0_config))
        # as memory=True stores them: what was said, no extraction by mem0's LLM
        return Mem0Backend(self._async_memory, infer=False)

    def run(self, coro: Any) -> Any:
        """Run ``coro`` on this backend's one event loop (AsyncMemory keeps loop-bound
        state, so every call of a run goes to the same loop, in its own thread)."""
        if self._loop is None:
            self._loop = asyncio.new_event_loop()
            threading.Thread(target=self._loop.run_forever, daemon=True).start()
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result()

    def close(self) -> None:
        for close in reversed(self._closers):
            close()
        self._closers.clear()
        if self._loop is not None:
            self._loop.call_soon_threadsafe(self._loop.stop)

    # -- calls, sync or async as the backend is used ------------------------------------
    def remember(self, agent: Any, conv: dict[str, Any]) -> Any:
        where = {"user_id": USER, "thread_id": conv["thread_id"], "at": conv["at"]}
        if self.is_async:
            return self.run(agent.aremember(conv["messages"], **where))
        return agent.remember(conv["messages"], **where)

    def remember_all(self, agent: Any, convs: Sequence[dict[str, Any]]) -> float:
        """Seconds to remember ``convs``, one ``remember`` call each."""
        started = time.perf_counter()
        for conv in convs:
            self.remember(agent, conv)
        return time.perf_counter() - started

    def remember_many(self, agent: Any, convs: Sequence[dict[str, Any]]) -> float:
        """Seconds to remember ``convs`` in one ``remember_many`` call (an import)."""
        started = time.perf_counter()
        if self.is_async:
            self.run(agent.aremember_many(convs, user_id=USER))
        else:
            agent.remember_many(convs, user_id=USER)
        return time.perf_counter() - started

    def recall(self, agent: Any, query: str, user: str = USER) -> list[Any]:
        if self.is_async:
            return self.run(agent.arecall(query, user_id=user, k=10, now=NOW))
        return agent.recall(query, user_id=user, k=10, now=NOW)

    def forget(self, agent: Any, threads: Sequence[str]) -> None:
        for thread in threads:
            if self.is_async:
                self.run(agent.aforget(USER, thread_id=thread))
            else:
                agent.forget(USER, thread_id=thread)


async def _build(cls: Any, config: dict[str, Any]) -> Any:
    """``cls.from_config(config)`` inside the loop it will run on."""
    return cls.from_config(config)


# --------------------------------------------------------------------------- timing
def _ms(started: float) -> float:
    return (time.perf_counter() - started) * 1e3


def _wait_for_quiet(max_load: float, max_wait: float) -> float:
    started = time.perf_counter()
    while max_load and os.getloadavg()[0] >= max_load and time.perf_counter() - started < max_wait:
        time.sleep(5)
    return time.perf_counter() - started


def _round(
    bench: Bench,
    writer: Any,
    raw: MiniLMEmbeddings,
    asked: list[str],
    news: list[tuple[dict[str, Any], str]],
    *,
    graph: bool,
) -> dict[str, Any]:
    """One fresh reader: its cold recall, warm recalls of ``asked``, recalls after writes."""
    reader = bench.agent(f"{bench.backend}-reader")
    bench.recall(reader, "warming up the model and the connection", user=WARM_USER)
    rss = current_rss_mb()
    started = time.perf_counter()
    bench.recall(reader, asked[0])
    cold = _ms(started)
    loaded_rss = current_rss_mb() - rss
    turns = bench.agent(f"{bench.backend}-graph", docs=True) if graph else None
    config = {"configurable": {"user_id": USER, "now": NOW.isoformat()}}
    if turns is not None:
        to_fuse(turns, asked[0], USER, config)  # loads the user's index in this agent
    recall_ms, embed_ms, read_ms = [], [], []
    for n, query in enumerate(asked[1:]):
        steps: list[Callable[[], None]] = [
            lambda q=query: embed_ms.append(_timed(lambda: raw.embed_query(q))),
            lambda q=query: recall_ms.append(_timed(lambda: bench.recall(reader, q))),
        ]
        if turns is not None:
            steps.append(
                lambda q=query: read_ms.append(float(to_fuse(turns, q, USER, config)[1]["ms"]))
            )
        for i in range(len(steps)):
            steps[(n + i) % len(steps)]()
    after_write = []
    for conv, query in news:
        bench.remember(writer, conv)
        started = time.perf_counter()
        bench.recall(reader, query)
        after_write.append(_ms(started))
    budget = 2 * statistics.median(embed_ms) + EXTRA_MS
    return {
        "cold_ms": round(cold, 1),
        "rss_added_by_load_mb": round(loaded_rss, 1),
        "recall_ms": summary(recall_ms),
        "read_memory_ms": summary(read_ms),
        "embed_ms": summary(embed_ms),
        "budget_ms": round(budget, 2),
        "recall_within_budget": statistics.median(recall_ms) <= budget,
        "after_write_ms": summary(after_write),
        "load_avg_1m": round(os.getloadavg()[0], 2),
    }


def _timed(call: Callable[[], Any]) -> float:
    started = time.perf_counter()
    call()
    return _ms(started)


def _throughput(
    bench: Bench, agent: Any, raw: MiniLMEmbeddings, batches: list[list[dict[str, Any]]]
) -> dict[str, Any]:
    """Texts per second: ``remember`` against the raw embedder on the same texts."""
    rows = []
    for b, convs in enumerate(batches):
        per_conv = [said_texts(c) for c in convs]
        flat = [t for texts in per_conv for t in texts]
        # the same texts as new conversations (of the same user, whose index is loaded)
        copies = [{**c, "thread_id": c["thread_id"] + "-many"} for c in convs]
        steps: dict[str, Callable[[], float]] = {
            "remember": lambda convs=convs: bench.remember_all(agent, convs),
            "remember_many": lambda copies=copies: bench.remember_many(agent, copies),
            "raw_batch": lambda flat=flat: _timed(lambda: raw.embed_documents(flat)) / 1e3,
            "raw_per_conversation": lambda per_conv=per_conv: sum(
                _timed(partial(raw.embed_documents, texts)) / 1e3 for texts in per_conv
            ),
        }
        names = list(steps)
        seconds = {}
        for i in range(len(names)):
            name = names[(b + i) % len(names)]
            seconds[name] = steps[name]()
        row: dict[str, Any] = {"conversations": len(convs), "texts": len(flat)}
        row.update({f"{k}_per_s": round(len(flat) / v, 1) for k, v in seconds.items()})
        row["ratio"] = round(seconds["raw_batch"] / seconds["remember"], 3)
        row["ratio_per_conversation"] = round(
            seconds["raw_per_conversation"] / seconds["remember"], 3
        )
        row["ratio_many"] = round(seconds["raw_batch"] / seconds["remember_many"], 3)
        row["load_avg_1m"] = round(os.getloadavg()[0], 2)
        rows.append(row)
    return {
        "batches": rows,
        "remember_per_s": statistics.median(r["remember_per_s"] for r in rows),
        "raw_batch_per_s": statistics.median(r["raw_batch_per_s"] for r in rows),
        "raw_per_conversation_per_s": statistics.median(
            r["raw_per_conversation_per_s"] for r in rows
        ),
        "remember_many_per_s": statistics.median(r["remember_many_per_s"] for r in rows),
        "ratio": statistics.median(r["ratio"] for r in rows),
        "ratio_per_conversation": statistics.median(r["ratio_per_conversation"] for r in rows),
        "ratio_many": statistics.median(r["ratio_many"] for r in rows),
    }


def _after_import(
    bench: Bench, writer: Any, asked: list[str], news: list[tuple[dict[str, Any], str]]
) -> dict[str, Any]:
    """Recalls right after another agent wrote, while the bulk import is still recent."""
    reader = bench.agent(f"{bench.backend}-early")
    bench.recall(reader, asked[0])
    times = []
    for conv, query in news:
        bench.remember(writer, conv)
        times.append(_timed(lambda q=query: bench.recall(reader, q)))
    return summary(times)


def measure(backend: str, raw: MiniLMEmbeddings, args: argparse.Namespace) -> dict[str, Any]:

    n = args.mem0_memories if backend in MEM0 else args.memories
    n_queries = args.mem0_queries if backend in MEM0 else args.queries
    convs = conversations(n)
    pool = queries()
    per_round = n_queries + 1 + args.news
    needed = args.batches * args.batch_conversations + (args.rounds + 1) * args.news
    extra = conversations(8 * needed + 100, prefix="n")  # about 6.7 memories each
    extra = [c for c in extra if sum(m["role"] == "user" for m in c["messages"]) > 1]
    assert len(extra) >= needed, (len(extra), needed)
    for c in extra:  # said a day before NOW: new memories
        c["at"] = (NOW - timedelta(days=1)).isoformat(timespec="seconds")
    data = Path(tempfile.mkdtemp(prefix=f"convscale-{backend}-"))
    bench = Bench(backend, IngestMemo(raw), data)
    with contextlib.ExitStack() as stack:
        stack.callback(shutil.rmtree, data, ignore_errors=True)
        stack.callback(bench.close)
        bench.open(stack)
        writer = bench.agent(f"{backend}-writer")
        log.info("%s: remembering %d conversations (%d memories)", backend, len(convs), n)
        seed_s = bench.remember_all(writer, convs)
        seeded = time.monotonic()
        log.info("%s: seeded in %.0f s (%.0f memories/s)", backend, seed_s, n / seed_s)
        listed = len(writer.list_memories(USER)) if backend in STORES else None
        taken = 0

        def news(count: int) -> list[dict[str, Any]]:
            nonlocal taken
            taken += count
            return extra[taken - count : taken]

        early_news = news(args.news)
        early = _after_import(
            bench, writer, pool, list(zip(early_news, pool[1 : 1 + args.news], strict=True))
        )
        bench.forget(writer, [c["thread_id"] for c in early_news])
        wait = _LAG_US / 1e6 + 5 - (time.monotonic() - seeded)
        if (
            backend in STORES and wait > 0 and not args.no_lag_wait
        ):  # the seeded memories are now "old"
            log.info(
                "%s: waiting %.0f s until the import is older than the look-back", backend, wait
            )
            time.sleep(wait)
        rounds = []
        waited = 0.0
        for r in range(args.rounds):
            waited += _wait_for_quiet(args.max_load, args.max_wait)
            offset = (r * per_round) % len(pool)
            asked = (pool[offset:] + pool[:offset])[:per_round]
            round_news = news(args.news)
            result = _round(
                bench,
                writer,
                raw,
                asked[: n_queries + 1],
                list(zip(round_news, asked[n_queries + 1 :], strict=True)),
                graph=not args.no_graph,
            )
            bench.forget(writer, [c["thread_id"] for c in round_news])
            log.info(
                "%s round %d: recall p50 %.1f ms (budget %.1f), cold %.0f ms, after write %.1f ms",
                backend,
                r + 1,
                result["recall_ms"]["p50"],
                result["budget_ms"],
                result["cold_ms"],
                result["after_write_ms"].get("p50", float("nan")),
            )
            rounds.append(result)
        waited += _wait_for_quiet(args.max_load, args.max_wait)
        loaded = bench.agent(f"{backend}-throughput")
        bench.recall(loaded, pool[0])  # the user's index is loaded: remember updates it
        batches = [news(args.batch_conversations) for _ in range(args.batches)]
        throughput = _throughput(bench, loaded, raw, batches)
        log.info(
            "%s: remember %.0f texts/s, raw embedder %.0f/s (%.2fx)",
            backend,
            throughput["remember_per_s"],
            throughput["raw_batch_per_s"],
            throughput["ratio"],
        )
    return {
        "memories": n,
        "conversations": len(convs),
        "listed": listed,
        "seed_seconds": round(seed_s, 1),
        "seed_memories_per_s": round(n / seed_s, 1),
        "rounds": rounds,
        "after_import_ms": early,
        "throughput": throughput,
        "seconds_waiting_for_quiet": round(waited, 1),
        "summary": _summary(rounds, throughput, early, backend),
    }


def _med(rounds: list[dict[str, Any]], *path: str) -> float | None:
    values = []
    for r in rounds:
        v: Any = r
        for p in path:
            v = v.get(p) if isinstance(v, dict) else None
        if isinstance(v, int | float):
            values.append(float(v))
    return round(statistics.median(values), 2) if values else None


def _summary(
    rounds: list[dict[str, Any]], throughput: dict[str, Any], early: dict[str, Any], backend: str
) -> dict[str, Any]:
    recall, budget = _med(rounds, "recall_ms", "p50"), _med(rounds, "budget_ms")
    out = {
        "recall_p50_ms": recall,
        "recall_p95_ms": _med(rounds, "recall_ms", "p95"),
        "read_memory_p50_ms": _med(rounds, "read_memory_ms", "p50"),
        "read_memory_p95_ms": _med(rounds, "read_memory_ms", "p95"),
        "embed_query_p50_ms": _med(rounds, "embed_ms", "p50"),
        "budget_ms": budget,
        "cold_ms": _med(rounds, "cold_ms"),
        "rss_added_by_load_mb": _med(rounds, "rss_added_by_load_mb"),
        "after_write_p50_ms": _med(rounds, "after_write_ms", "p50"),
        "after_import_p50_ms": early.get("p50"),
        "remember_per_s": throughput["remember_per_s"],
        "raw_embedder_per_s": throughput["raw_batch_per_s"],
        "remember_ratio": throughput["ratio"],
        "remember_ratio_per_conversation": throughput["ratio_per_conversation"],
        "remember_many_per_s": throughput["remember_many_per_s"],
        "remember_many_ratio": throughput["ratio_many"],
    }
    if backend in STORES:
        out["recall_target_met"] = recall is not None and budget is not None and recall <= budget
        out["remember_target_met"] = throughput["ratio"] >= REMEMBER_TARGET
        out["remember_many_target_met"] = throughput["ratio_many"] >= REMEMBER_TARGET
    return out


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--backends", nargs="+", default=list(BACKENDS), choices=list(BACKENDS))
    parser.add_argument("--memories", type=int, default=10_000)
    parser.add_argument("--mem0-memories", type=int, default=10_000)
    parser.add_argument("--queries", type=int, default=150, help="warm queries per round")
    parser.add_argument("--mem0-queries", type=int, default=50, help="the same for mem0")
    parser.add_argument("--news", type=int, default=10, help="writes then recalls per round")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--batches", type=int, default=15)
    parser.add_argument("--batch-conversations", type=int, default=100)
    parser.add_argument("--no-graph", action="store_true", help="skip the read_memory timing")
    parser.add_argument(
        "--no-lag-wait", action="store_true", help="do not wait for the import to age (smoke)"
    )
    parser.add_argument("--max-load", type=float, default=0.0)
    parser.add_argument("--max-wait", type=float, default=300.0)
    args = parser.parse_args(argv)
    setup_logging()
    logging.getLogger("mem0").setLevel(logging.WARNING)
    started = time.perf_counter()
    raw = MiniLMEmbeddings().load()
    raw.embed_query("warm up")
    backends = {name: measure(name, raw, args) for name in args.backends}
    earlier = read_result("memory_conversation_scale") or {}
    for name, result in (earlier.get("backends") or {}).items():
        if name not in backends:  # not run this time: its last result stays, marked as such
            backends[name] = {**result, "from_run": result.get("from_run") or earlier["created"]}
    payload = {
        "command": "python -m bench.memory.conversation_scale "
        + " ".join(sys.argv[1:] if argv is None else argv),
        "user": USER,
        "data": "conversations recombined from the sentences of bench/memory/data/conversations.json",
        "protocol": "see bench/memory/conversation_scale.py docstring",
        "targets": {
            "recall_p50": f"<= 2 x embed_query p50 + {EXTRA_MS:g} ms",
            "remember": f">= {REMEMBER_TARGET} x raw embed_documents throughput",
        },
        "backends": backends,
        "summary": {name: r["summary"] for name, r in backends.items()},
    }
    write_result("memory_conversation_scale", payload, started)
    return payload


if __name__ == "__main__":
    print(json.dumps(main()["summary"], indent=2))

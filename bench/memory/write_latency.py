"""Does a slow memory write slow down ``invoke``?  ``python -m bench.memory.write_latency``

Pairs of agents over the bundled sample docs (packaged embedder), each with a LangGraph
``InMemoryStore`` whose ``put`` takes 500 ms. The *writer* stores a new fact on every turn
(its grade always proposes one); the *reader* never does (storage threshold 1.0) but is
otherwise identical, down to the store: both recall from the one store the writer fills,
so growing memory costs both alike. Calls alternate between the two (the order flips every
run), in several rounds, so load from other processes hits both alike; every question is new text
(a run number is appended), so each turn embeds its question.

Variants:

* ``offline``: no LLM (extractive answer, evidence grade) -- a realistic turn;
* ``instant-llm``: a zero-latency chat model, so a turn is little more than embedding the
  question and searching: any CPU the background write spends shows up here;
* ``instant-llm-cpu-write``: as ``instant-llm``, but the store's ``put`` also embeds the
  fact (what a write that computes its own vector costs, e.g. mem0 with ``infer=False``).

Rounds of the variants are interleaved. Reported per variant: median ``invoke`` latency
with and without writes and their ratio; the median of the per-run paired ratios (writer
and reader asked the same question back to back, so both saw the same load -- the steadier
estimate on a shared machine); per-round ratios with the load average; and the drain
report after the last run (every write landed). Target: ratio <= 1.05 for ``offline`` and
``instant-llm``. ``--max-load 3 --max-wait 120`` waits for a quieter machine before each
round (bounded). Writes ``bench/results/memory_write_latency.json``.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

os.environ.setdefault("MEM0_TELEMETRY", "False")

from langchain_core.embeddings import Embeddings
from langgraph.store.memory import InMemoryStore

from bench._common import RESULTS, git_revision, machine
from retrievalagent import init_agent
from retrievalagent.embeddings import MiniLMEmbeddings
from retrievalagent.types import Grade
from tests.support.chat import ScriptedChatModel

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "retrievalagent" / "sample_docs"
WRITE_SECONDS = 0.5
TARGET = 1.05


class SlowStore(InMemoryStore):
    """A real ``InMemoryStore`` whose writes take ``WRITE_SECONDS`` (and, optionally,
    one embedding of the stored fact)."""

    def __init__(self, embed: Any = None) -> None:
        super().__init__()
        self.embed = embed

    def put(self, namespace: Any, key: str, value: dict[str, Any], *args: Any, **kw: Any) -> None:
        time.sleep(WRITE_SECONDS)
        if self.embed is not None:
            self.embed.embed_documents([str(value.get("recall") or value.get("text"))])
        super().put(namespace, key, value, *args, **kw)


class IngestMemo(Embeddings):
    """The real model; while ``ingesting``, document vectors are remembered, so six agents
    indexing the same sample docs embed them once. Turns always run the model."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.dimension = inner.dimension
        self.model_name = inner.model_name
        self.ingesting = False
        self._memo: dict[str, list[float]] = {}

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        if not self.ingesting:
            return self.inner.embed_documents(texts)
        missing = [t for t in dict.fromkeys(texts) if t not in self._memo]
        if missing:
            self._memo.update(zip(missing, self.inner.embed_documents(missing), strict=True))
        return [self._memo[t] for t in texts]

    def embed_query(self, text: str) -> list[float]:
        return self.inner.embed_query(text)

    # memories' clause vectors come from the model's runs of their texts, as without the memo
    def embed_spans(self, texts: list[str], spans: Any) -> Any:
        return self.inner.embed_spans(texts, spans)

    async def aembed_spans(self, texts: list[str], spans: Any) -> Any:
        return await self.inner.aembed_spans(texts, spans)


class AlwaysStore:
    """Wraps the agent's grader: same grade, plus a new fact worth storing every turn."""

    def __init__(self, inner: Any) -> None:
        self.inner, self.n = inner, 0

    def _with_fact(self, grade: Grade) -> Grade:
        self.n += 1
        return grade.model_copy(
            update={
                "memory_worth_storing": True,
                "memory_confidence": 0.95,
                "memory_fact": f'"term{self.n}" is called "vault" in these documents',
            }
        )

    def grade(self, request: Any, config: Any = None) -> Grade:
        return self._with_fact(self.inner.grade(request, config))

    async def agrade(self, request: Any, config: Any = None) -> Grade:
        return self._with_fact(await self.inner.agrade(request, config))


def _pair(variant: str, embeddings: Any, data: Path) -> tuple[Any, Any]:
    model = None if variant == "offline" else ScriptedChatModel()
    cpu_write = embeddings if variant.endswith("cpu-write") else None
    common = {"backend_url": ":memory:", "data_dir": data, "embeddings": embeddings, "model": model}
    # One store for both: the reader recalls the very memories the writer has stored so
    # far, so the pair differs only in whether the turn schedules a write.
    store = SlowStore(cpu_write)
    writer = init_agent(f"lat-w-{variant}", memory_store=store, **common)
    reader = init_agent(
        f"lat-r-{variant}", memory_store=store, memory_storage_threshold=1.0, **common
    )
    embeddings.ingesting = True
    for agent in (writer, reader):
        agent.add_documents(DOCS, progress=False)
    embeddings.ingesting = False
    return writer, reader


class Variant:
    """One writer/reader pair and its timings, run a round at a time (rounds of all
    variants are interleaved, so a burst of load from other processes hits each alike)."""

    def __init__(self, name: str, embeddings: Any, data: Path, warm_up: str) -> None:
        self.name = name
        self.writer, self.reader = _pair(name, embeddings, data)
        self.overrides = contextlib.ExitStack()  # the writer stores a fact every turn
        self.overrides.enter_context(self.writer.override(grader=AlwaysStore(self.writer.grader)))
        for agent in (self.writer, self.reader):  # caches, lazy imports
            agent.invoke(f"{warm_up} (warm-up)")
        self.writer.drain_background()
        self.base = self.writer.background.counts()["landed"]
        self.with_w: list[float] = []
        self.without: list[float] = []
        self.rounds: list[dict[str, Any]] = []
        self.n = 0

    def round(self, questions: list[str], runs: int) -> None:
        load_before = os.getloadavg()[0]
        rw: list[float] = []
        rr: list[float] = []
        for i in range(runs):
            self.n += 1
            question = f"{questions[self.n % len(questions)]} (run {self.n})"
            pair = [(self.writer, rw), (self.reader, rr)]
            for agent, sink in pair if i % 2 == 0 else reversed(pair):
                start = time.perf_counter()
                agent.invoke(question, config={"configurable": {"user_id": f"u{self.n}"}})
                sink.append((time.perf_counter() - start) * 1e3)
        self.with_w += rw
        self.without += rr
        self.rounds.append(
            {
                "p50_with_writes_ms": round(statistics.median(rw), 1),
                "p50_without_writes_ms": round(statistics.median(rr), 1),
                "ratio": round(statistics.median(rw) / statistics.median(rr), 3),
                "load_avg_1m": [round(load_before, 2), round(os.getloadavg()[0], 2)],
            }
        )

    def finish(self) -> dict[str, Any]:
        pending_after_runs = self.writer.background.counts()["pending"]
        started = time.perf_counter()
        report = self.writer.drain_background()
        drain_s = time.perf_counter() - started
        self.overrides.close()
        self.writer.close()
        self.reader.close()
        p50_w, p50_r = statistics.median(self.with_w), statistics.median(self.without)
        # Each run asks both agents the same question back to back: the ratio within a pair
        # shares the machine's load at that moment, so its median is the steadier estimate.
        paired = sorted(w / r for w, r in zip(self.with_w, self.without, strict=True))
        landed = report["landed"] - self.base
        return {
            "runs_each": len(self.with_w),
            "invoke_p50_ms_with_writes": round(p50_w, 1),
            "invoke_p50_ms_without_writes": round(p50_r, 1),
            "ratio_of_p50s": round(p50_w / p50_r, 3),
            "median_paired_ratio": round(statistics.median(paired), 3),
            "paired_ratio_iqr": [
                round(paired[len(paired) // 4], 3),
                round(paired[(3 * len(paired)) // 4], 3),
            ],
            "median_round_ratio": round(statistics.median(r["ratio"] for r in self.rounds), 3),
            "rounds": self.rounds,
            "pending_when_runs_finished": pending_after_runs,
            "drain_seconds": round(drain_s, 2),
            "drain": dict(report),
            "writes_landed_in_runs": landed,
            "every_write_landed": landed == len(self.with_w) and report["failed"] == 0,
        }


def _wait_for_quiet(max_load: float, max_wait: float) -> float:
    """Wait until the 1-minute load average is below ``max_load`` (0: do not wait)."""
    started = time.perf_counter()
    while max_load and os.getloadavg()[0] >= max_load:
        if time.perf_counter() - started > max_wait:
            break
        time.sleep(5)
    return time.perf_counter() - started


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--variants", nargs="+", default=["offline", "instant-llm", "instant-llm-cpu-write"]
    )
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("--runs", type=int, default=25, help="runs per agent per round")
    parser.add_argument(
        "--max-load",
        type=float,
        default=0.0,
        help="before each round, wait (up to --max-wait s) until the 1-min load is below this",
    )
    parser.add_argument("--max-wait", type=float, default=120.0)
    args = parser.parse_args(argv)
    started = time.perf_counter()
    data = Path(os.environ.get("TMPDIR", "/tmp")) / "retrievalagent-bench-latency"
    questions = [q["question"] for q in json.loads((DOCS / "questions.json").read_text())]
    embeddings = IngestMemo(MiniLMEmbeddings().load())
    result: dict[str, Any] = {
        "benchmark": "memory_write_latency",
        "command": "python -m bench.memory.write_latency "
        + " ".join(sys.argv[1:] if argv is None else argv),
        "git": git_revision(),
        "machine": machine(),
        "write_seconds": WRITE_SECONDS,
        "target_ratio": TARGET,
        "variants": {},
    }
    variants = [Variant(name, embeddings, data, questions[0]) for name in args.variants]
    waited = 0.0
    for _ in range(args.rounds):
        for variant in variants:
            waited += _wait_for_quiet(args.max_load, args.max_wait)
            variant.round(questions, args.runs)
    result["seconds_waiting_for_quiet"] = round(waited, 1)
    for variant in variants:
        result["variants"][variant.name] = variant.finish()
    result["load_avg_at_end"] = list(os.getloadavg())
    result["run_seconds"] = round(time.perf_counter() - started, 1)
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "memory_write_latency.json").write_text(json.dumps(result, indent=2) + "\n")
    return result


if __name__ == "__main__":
    print(json.dumps(main(), indent=2))

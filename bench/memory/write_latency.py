"""Does a slow memory write slow down ``invoke``?  ``python -m bench.memory.write_latency``

Two agents over the bundled sample docs (offline, packaged embedder), each with a
LangGraph ``InMemoryStore`` whose ``put`` takes 500 ms. One stores a fact on every turn
(its grader always proposes a new one), the other never does (storage threshold 1.0).
Runs alternate between them; the result is the median ``invoke`` latency of each, their
ratio (target <= 1.05), and the drain report after the last run (every write landed).
Writes to ``bench/results/memory_write_latency.json``.
"""

from __future__ import annotations

import json
import os
import statistics
import time
from pathlib import Path
from typing import Any

os.environ.setdefault("MEM0_TELEMETRY", "False")

from langgraph.store.memory import InMemoryStore

from retrievalagent import init_agent
from retrievalagent.types import Grade

ROOT = Path(__file__).resolve().parents[2]
RESULT = ROOT / "bench" / "results" / "memory_write_latency.json"
WRITE_SECONDS = 0.5
RUNS = 30


class SlowStore(InMemoryStore):
    def put(self, *args: Any, **kwargs: Any) -> None:
        time.sleep(WRITE_SECONDS)
        super().put(*args, **kwargs)


class AlwaysStore:
    """Wraps the agent's grader: same grade, plus a new fact worth storing every turn."""

    def __init__(self, inner: Any) -> None:
        self.inner, self.n = inner, 0

    def grade(self, request: Any, config: Any = None) -> Grade:
        self.n += 1
        grade = self.inner.grade(request, config)
        return grade.model_copy(
            update={"memory_worth_storing": True, "memory_confidence": 0.95,
                    "memory_fact": f'"term{self.n}" is called "vault" in these documents'}
        )  # fmt: skip

    async def agrade(self, request: Any, config: Any = None) -> Grade:
        return self.grade(request, config)


def main() -> dict[str, Any]:
    data = Path(os.environ.get("TMPDIR", "/tmp")) / "retrievalagent-bench-latency"
    docs = ROOT / "retrievalagent" / "sample_docs"
    questions = [q["question"] for q in json.loads((docs / "questions.json").read_text())]
    writer = init_agent("lat-w", backend_url=":memory:", data_dir=data, memory_store=SlowStore())
    reader = init_agent(
        "lat-r", backend_url=":memory:", data_dir=data, memory_store=SlowStore(),
        memory_storage_threshold=1.0, embeddings=writer.embeddings,
    )  # fmt: skip
    writer._components.grader = AlwaysStore(writer._components.grader)
    for agent in (writer, reader):
        agent.add_documents(docs, progress=False)
        agent.invoke(questions[0])  # warm caches
    writer.drain_background()
    base = writer.background.counts()["landed"]
    with_writes, without = [], []
    for i in range(RUNS):
        question = questions[i % len(questions)]
        pair = [(writer, with_writes), (reader, without)]
        for agent, sink in pair if i % 2 == 0 else reversed(pair):
            start = time.perf_counter()
            agent.invoke(question, config={"configurable": {"user_id": f"u{i}"}})
            sink.append((time.perf_counter() - start) * 1e3)
    pending_after_runs = writer.background.counts()["pending"]
    started = time.perf_counter()
    report = writer.drain_background()
    drain_s = time.perf_counter() - started
    p50_w, p50_r = statistics.median(with_writes), statistics.median(without)
    result = {
        "write_seconds": WRITE_SECONDS,
        "runs_each": RUNS,
        "invoke_p50_ms_with_writes": round(p50_w, 1),
        "invoke_p50_ms_without_writes": round(p50_r, 1),
        "ratio": round(p50_w / p50_r, 3),
        "target_ratio": 1.05,
        "pending_when_runs_finished": pending_after_runs,
        "drain_seconds": round(drain_s, 2),
        "drain": dict(report),
        "writes_landed_in_runs": report["landed"] - base,
        "every_write_landed": report["landed"] - base == RUNS and report["failed"] == 0,
    }
    for agent in (writer, reader):
        agent.close()
    RESULT.parent.mkdir(parents=True, exist_ok=True)
    RESULT.write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result, indent=2))
    return result


if __name__ == "__main__":
    main()

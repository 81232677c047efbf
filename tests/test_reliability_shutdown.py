"""Shutdown: exiting with memory writes in flight drains them (bounded) first; killing the
process (SIGKILL) in the middle of an ingest leaves an index that opens cleanly, and running
the ingest again completes it without duplicates.

Every case runs a real child process (``python -c``) and inspects what it left on disk.
"""

from __future__ import annotations

import os
import random
import shutil
import signal
import subprocess
import sys
import textwrap
import time
import uuid
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[1]
PRELUDE = textwrap.dedent(
    """
    import asyncio, os, sys, time
    from pathlib import Path
    sys.path.insert(0, os.environ["RA_ROOT"])
    from retrievalagent import init_agent
    from retrievalagent.embeddings import MiniLMEmbeddings
    from tests.support.chat import ScriptedChatModel
    from tests.support.memory import mem0_config

    TMP = Path(os.environ["RA_TMP"])
    EMB = MiniLMEmbeddings().load()
    FACT = '"listening port" is called "port" in these documents'
    GRADE = {"sufficient": True, "confidence": 0.9, "memory_worth_storing": True,
             "memory_confidence": 0.95, "memory_fact": FACT}

    class Slow:
        '''A real mem0 memory whose add takes DELAY seconds first.'''
        def __init__(self, inner, delay):
            self._inner, self.delay = inner, delay
        def __getattr__(self, name):
            return getattr(self._inner, name)

    def slow_sync(inner, delay):
        import functools
        memory = Slow(inner, delay)
        @functools.wraps(inner.add)
        def add(*a, **k):
            time.sleep(delay)
            return inner.add(*a, **k)
        memory.add = add
        return memory

    def slow_async(inner, delay):
        import functools
        memory = Slow(inner, delay)
        @functools.wraps(inner.add)
        async def add(*a, **k):
            await asyncio.sleep(delay)
            return await inner.add(*a, **k)
        memory.add = add
        return memory

    def agent(memory, **kw):
        model = ScriptedChatModel(replies=["Port 7311 [1]."], grades=[GRADE])
        rag = init_agent("shutdown", backend_url=":memory:", embeddings=EMB, model=model,
                         mem0_memory=memory, data_dir=TMP / "data", **kw)
        rag.add_documents(["Lanternfish listens on port 7311 by default."], progress=False)
        return rag
    """
)


def _run(
    code: str, tmp: Path, timeout: float = 120
) -> tuple[subprocess.CompletedProcess[str], float]:
    env = {**os.environ, "RA_ROOT": str(ROOT), "RA_TMP": str(tmp), "MEM0_TELEMETRY": "False"}
    start = time.monotonic()
    proc = subprocess.run(
        [sys.executable, "-c", PRELUDE + textwrap.dedent(code)],
        capture_output=True, text=True, timeout=timeout, env=env, cwd=tmp, check=False,
    )  # fmt: skip
    return proc, time.monotonic() - start


def _waited(proc: subprocess.CompletedProcess[str]) -> float:
    """Seconds from the end of the child's code (it prints the time) to its exit."""
    line = next(ln for ln in proc.stdout.splitlines() if ln.startswith("scheduled "))
    return time.time() - float(line.split()[2])


def _stored_facts(tmp: Path, minilm: Any, user: str) -> list[str]:
    from mem0 import Memory

    from retrievalagent.memory._embedded import _close_memory
    from tests.support.memory import mem0_config

    memory = Memory.from_config(mem0_config(tmp / "m0", minilm))
    try:
        return [
            r["memory"] for r in memory.get_all(filters={"user_id": user}, top_k=100)["results"]
        ]
    finally:
        _close_memory(memory)


SYNC_EXIT = """
    from mem0 import Memory
    rag = agent(slow_sync(Memory.from_config(mem0_config(TMP / "m0", EMB)), 1.5))
    state = rag.invoke("Which port does Lanternfish use?", {"configurable": {"user_id": "ann"}})
    print("scheduled", rag.background.counts()["pending"], time.time(), flush=True)
    # exits here: no drain_background(), no close()
"""

ASYNC_SYNC_BACKEND_EXIT = """
    from mem0 import Memory
    rag = agent(slow_sync(Memory.from_config(mem0_config(TMP / "m0", EMB)), 1.5))
    async def main():
        await rag.ainvoke("Which port does Lanternfish use?", {"configurable": {"user_id": "ann"}})
        print("scheduled", rag.background.counts()["pending"], time.time(), flush=True)
    asyncio.run(main())  # the loop ends with the write on a worker thread
"""

ASYNC_EXIT = """
    from mem0 import AsyncMemory
    rag = agent(slow_async(AsyncMemory.from_config(mem0_config(TMP / "m0", EMB)), 1.5))
    async def main():
        await rag.ainvoke("Which port does Lanternfish use?", {"configurable": {"user_id": "ann"}})
        print("scheduled", rag.background.counts()["pending"], time.time(), flush=True)
    asyncio.run(main())  # the loop ends with the write as a task on it
    print("after loop", dict(rag.background.counts()), flush=True)
"""


@pytest.mark.parametrize(
    "code",
    [SYNC_EXIT, ASYNC_SYNC_BACKEND_EXIT, ASYNC_EXIT],
    ids=["invoke", "ainvoke", "async-mem0"],
)
def test_exit_drains_pending_memory_writes(tmp_path: Path, minilm: Any, code: str) -> None:
    proc, _ = _run(code, tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    # the writes (the fact, the exchange) were still pending when the code ended
    assert "scheduled 2 " in proc.stdout
    assert _waited(proc) > 1.0  # the process waited for them (1.5 s) before exiting ...
    stored = _stored_facts(tmp_path, minilm, "ann")
    assert len(stored) == 2  # ... and both landed
    assert any('"listening port" is called "port"' in text for text in stored)
    assert any("Which port does Lanternfish use?" in text for text in stored)
    assert "still pending" not in proc.stderr and "memory write failed" not in proc.stderr


def test_exit_drain_is_bounded_and_says_what_it_lost(tmp_path: Path, minilm: Any) -> None:
    proc, _ = _run(
        """
        from mem0 import Memory
        rag = agent(slow_sync(Memory.from_config(mem0_config(TMP / "m0", EMB)), 60),
                    drain_timeout=1, memory_timeout=120)
        rag.invoke("Which port does Lanternfish use?", {"configurable": {"user_id": "ann"}})
        print("scheduled", rag.background.counts()["pending"], time.time(), flush=True)
        """,
        tmp_path,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "scheduled 2 " in proc.stdout
    assert _waited(proc) < 10  # bounded by drain_timeout (1 s), not the 60 s writes
    assert "2 memory write(s) still pending" in proc.stderr  # never lost silently
    assert _stored_facts(tmp_path, minilm, "ann") == []


# -- SIGKILL during ingestion -------------------------------------------------------------------
INGEST = """
    import signal
    src, collection = Path(sys.argv[1]), sys.argv[2]
    rag = init_agent(collection, embeddings=EMB, data_dir=TMP / "data", chunk_size=300,
                     chunk_overlap=40)
    files = sorted(p for p in src.rglob("*") if p.is_file())
    print("ready", len(files), flush=True)
    for i, path in enumerate(files):
        rag.add_documents(path, progress=False)
        print("done", i, flush=True)
    rag.close()
    print("finished", flush=True)
"""


def _ingest(
    tmp: Path, src: Path, collection: str, kill_after: int | None, rng: random.Random
) -> bool:
    """Ingest ``src`` file by file in a child; SIGKILL it a moment after file ``kill_after``.
    Returns True when the child was killed before it finished."""
    env = {**os.environ, "RA_ROOT": str(ROOT), "RA_TMP": str(tmp), "MEM0_TELEMETRY": "False"}
    proc = subprocess.Popen(
        [sys.executable, "-c", PRELUDE + textwrap.dedent(INGEST), str(src), collection],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, cwd=tmp,
    )  # fmt: skip
    assert proc.stdout is not None
    try:
        for line in proc.stdout:
            if kill_after is not None and line.strip() == f"done {kill_after}":
                time.sleep(rng.uniform(0.0, 0.15))  # somewhere inside the next file's work
                proc.send_signal(signal.SIGKILL)
                proc.wait(30)
                return True
        proc.wait(120)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 0, proc.stderr.read() if proc.stderr else ""
    return False


def _open(collection: str, tmp: Path, minilm: Any) -> Any:
    from retrievalagent import init_agent

    return init_agent(
        collection, embeddings=minilm, data_dir=tmp / "data", chunk_size=300, chunk_overlap=40
    )


@pytest.mark.slow  # two child processes embedding the sample docs: ~20-30 s
def test_sigkill_during_ingest_then_rerun_has_no_duplicates(
    tmp_path: Path, minilm: Any, sample_docs: Path
) -> None:
    rng = random.Random(7)
    src = tmp_path / "docs"
    shutil.copytree(sample_docs, src, ignore=shutil.ignore_patterns("*.json"))
    files = sorted(p for p in src.rglob("*") if p.is_file())
    # 1) a first ingest, killed part-way; 2) a third of the files change and the re-ingest
    # (replacing them: new chunks first, old ones deleted after) is killed part-way too
    assert _ingest(tmp_path, src, "killed", rng.randrange(1, len(files) - 3), rng)
    for path in files[::3]:
        path.write_text(path.read_text() + f"\n\nAppendix {uuid.uuid4().hex}: port 7311.\n")
    assert _ingest(tmp_path, src, "killed", rng.randrange(0, len(files) - 3), rng)

    clean = _open("clean", tmp_path, minilm)
    killed = _open("killed", tmp_path, minilm)  # opens cleanly after two kills
    try:
        clean.add_documents(src, progress=False)  # the reference: never interrupted
        assert killed.count() == sum(killed.sources().values())
        assert killed.sources() != clean.sources()  # the kills left work undone
        killed.add_documents(src, progress=False)  # the re-run
        assert killed.sources() == clean.sources()  # chunks per source, exactly
        assert killed.count() == clean.count() == sum(clean.sources().values())
        assert killed.add_documents(src, progress=False).added_chunks == 0  # nothing left to do
    finally:
        killed.close()
        clean.close()


def test_exit_after_close_with_your_own_mem0_is_quiet(tmp_path: Path) -> None:
    """A mem0 memory of the user's own, locked by the agent, used to be closed by the
    collector at interpreter exit, whose close of the engine could no longer import its
    file lock: "Exception ignored in: QdrantClient.__del__ ... ImportError" on every exit."""
    proc, _ = _run(
        """
        from mem0 import Memory
        rag = agent(Memory.from_config(mem0_config(TMP / "m0", EMB)))
        rag.invoke("Which port does Lanternfish use?", {"configurable": {"user_id": "ann"}})
        rag.drain_background()
        print("stored", len(rag.list_memories("ann")), flush=True)
        rag.close()
        """,
        tmp_path,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "stored 2" in proc.stdout
    assert "Exception ignored" not in proc.stderr, proc.stderr[-3000:]

"""No write is lost silently at exit: the exit hook drains, or says what it left behind."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tests.support.memory import record

SCRIPT = textwrap.dedent(
    """
    import sys, time
    from pathlib import Path
    from retrievalagent.memory import BackgroundWrites

    marker, delay = Path(sys.argv[1]), float(sys.argv[2])
    writes = BackgroundWrites(timeout=60, exit_timeout=float(sys.argv[3]))

    def slow_write():
        time.sleep(delay)
        marker.write_text("landed")

    writes.submit_thread(slow_write, "slow write")
    print("scheduled", writes.counts()["pending"], flush=True)
    # exits here without drain_background()
    """
)


def _run(
    tmp_path: Path, delay: float, exit_timeout: float
) -> tuple[Path, subprocess.CompletedProcess[str]]:
    marker = tmp_path / "marker"
    env = {**os.environ, "MEM0_TELEMETRY": "False"}
    proc = subprocess.run(
        [sys.executable, "-c", SCRIPT, str(marker), str(delay), str(exit_timeout)],
        capture_output=True, text=True, timeout=60, env=env, check=False,
    )  # fmt: skip
    return marker, proc


def test_exit_hook_waits_for_a_pending_write(tmp_path: Path) -> None:
    marker, proc = _run(tmp_path, delay=0.5, exit_timeout=30)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("scheduled 1")
    assert marker.read_text() == "landed"


def test_exit_hook_reports_what_it_could_not_wait_for(tmp_path: Path) -> None:
    marker, proc = _run(tmp_path, delay=5, exit_timeout=0.2)
    assert proc.returncode == 0
    assert not marker.exists()
    assert "1 memory write(s) still pending" in proc.stderr


# memory=True: the embedded mem0 is closed by the last agent's close(), or at exit after the
# pending writes were drained; left to the garbage collector at interpreter teardown, Qdrant
# local mode's finalizer prints "ImportError: sys.meta_path is None".
EMBEDDED = textwrap.dedent(
    """
    import sys, time
    from pathlib import Path
    from retrievalagent import init_agent
    from retrievalagent.memory import MemoryRecord

    rag = init_agent("docs", backend_url=":memory:", data_dir=Path(sys.argv[1]), memory=True)
    if sys.argv[2] == "write":  # a write still pending at exit; the agent is never closed
        fact = '"repository" is called "vault" in these documents'
        record = MemoryRecord(fact, "Where is the repository?", "", "alice")
        rag.background.submit_thread(lambda: (time.sleep(0.5), rag.memory.add(record)))
        print("pending", rag.background.counts()["pending"], flush=True)
    else:  # a later process finds it, and closes its agent
        hits, _ = rag.memory.search("Where is the repository?", "alice", 5)
        print("recalled", [h.text for h in hits], flush=True)
        rag.close()
    """
)


def _embedded(tmp_path: Path, step: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "MEM0_TELEMETRY": "False", "HOME": str(tmp_path / "home")}
    return subprocess.run(
        [sys.executable, "-c", EMBEDDED, str(tmp_path / "data"), step],
        capture_output=True, text=True, timeout=180, env=env, check=False,
    )  # fmt: skip


def test_memory_true_exits_cleanly_and_keeps_the_pending_write(tmp_path: Path) -> None:
    proc = _embedded(tmp_path, "write")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("pending 1")
    assert proc.stderr == ""  # no qdrant-client finalizer traceback, no mem0 extras notes
    proc = _embedded(tmp_path, "read")
    assert proc.returncode == 0, proc.stderr
    assert '"repository" is called "vault"' in proc.stdout  # the exit hook drained it first
    assert proc.stderr == ""


def test_last_agent_closes_the_embedded_mem0(make_agent: Callable[..., Any]) -> None:
    first = make_agent("shared", memory=True)
    second = make_agent("shared", memory=True)
    memory = first.memory.memory
    assert second.memory.memory is memory  # one instance per collection and data dir
    client = memory.vector_store.client
    first.close()
    assert not client._client.closed and memory.db is not None  # still used by second
    fact = record('"x" is called "y" in these documents', user="u")
    second.background.submit_thread(lambda: (time.sleep(0.3), second.memory.add(fact)))
    second.close()  # drains the pending write, then closes mem0
    assert client._client.closed and memory.db is None
    third = make_agent("shared", memory=True)  # the folder is free again: a new instance
    assert third.memory.memory is not memory
    hits, scanned = third.memory.search("x", "u", 5)
    assert scanned == 1 and hits[0].text == fact.fact

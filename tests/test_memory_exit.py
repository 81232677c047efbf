"""No write is lost silently at exit: the exit hook drains, or says what it left behind."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

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

"""The README's first command, ``retrievalagent demo``, in a fresh process."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path


def test_demo_indexes_the_sample_docs_and_answers_with_citations(tmp_path: Path) -> None:
    env = {**os.environ, "RAG_DATA_DIR": str(tmp_path), "COLUMNS": "200"}
    run = subprocess.run(
        [sys.executable, "-m", "retrievalagent", "demo"],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert run.returncode == 0, run.stderr
    out = run.stdout
    assert re.search(r"12 source\(s\): 12 new", out)
    assert "What does error code LF-409 mean?" in out
    assert "locked by another process" in out
    assert re.search(r"\[1\] reference/error-codes\.txt", out)
    assert "no LLM was used" in out
    again = subprocess.run(
        [sys.executable, "-m", "retrievalagent", "demo", "-q", "What is a vault?"],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert again.returncode == 0, again.stderr
    assert "12 unchanged; 0 chunk(s) added" in again.stdout  # the index persisted; nothing redone

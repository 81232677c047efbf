"""Kill ``retrievalagent ingest`` at random moments; after each full run, compare the
collection with a clean ingest.  ``python -m bench.ingest_crash --kills 200``

Corpus: two copies of the package's sample documents (24 Markdown files, ~210 chunks).
Each round edits the folder as a user would (appends a section to 2-6 files, sometimes
removes one and adds one), starts the real CLI with ``RAG_INGEST_WINDOW=8`` (so a file's
chunks span several writes, the case a crash can cut in half), sends SIGKILL or SIGINT
(alternately) a random time after it says "Indexing" (mostly while files are written,
sometimes right at the end, during the final flush and compaction), then runs the CLI to
the end. The collection must then hold exactly what a clean ingest of the folder holds: the same sources, the same chunk
counts, the same chunk texts, no staged chunks left over. A kill counts only if the
process was still running when the signal was sent.

The test suite runs the same harness (``tests/test_ingest_crash.py``: 20 kills under
``CI=true``); results of the long run: ``bench/results/ingest_crash.json``.
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

COLLECTION = "crash"
WINDOW = "8"


@dataclass
class Round:
    """One kill and the full run after it; every list must be empty."""

    signal: str
    delay_s: float
    killed: bool  # the process was still running when the signal was sent
    partial: list[str] = field(default_factory=list)  # sources whose chunks differ
    stale: list[str] = field(default_factory=list)  # sources no longer in the folder
    missing: list[str] = field(default_factory=list)  # files never indexed
    staged: list[str] = field(default_factory=list)  # sources with hidden leftovers
    exit_code: int | None = None  # of the killed process: -9, 130 (Ctrl-C) or 0 (too late)
    said: str = ""  # the last lines it printed on stderr

    @property
    def clean(self) -> bool:
        return not (self.partial or self.stale or self.missing or self.staged)


def _default_sigint() -> None:
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def expected_chunks(folder: Path) -> dict[str, list[str]]:
    """What a clean ingest of ``folder`` indexes: each file's chunk texts, in order."""
    from retrievalagent import Settings
    from retrievalagent.ingest import chunk_sections, expand_inputs

    settings = Settings.load()
    return {
        doc.source: [c.text for c in chunks]
        for doc in expand_inputs(folder)
        if (chunks := chunk_sections(doc.sections(), settings.chunk_size, settings.chunk_overlap))
    }


def indexed_chunks(data_dir: Path, embeddings: Any) -> tuple[dict[str, list[str]], list[str]]:
    """Each visible source's chunk texts in order, and the sources holding staged chunks."""
    from retrievalagent import init_agent

    with init_agent(COLLECTION, data_dir=data_dir, embeddings=embeddings) as rag:
        by_source: dict[str, list[tuple[int, str]]] = {}
        for _, payload in rag.index.chunks():
            by_source.setdefault(payload["source"], []).append(
                (payload["position"], payload["text"])
            )
        staged = sorted(rag.index.sources(staged=True))
        listed = rag.sources()
    texts = {s: [t for _, t in sorted(c)] for s, c in by_source.items()}
    if listed != {s: len(t) for s, t in texts.items()}:
        raise AssertionError("sources() disagrees with the chunks the index holds")
    return texts, staged


class Harness:
    """A corpus folder, a data dir, and the CLI run on them."""

    def __init__(self, workdir: Path, sample_docs: Path, embeddings: Any, seed: int) -> None:
        self.folder = workdir / "corpus"
        self.data_dir = workdir / "data"
        for name in ("one", "two"):
            shutil.copytree(sample_docs, self.folder / name)
        self.embeddings = embeddings
        self.rng = random.Random(seed)
        self.env = {**os.environ, "RAG_INGEST_WINDOW": WINDOW, "MEM0_TELEMETRY": "False"}
        self.startup_s = self.per_file_s = 0.0

    def command(self) -> list[str]:
        return [
            sys.executable, "-m", "retrievalagent", "ingest", str(self.folder),
            "--collection", COLLECTION, "--data-dir", str(self.data_dir),
        ]  # fmt: skip

    def run_to_end(self) -> float:
        started = time.perf_counter()
        done = subprocess.run(
            self.command(), capture_output=True, text=True, timeout=900, env=self.env
        )
        if done.returncode != 0:
            raise RuntimeError(f"ingest failed ({done.returncode}): {done.stderr[-2000:]}")
        return time.perf_counter() - started

    def compare(self, round_: Round) -> Round:
        texts, staged = indexed_chunks(self.data_dir, self.embeddings)
        want = expected_chunks(self.folder)
        round_.partial = sorted(s for s in want if s in texts and texts[s] != want[s])
        round_.stale = sorted(set(texts) - set(want))
        round_.missing = sorted(set(want) - set(texts))
        round_.staged = staged
        return round_

    def start(self) -> Round:
        """The clean ingest every later state is held against; calibrates the delays."""
        clean_s = self.run_to_end()
        first = self.compare(Round("none", 0.0, False))
        self.startup_s = self.run_to_end()  # nothing to do: the cost of starting the CLI
        self.per_file_s = max(clean_s - self.startup_s, 1.0) / max(
            len(expected_chunks(self.folder)), 1
        )
        return first

    def edit(self, round_no: int) -> int:
        """Change a few files as a user would; returns how many need (re)indexing."""
        files = sorted(self.folder.rglob("*.md"))
        changed = self.rng.sample(files, k=min(len(files), self.rng.randint(2, 6)))
        for path in changed:
            path.write_text(
                path.read_text() + f"\n\n## Round {round_no}\n\nEdited in round {round_no}: "
                f"the harbour log gained entry {self.rng.randint(1, 10**6)}.\n"
            )
        if len(files) > 8 and self.rng.random() < 0.5:
            self.rng.choice([f for f in files if f not in changed]).unlink()
        if self.rng.random() < 0.5:
            source = self.rng.choice(changed)
            (source.parent / f"new-{round_no}.md").write_text(source.read_text().upper())
            return len(changed) + 1
        return len(changed)

    def kill_round(self, round_no: int) -> Round:
        work_s = self.edit(round_no) * self.per_file_s
        process = subprocess.Popen(
            self.command(),
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
            env=self.env,
            # a shell's background job ignores SIGINT, and children inherit that: undo it
            preexec_fn=_default_sigint,
        )
        assert process.stderr is not None
        # The CLI says "Indexing ..." once it is about to read the folder: from then on,
        # mostly while files are written, sometimes at the very end (flush, compaction).
        indexing = any("Indexing" in line for line in iter(process.stderr.readline, ""))
        started = time.perf_counter()
        delay = self.rng.uniform(0, work_s * 1.3) if indexing else 0.0
        time.sleep(delay)
        how = (signal.SIGKILL, signal.SIGINT)[round_no % 2]
        killed = process.poll() is None
        if killed:
            process.send_signal(how)
        _, rest = process.communicate(timeout=300)
        self.run_to_end()
        round_ = self.compare(Round(how.name, round(time.perf_counter() - started, 3), killed))
        round_.exit_code = process.returncode
        # what it printed after "Indexing ...", its last lines (a thread's warning at exit
        # may follow the line that says what was finished)
        round_.said = "\n".join(rest.strip().splitlines()[-5:])[-1000:]
        return round_


def run(
    kills: int,
    seed: int,
    workdir: Path,
    sample_docs: Path,
    embeddings: Any,
    every: Callable[[list[Round]], None] | None = None,
) -> list[Round]:
    """Rounds until ``kills`` signals landed on a running ingest (at most 3x as many);
    ``every`` sees the rounds so far after each one."""
    harness = Harness(workdir, sample_docs, embeddings, seed)
    first = harness.start()
    if not first.clean:
        raise AssertionError(f"a clean ingest does not match the folder: {first}")
    rounds: list[Round] = []
    while sum(r.killed for r in rounds) < kills and len(rounds) < 3 * kills:
        rounds.append(harness.kill_round(len(rounds) + 1))
        if every is not None:
            every(rounds)
    return rounds


def main(argv: list[str] | None = None) -> int:
    from bench._common import setup_logging, write_result
    from retrievalagent import sample_docs_path
    from retrievalagent.embeddings import MiniLMEmbeddings

    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--kills", type=int, default=200)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args(argv)
    setup_logging()
    started = time.perf_counter()

    def record(rounds: list[Round]) -> None:
        if len(rounds) % 10 and sum(r.killed for r in rounds) < args.kills:
            return  # every 10 rounds and at the end: a cut-short run still leaves numbers
        landed = [r for r in rounds if r.killed]
        write_result(
            "ingest_crash",
            {
                "corpus": "2 copies of retrievalagent/sample_docs, edited every round",
                "window": int(WINDOW),
                "seed": args.seed,
                "kills_asked": args.kills,
                "rounds": len(rounds),
                "kills": len(landed),
                "by_signal": dict(Counter(r.signal for r in landed)),
                "ctrl_c_reported": sum(r.exit_code == 130 for r in landed),
                "partial_files": sum(len(r.partial) for r in rounds),
                "stale_files": sum(len(r.stale) for r in rounds),
                "missing_files": sum(len(r.missing) for r in rounds),
                "staged_leftovers": sum(len(r.staged) for r in rounds),
                "failed_rounds": [r.__dict__ for r in rounds if not r.clean],
                "minutes": round((time.perf_counter() - started) / 60, 1),
            },
            started,
        )

    with tempfile.TemporaryDirectory(prefix="ingest-crash-") as tmp:
        rounds = run(
            args.kills, args.seed, Path(tmp), Path(sample_docs_path()), MiniLMEmbeddings(), record
        )
    return 1 if any(not r.clean for r in rounds) else 0


if __name__ == "__main__":
    sys.exit(main())

"""Run every benchmark, then render docs/benchmarks.md: ``python -m bench``.

The first run builds the evaluation sets and embeds the 100k-passage scale corpus once
(about an hour on 2 cores); later runs take roughly 40 minutes in all.
"""

from __future__ import annotations

import subprocess
import sys

from bench._common import REPO

STEPS = (
    ["bench.quality"],
    ["bench.eval_sets", "--cached-vectors"],  # the tables of docs/evaluation.md
    ["bench.langchain_compare"],
    ["bench.latency", "--sizes", "1k,10k,100k"],
    ["bench.ingest"],
    ["bench.coldstart"],
    ["bench.ingest_crash", "--kills", "200"],
    ["bench.cost"],
    ["bench.report"],
)


def main() -> int:
    for step in STEPS:
        print(f"== python -m {' '.join(step)}", flush=True)
        code = subprocess.call([sys.executable, "-m", *step], cwd=REPO)
        if code:
            print(f"{step[0]} failed with exit code {code}", file=sys.stderr)
            return code
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

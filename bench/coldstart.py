"""Cold start: a new Python process opens an existing index and answers its first question.

    python -m bench.coldstart                 # the 100k-chunk index, 5 runs
    python -m bench.coldstart --size 10k --runs 3

The clock starts when the parent launches the child interpreter and stops when the
child has the first answer of ``agent.invoke`` (offline mode: no LLM, the packaged
MiniLM model loaded and verified on the way). The child also reports where the time went:
interpreter start + imports, ``init_agent``, and the first ``invoke``. The OS page cache
is warm after the first run (the index files were just read); the benchmark reports
every run, and the first one separately.
"""

from __future__ import annotations

import argparse
import json
import logging
import subprocess
import sys
import time
from typing import Any

from bench import _scale
from bench._common import AGENTS, REPO, median, setup_logging, summary, write_result

log = logging.getLogger("bench.coldstart")

CHILD = r"""
import json, sys, time
t_start = time.time()
from retrievalagent import init_agent
t_import = time.time()
agent = init_agent(sys.argv[1], data_dir=sys.argv[2])
t_init = time.time()
result = agent.invoke(sys.argv[3])
t_answer = time.time()
ok = bool(result.answer) and bool(result.sources)
chunks = agent.count()
agent.close()
print(json.dumps({"t_start": t_start, "t_import": t_import, "t_init": t_init,
                  "t_answer": t_answer, "answered": ok, "chunks": chunks}))
"""


def run_once(collection: str, question: str) -> dict[str, Any]:
    launched = time.time()
    proc = subprocess.run(
        [sys.executable, "-c", CHILD, collection, str(AGENTS), question],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=False,
    )
    if proc.returncode != 0:
        sys.stderr.write(proc.stderr)
        raise SystemExit(f"cold-start child failed ({proc.returncode})")
    t = json.loads(proc.stdout.strip().splitlines()[-1])
    return {
        "to_first_answer_s": round(t["t_answer"] - launched, 3),
        "interpreter_s": round(t["t_start"] - launched, 3),
        "imports_s": round(t["t_import"] - t["t_start"], 3),
        "init_agent_s": round(t["t_init"] - t["t_import"], 3),
        "first_invoke_s": round(t["t_answer"] - t["t_init"], 3),
        "answered": t["answered"],
        "chunks": t["chunks"],
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--size", default="100k", choices=list(_scale.SIZES))
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args(argv)
    setup_logging()
    started = time.perf_counter()
    build = _scale.ensure(args.size)
    questions = _scale.queries(args.runs)
    runs = []
    for i in range(args.runs):
        runs.append(run_once(_scale.collection(args.size), questions[i % len(questions)]))
        log.info("run %d: %s", i + 1, runs[-1])
    total = [r["to_first_answer_s"] for r in runs]
    p50 = median(total)
    results = {
        "size": args.size,
        "chunks": runs[0]["chunks"],
        "build": build,
        "runs": runs,
        "to_first_answer_s": summary(total),
        "parts_median_s": {
            key: round(median(r[key] for r in runs), 3)
            for key in ("interpreter_s", "imports_s", "init_agent_s", "first_invoke_s")
        },
        "targets": {
            "cold_start": {
                "median_s": round(p50, 3),
                "first_run_s": total[0],
                "target_s": 2.0,
                "pass": p50 <= 2.0 and all(r["answered"] for r in runs),
            }
        },
    }
    write_result("coldstart" if args.size == "100k" else f"coldstart-{args.size}", results, started)
    print(json.dumps(results["targets"], indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

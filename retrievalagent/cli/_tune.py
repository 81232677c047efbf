"""``retrievalagent tune TRACE_FILE``: the two memory thresholds, read off real traffic.

With ``RAG_TRACE_FILE`` set, every finished turn appends its trace as one JSON line (see
``TraceLog`` in ``retrievalagent/_threads.py``). This command reads those lines and reports, for each
threshold, what the agent saw:

* relevance (``memory_relevance_threshold``): the ``best_similarity`` of every recall
  (``read_memory`` events, fired or ``below_threshold``): the threshold gates recall by
  meaning only (a fact whose alias the question contains is recalled whatever its
  similarity, preferences always apply), so the alias matches' 1.0 are left out;
* storage (``memory_storage_threshold``): the ``memory_confidence`` of every fact the
  grader proposed (``final_grade`` events with ``memory_worth_storing``).

For each it prints the distribution, how many turns candidate thresholds would let through,
and a suggested value: the middle of the widest gap between observed scores inside a sane
range (scores that cluster apart are the two populations the threshold has to separate),
or the current value when there is too little data or no clear gap.
"""

from __future__ import annotations

import itertools
import json
import math
import statistics
from collections import Counter
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.table import Table

from retrievalagent.cli._common import handle_errors
from retrievalagent.errors import ConfigError

__all__ = ["analyze", "read_trace_file", "suggest", "tune"]

MIN_SAMPLES = 5
CANDIDATES = tuple(round(0.5 + 0.05 * i, 2) for i in range(10))  # 0.50 ... 0.95
RELEVANCE_RANGE = (0.3, 0.95)
STORAGE_RANGE = (0.5, 0.99)


#: The scores ``tune`` reads, by node, and the range each must be in.
_SCORES: dict[str, dict[str, tuple[float, float]]] = {
    "read_memory": {"best_similarity": (-1.0, 1.0), "best_score": (-1.0, 1.0), "threshold": (0, 1)},
    "final_grade": {"memory_confidence": (0.0, 1.0), "storage_threshold": (0.0, 1.0)},
}


def read_trace_file(path: Path) -> tuple[list[dict[str, Any]], int]:
    """The turn records of a trace file and the number of lines that are not turn records
    (a line cut short by a crash, say).

    Raises:
        ConfigError: the file is not UTF-8 text, or a turn holds a score ``tune`` reads
            that is not a number in its range (NaN, a confidence of 1.7): the message
            names the line.
    """
    records, bad = [], 0
    with path.open("rb") as fh:
        for number, raw in enumerate(fh, 1):
            try:
                line = raw.decode("utf-8").removeprefix("\ufeff").strip()
            except UnicodeDecodeError:
                raise ConfigError(
                    f"{path}: line {number} is not UTF-8 text; a trace file (RAG_TRACE_FILE) "
                    "is JSON lines"
                ) from None
            if not line:
                continue
            try:
                record = json.loads(line)
            except json.JSONDecodeError:
                bad += 1
                continue
            if isinstance(record, dict) and isinstance(record.get("trace"), list):
                _check_scores(record["trace"], f"{path}: line {number}")
                records.append(record)
            else:
                bad += 1
    return records, bad


def _check_scores(trace: list[Any], where: str) -> None:
    """Refuse a score that would skew the suggestion: not a number, NaN, out of range."""
    for event in trace:
        if not isinstance(event, dict):
            continue
        for key, (low, high) in _SCORES.get(str(event.get("node")), {}).items():
            value = event.get(key)
            if value is None:
                continue
            number = isinstance(value, int | float) and not isinstance(value, bool)
            if not number or not math.isfinite(value) or not low <= value <= high:
                raise ConfigError(
                    f"{where}: {key} {json.dumps(value)} is not a number from {low:g} to "
                    f"{high:g}; is this a trace file of retrievalagent?"
                )


def _quantiles(values: Sequence[float]) -> dict[str, float | int | None]:
    if not values:
        return {"n": 0, "min": None, "p10": None, "p25": None, "median": None, "p75": None,
                "p90": None, "max": None}  # fmt: skip
    ordered = sorted(values)

    def q(p: float) -> float:
        return round(ordered[min(len(ordered) - 1, int(p * (len(ordered) - 1) + 0.5))], 4)

    return {
        "n": len(ordered),
        "min": round(ordered[0], 4),
        "p10": q(0.1),
        "p25": q(0.25),
        "median": round(statistics.median(ordered), 4),
        "p75": q(0.75),
        "p90": q(0.9),
        "max": round(ordered[-1], 4),
    }


def suggest(
    values: Iterable[float], current: float | None, bounds: tuple[float, float]
) -> tuple[float | None, str]:
    """A threshold in the widest gap between observed scores, and why."""
    low, high = bounds
    inside = sorted(v for v in values if low <= v <= high)
    if len(inside) < MIN_SAMPLES:
        return (
            current,
            f"fewer than {MIN_SAMPLES} scores in [{low}, {high}]; keep the current value",
        )
    gaps = [(b - a, a, b) for a, b in itertools.pairwise(inside)]
    width, a, b = max(gaps)
    if width < 0.05:
        return current, "scores spread evenly (no gap of 0.05 or more); keep the current value"
    value = round((a + b) / 2, 3)
    return value, f"widest gap in the scores: {a:.3f} .. {b:.3f}"


class _Tally:
    """What the trace events of many turns say about the two thresholds."""

    def __init__(self) -> None:
        self.best_scores: list[float] = []
        self.recall: Counter[str] = Counter()
        self.relevance_in_use: Counter[float] = Counter()
        self.proposed: list[float] = []
        self.grades: Counter[str] = Counter()
        self.storage_in_use: Counter[float] = Counter()
        self.writes: Counter[str] = Counter()

    def add(self, event: dict[str, Any]) -> None:
        node = event.get("node")
        if node == "read_memory":
            self.read_memory(event)
        elif node == "final_grade":
            self.final_grade(event)
        elif node == "write_memory":
            self.write_memory(event)

    def read_memory(self, event: dict[str, Any]) -> None:
        fired = event.get("n_kept") and not event.get("skipped")
        if "error" in event:
            self.recall["error"] += 1
        elif fired:
            self.recall["fired"] += 1
        else:
            self.recall[str(event.get("skipped", "?"))] += 1
        best = event.get("best_similarity")
        if isinstance(best, int | float):
            self.best_scores.append(float(best))
        if isinstance(event.get("threshold"), int | float):
            self.relevance_in_use[float(event["threshold"])] += 1

    def final_grade(self, event: dict[str, Any]) -> None:
        self.grades["store" if event.get("memory_should_store") else "not_store"] += 1
        if event.get("memory_worth_storing") or event.get("memory_should_store"):
            self.proposed.append(float(event.get("memory_confidence") or 0.0))
        if isinstance(event.get("storage_threshold"), int | float):
            self.storage_in_use[float(event["storage_threshold"])] += 1

    def write_memory(self, event: dict[str, Any]) -> None:
        if "error" in event:
            self.writes["failed"] += 1
        elif event.get("scheduled"):
            self.writes["scheduled"] += 1
        else:
            self.writes[f"skipped: {event.get('skipped', '?')}"] += 1


def _threshold(
    scores: list[float],
    in_use: Counter[float],
    bounds: tuple[float, float],
    score_name: str,
    events_name: str,
    events: Counter[str],
) -> dict[str, Any]:
    """The report on one threshold: the value in use, the scores, and a suggestion."""
    current = in_use.most_common(1)[0][0] if in_use else None
    value, why = suggest(scores, current, bounds)
    return {
        "current": current,
        score_name: _quantiles(scores),
        events_name: dict(events),
        "pass_at": {str(t): sum(v >= t for v in scores) for t in CANDIDATES},
        "suggested": value,
        "why": why,
    }


def analyze(records: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Everything ``tune`` reports, as plain data."""
    tally = _Tally()
    for record in records:
        for event in record.get("trace") or []:
            tally.add(event)
    return {
        "turns": len(records),
        "relevance": _threshold(
            tally.best_scores,
            tally.relevance_in_use,
            RELEVANCE_RANGE,
            "best_score",
            "recalls",
            tally.recall,
        ),
        "storage": _threshold(
            tally.proposed,
            tally.storage_in_use,
            STORAGE_RANGE,
            "memory_confidence",
            "grades",
            tally.grades,
        ),
        "writes": dict(tally.writes),
    }


def _print(report: dict[str, Any], console: Console) -> None:
    console.print(f"[bold]{report['turns']}[/] turns")
    for key, label, env, score in (
        ("relevance", "memory_relevance_threshold", "RAG_MEMORY_RELEVANCE_THRESHOLD", "best_score"),
        (
            "storage",
            "memory_storage_threshold",
            "RAG_MEMORY_STORAGE_THRESHOLD",
            "memory_confidence",
        ),
    ):
        part = report[key]
        dist = part[score]
        in_use = "not recorded" if part["current"] is None else part["current"]
        console.print(f"\n[bold]{label}[/] ({env}); in use: {in_use}")
        counts = part.get("recalls") or part.get("grades") or {}
        console.print("  events: " + (", ".join(f"{k} {v}" for k, v in counts.items()) or "none"))
        if dist["n"]:
            console.print(
                f"  {score}: n={dist['n']} min={dist['min']} p10={dist['p10']} "
                f"p25={dist['p25']} median={dist['median']} p75={dist['p75']} "
                f"p90={dist['p90']} max={dist['max']}"
            )
            table = Table("threshold", "would pass", show_edge=False)
            for threshold, passed in part["pass_at"].items():
                table.add_row(threshold, f"{passed} / {dist['n']}")
            console.print(table)
        else:
            console.print(f"  no {score} recorded")
        suggested = "none" if part["suggested"] is None else part["suggested"]
        console.print(f"  [bold]suggested: {suggested}[/] ({part['why']})")
    if report["writes"]:
        console.print(
            "\nwrites: " + ", ".join(f"{k} {v}" for k, v in sorted(report["writes"].items()))
        )


def tune(
    trace_file: Annotated[
        Path, typer.Argument(help="A RAG_TRACE_FILE (JSON lines, one finished turn each).")
    ],
    as_json: Annotated[bool, typer.Option("--json", help="Print the report as JSON.")] = False,
) -> None:
    """Suggest memory_relevance_threshold and memory_storage_threshold from a trace file."""
    console = Console()
    with handle_errors():
        report = _report(trace_file)
    if as_json:
        console.print_json(json.dumps(report))
        return
    _print(report, console)
    if report["unreadable_lines"]:
        console.print(f"[yellow]{report['unreadable_lines']} line(s) could not be read[/]")


def _report(trace_file: Path) -> dict[str, Any]:
    """What ``tune`` prints, or a ``ConfigError`` when the file cannot be tuned from."""
    if trace_file.is_dir():
        raise ConfigError(
            f"{trace_file} is a folder; give the trace file itself (RAG_TRACE_FILE, JSON lines)"
        )
    if not trace_file.is_file():
        raise ConfigError(f"no such file: {trace_file}")
    records, bad = read_trace_file(trace_file)
    if not records:
        unread = f" ({bad} line(s) are not turn records)" if bad else ""
        raise ConfigError(
            f"{trace_file} holds no turns{unread}: nothing to tune; set RAG_TRACE_FILE and "
            "let the agent answer some questions first"
        )
    report = analyze(records)
    report["unreadable_lines"] = bad
    if (
        not report["relevance"]["best_score"]["n"]
        and not report["storage"]["memory_confidence"]["n"]
    ):
        raise ConfigError(
            f"nothing to tune: the {len(records)} turns in {trace_file} hold no memory recall "
            "scores and no proposed facts (is long-term memory on?)"
        )
    return report

"""`retrievalagent tune TRACE_FILE`: threshold advice from the trace log."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from langgraph.store.memory import InMemoryStore
from typer.testing import CliRunner

from retrievalagent.cli import app
from retrievalagent.cli._tune import analyze, read_trace_file, suggest
from retrievalagent.memory import MemoryRecord


def _turn(best: float | None, fired: bool, confidence: float, worth: bool) -> dict[str, Any]:
    read: dict[str, Any] = {"node": "read_memory", "threshold": 0.7, "n_scanned": 3,
                            "best_score": best, "best_similarity": best}  # fmt: skip
    if fired:
        read.update({"memories": "- x", "n_kept": 1})
    else:
        read.update({"memories": "", "n_kept": 0, "skipped": "below_threshold"})
    grade = {"node": "final_grade", "sufficient": True, "confidence": 0.9,
             "memory_should_store": worth and confidence >= 0.85,
             "memory_confidence": confidence, "memory_worth_storing": worth,
             "storage_threshold": 0.85}  # fmt: skip
    return {"trace": [read, grade, {"node": "write_memory", "skipped": "not_worth_storing"}]}


def test_suggest_finds_the_gap_between_two_clusters() -> None:
    value, why = suggest([0.62, 0.64, 0.65, 0.66, 0.2, 0.25, 0.3, 0.31], 0.7, (0.3, 0.95))
    assert value is not None and 0.31 < value < 0.62 and "gap" in why
    assert suggest([0.5, 0.6], 0.7, (0.3, 0.95))[0] == 0.7  # too little data: keep


def test_analyze_counts_and_suggests() -> None:
    records = [_turn(s, False, 0.0, False) for s in (0.62, 0.63, 0.64, 0.65, 0.66)]
    records += [_turn(s, False, 0.0, False) for s in (0.31, 0.33, 0.35)]
    records += [_turn(0.9, True, c, True) for c in (0.95, 0.93, 0.6, 0.62, 0.58)]
    report = analyze(records)
    rel, sto = report["relevance"], report["storage"]
    assert report["turns"] == 13
    assert rel["current"] == 0.7 and rel["recalls"] == {"below_threshold": 8, "fired": 5}
    assert rel["best_score"]["n"] == 13 and rel["pass_at"]["0.6"] == 10
    assert 0.35 < rel["suggested"] < 0.62  # lower the bar so the 0.62..0.66 recalls pass
    assert sto["memory_confidence"]["n"] == 5 and sto["pass_at"]["0.85"] == 2
    assert 0.62 < sto["suggested"] < 0.93
    assert report["writes"] == {"skipped: not_worth_storing": 13}


def test_tune_command_on_a_real_trace_file(
    make_agent: Callable[..., Any], sample_docs: Path, tmp_path: Path
) -> None:
    trace_file = tmp_path / "trace.jsonl"
    rag = make_agent("tune", memory_store=InMemoryStore(), trace_file=trace_file)
    rag.add_documents(sample_docs, progress=False)
    rag.memory.add(MemoryRecord('"password" is called "passphrase" in these documents',
                                "Which environment variable can hold the encryption password?",
                                "", "default"))  # fmt: skip
    for question in (
        "Which environment variable can hold the encryption password?",
        "What is the minimum glibc version required on Linux?",
        "How can I throttle the traffic Lanternfish sends to a peer?",
    ):
        rag.invoke(question)
    rag.drain_background()
    records, bad = read_trace_file(trace_file)
    assert len(records) == 3 and bad == 0
    with trace_file.open("a") as fh:
        fh.write("not json\n")
    result = CliRunner().invoke(app, ["tune", str(trace_file), "--json"])
    assert result.exit_code == 0, result.output
    report = json.loads(result.output)
    assert report["turns"] == 3 and report["unreadable_lines"] == 1
    assert report["relevance"]["recalls"]["fired"] >= 1
    assert report["relevance"]["best_score"]["n"] == 3
    assert report["storage"]["memory_confidence"]["n"] >= 1
    text = CliRunner().invoke(app, ["tune", str(trace_file)])
    assert text.exit_code == 0 and "memory_relevance_threshold" in text.output
    assert "suggested" in text.output
    missing = CliRunner().invoke(app, ["tune", str(tmp_path / "nope.jsonl")])
    assert missing.exit_code == 1


def _tune(path: Path) -> Any:
    return CliRunner().invoke(app, ["tune", str(path)])


def test_a_trace_file_that_is_not_utf8_is_a_clear_error(tmp_path: Path) -> None:
    path = tmp_path / "trace.jsonl"
    path.write_bytes(json.dumps(_turn(0.8, True, 0.9, True)).encode() + b"\n\xff\xfe caf\xe9\n")
    result = _tune(path)
    assert result.exit_code == 1
    assert "not UTF-8" in result.output and "line 2" in result.output
    assert result.exception is None or isinstance(result.exception, SystemExit)


def test_a_folder_is_not_called_a_missing_file(tmp_path: Path) -> None:
    result = _tune(tmp_path)
    assert result.exit_code == 1
    assert "is a folder" in result.output and "no such file" not in result.output


def test_an_empty_trace_file_says_there_is_nothing_to_tune(tmp_path: Path) -> None:
    path = tmp_path / "trace.jsonl"
    path.write_text("")
    result = _tune(path)
    assert result.exit_code == 1
    assert "no turns" in result.output and "None" not in result.output
    turns = tmp_path / "no-memory.jsonl"  # turns of an agent without memory: nothing to read
    turns.write_text(json.dumps({"trace": [{"node": "generate"}]}) + "\n")
    result = _tune(turns)
    assert result.exit_code == 1 and "nothing to tune" in result.output
    assert "None" not in result.output


def test_nan_and_out_of_range_scores_are_refused(tmp_path: Path) -> None:
    good = [json.dumps(_turn(0.8, True, 0.9, True)) for _ in range(3)]
    for key, value, shown in (
        ("memory_confidence", "NaN", "NaN"),
        ("memory_confidence", "1.7", "1.7"),
        ("best_score", "-3", "-3"),
        ("memory_confidence", '"high"', '"high"'),
    ):
        bad = good[0].replace(f'"{key}": 0.9' if key == "memory_confidence" else
                              f'"{key}": 0.8', f'"{key}": {value}')  # fmt: skip
        assert bad != good[0]
        path = tmp_path / "trace.jsonl"
        path.write_text("\n".join([*good, bad]) + "\n")
        result = _tune(path)
        assert result.exit_code == 1, result.output
        text = " ".join(result.output.split())
        assert f"line 4: {key} {shown}" in text, text

"""The trace is typed: every key a turn's events carry is declared, and documented, in
``retrievalagent.trace`` (the tracing docs' table is generated from it)."""

from __future__ import annotations

from typing import Any

import pytest

from retrievalagent.trace import EVENTS, fields
from tests.support.trace import every_event_kind, undeclared

pytestmark = pytest.mark.timeout(300)


@pytest.fixture(scope="module")
def events(minilm: Any, tmp_path_factory: pytest.TempPathFactory) -> list[dict[str, Any]]:
    """The events of real turns that leave every kind of event (see tests/support/trace.py)."""
    return every_event_kind(minilm, tmp_path_factory.mktemp("trace"))


def test_the_turns_leave_every_kind_of_event(events: list[dict[str, Any]]) -> None:
    assert {e["node"] for e in events} == set(EVENTS)
    by = lambda node, key: [e[key] for e in events if e["node"] == node and key in e]  # noqa: E731
    assert "error" in by("read_memory", "skipped") and by("read_memory", "time")
    assert "no_memory_backend" in by("read_memory", "skipped")
    assert by("rerank", "moved") and by("rerank", "fallback") == ["fused_order"]
    assert by("generate", "fallback") == ["separate"] and by("final_grade", "memory_fact_rejected")
    assert "conservative" in by("final_grade", "fallback") and by("rewrite", "error")
    assert by("write_memory", "late") and by("write_memory", "scheduled")
    assert {"already_known", "no_memory_backend"} <= set(by("write_memory", "skipped"))
    assert any(c.get("scheduled") for c in by("write_memory", "conversation"))


def test_every_key_a_turn_emits_is_declared(events: list[dict[str, Any]]) -> None:
    found = sorted({key for event in events for key in undeclared(event)})
    assert found == [], f"trace keys declared nowhere in retrievalagent.trace: {found}"


def test_every_declared_key_is_documented() -> None:
    for node, event_type in EVENTS.items():
        for field in fields(event_type):
            assert field.key == "node" or field.doc, f"{node}.{field.key} has no description"

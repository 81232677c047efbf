"""A process that recalls a user's conversation memory holds each memory once, however
often other agents write (issue 21, scale): the index it ranks in stays the size of what
is stored, so recall does not slow down or grow after an import."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from langgraph.store.memory import InMemoryStore

USER = "alice"
HISTORY = [
    {"role": "user", "content": f"note {i}: the spare key for shed {i} hangs on hook {i + 3}"}
    for i in range(70)
]


def _rows(agent: Any) -> tuple[int, int]:
    """Memories the agent's process holds for USER, and the rows its index scans."""
    index = agent.memory.conversations.get(USER)
    return len(index), len(index._rows.keys)


def test_a_write_by_another_agent_adds_only_what_is_new(
    make_agent: Callable[..., Any],
) -> None:
    store = InMemoryStore()
    writer = make_agent("writer", memory_store=store)
    reader = make_agent("reader", memory_store=store)  # as another process would
    writer.remember(HISTORY[:20], user_id=USER, thread_id="notes")
    assert reader.recall("where is the key for shed 3?", user_id=USER)
    assert _rows(reader) == (20, 20)
    said = [{"role": "user", "content": "I moved the backups to the NAS in the garage."}]
    writer.remember(said, user_id=USER, thread_id="backups")
    found = reader.recall("where are my backups now?", user_id=USER)
    assert "NAS in the garage" in found[0]["text"]
    assert _rows(reader) == (21, 21)  # the 20 it held were read back, not added again


def test_importing_a_history_again_and_again_keeps_the_index_small(
    make_agent: Callable[..., Any],
) -> None:
    store = InMemoryStore()
    writer = make_agent("writer", memory_store=store)
    reader = make_agent("reader", memory_store=store)
    when = {"user_id": USER, "thread_id": "notes", "at": "2025-03-01T10:00:00Z"}
    writer.remember(HISTORY, **when)
    assert reader.recall("which hook holds the key for shed 9?", user_id=USER)
    for n in range(4):  # each import rewrites the same 70 memories
        writer.remember(HISTORY, **when)
        assert reader.recall(f"which hook holds the key for shed {n}?", user_id=USER)
    held, scanned = _rows(reader)
    assert held == len(HISTORY)
    assert scanned <= 2 * len(HISTORY)  # replaced rows are compacted away

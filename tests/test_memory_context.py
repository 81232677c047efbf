"""What recall counts as "said just before" a conversation memory (``memory._hybrid``).

A follow-up ranks by the exchange before it in its conversation. The index keeps that link
up as memories arrive and rebuilds it when one arrives out of order or is removed; either
way it must be the exchange said just before, by time, write and place, among the memories
still held, and never a fact, a memory stored without its place, or a memory of another
conversation.
"""

from __future__ import annotations

import itertools
import random

import numpy as np
import pytest

from retrievalagent.index import LexicalEncoder
from retrievalagent.memory._hybrid import UserIndex, memory_fuser


def said_before(index: UserIndex, values: dict[str, dict[str, object]]) -> dict[str, str]:
    """The reference: per held exchange stored with its place, the key of the one said
    just before it (by time, then write, then place, then the order stored)."""
    order: dict[str, list[tuple[str, int, int, int, str]]] = {}
    for key, value in values.items():
        thread, place, written = value["thread_id"], value.get("place"), value["written_us"]
        if thread and value["form"] == "exchange" and isinstance(place, int):
            assert isinstance(thread, str) and isinstance(written, int)
            row = index._row_of[key]
            order.setdefault(thread, []).append((str(value["at"]), written, place, row, key))
    out = {}
    for rows in order.values():
        rows.sort()
        out.update({later[4]: earlier[4] for earlier, later in itertools.pairwise(rows)})
    return out


@pytest.mark.parametrize("seed", range(20))
def test_the_exchange_before_each_memory_is_the_one_said_before_it(seed: int) -> None:
    rng = random.Random(seed)
    index = UserIndex(LexicalEncoder())
    held: dict[str, dict[str, object]] = {}
    for step in range(60):
        key = f"m{rng.randrange(40)}"
        if rng.random() < 0.15:
            index.delete([key])
            held.pop(key, None)
        else:
            value: dict[str, object] = {
                "text": "said",
                "thread_id": rng.choice(["a", "b", "c", ""]),
                "at": f"2026-01-0{rng.randint(1, 4)}T10:00:00",
                "written_us": rng.randrange(3),
                "form": rng.choice(["exchange", "exchange", "exchange", "fact"]),
            }
            if rng.random() < 0.9:  # memories stored before places were kept have none
                value["place"] = rng.randrange(4)
            index.upsert(key, value, np.ones(4, dtype=np.float32))
            held[key] = value
        before = index._previous()
        got = {
            k: index._rows.keys[before[index._row_of[k]]]
            for k in held
            if before[index._row_of[k]] >= 0
        }
        assert got == said_before(index, held), (seed, step)


def test_a_number_no_int64_holds_leaves_the_memory_unlinked_not_the_user_unreadable() -> None:
    """A ``place`` or ``written_us`` a store hands back out of range (or of another type)
    leaves that memory unlinked; the user's other memories still link and search."""
    index = UserIndex(LexicalEncoder())
    odd: list[object] = [2**70, -1, 1.5, True, "1", None]
    for n, place in enumerate([0, 1, *odd]):
        value = {"text": f"said {n}", "thread_id": "t", "at": "2026-01-05", "form": "exchange"}
        value |= {"place": place, "written_us": -(2**70) if n == 3 else 7}
        index.upsert(f"m{n}", value, np.ones(4, dtype=np.float32))
    index.delete(["m7"])  # a removal makes the next search rebuild the links
    before = index._previous()
    assert before[index._row_of["m1"]] == index._row_of["m0"]
    assert all(before[index._row_of[f"m{n}"]] == -1 for n in (2, 3, 4, 5, 6))
    assert index.search("said", np.ones(4, dtype=np.float32), memory_fuser(), 10)

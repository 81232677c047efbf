"""The conversation-memory development set (issue 21) and the rules its bench relies on.

The shipped set must be sound and match its specs; the checker must catch each kind of
broken question; the builder must number turns and resolve labels as documented; memory
units and evidence recall must follow the bench's definitions. All on data in the repo or
made here: no model, no network, well under a second.
"""

from __future__ import annotations

import copy
from collections import Counter
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

from bench.memory.build_conversations import SpecError, build, parse
from bench.memory.conversation_bench import evidence_recall, rrf
from bench.memory.conversations import QUESTION_TYPES, load, problems, units, with_haystack


@pytest.fixture(scope="module")
def data() -> dict[str, Any]:
    return load()


def test_shipped_set_is_sound_and_matches_its_specs(data: dict[str, Any]) -> None:
    assert problems(data) == []
    assert build() == data, (
        "conversations.json is stale: run python -m bench.memory.build_conversations"
    )


def test_shipped_set_has_the_size_and_mix_the_bench_needs(data: dict[str, Any]) -> None:
    users = data["users"]
    assert len(users) >= 16
    assert Counter(u["split"] for u in users) == {
        "dev": len(users) // 2,
        "heldout": len(users) // 2,
    }
    # each version of the set added as many people to each half
    added = Counter((u["added"], u["split"]) for u in users)
    assert all(added[(version, "dev")] == added[(version, "heldout")] for version, _ in added)
    for user in users:
        sessions = user["sessions"]
        assert 6 <= len(sessions) <= 10, user["user_id"]
        assert all(6 <= len(s["messages"]) <= 16 for s in sessions), user["user_id"]
        first, last = (datetime.fromisoformat(sessions[i]["at"]) for i in (0, -1))
        assert 55 <= (last - first).days <= 190, user["user_id"]  # two to six months
        assert len(user["questions"]) >= 12, user["user_id"]
        others = {
            m["name"]
            for s in sessions
            for m in s["messages"]
            if m.get("name", user["name"]) != user["name"]
        }
        assert others, f"{user['user_id']} never talks with anyone else"
    types = Counter(q["type"] for u in users for q in u["questions"])
    assert sum(types.values()) >= 200
    assert set(types) == set(QUESTION_TYPES)
    assert max(types.values()) <= 2 * min(types.values())  # roughly even


def _first_question(data: dict[str, Any], uid: str = "maya") -> dict[str, Any]:
    return next(u for u in data["users"] if u["user_id"] == uid)["questions"][0]


def test_checker_names_each_broken_question(data: dict[str, Any]) -> None:
    broken = copy.deepcopy(data)
    q = _first_question(broken)
    q["evidence"] = ["maya-s99-01", "dana-s01-01"]
    found = problems(broken)
    assert any("maya-s99-01 is no turn of the set" in p for p in found)
    assert any("dana-s01-01 belongs to user dana, not maya" in p for p in found)

    early = copy.deepcopy(data)
    q = _first_question(early)
    q["asked_at"] = "2024-02-01T12:00:00+01:00"  # before any of maya's sessions
    found = problems(early)
    assert "question maya-q01: asked_at is not after the user's last session" in found
    assert f"question maya-q01: evidence {q['evidence'][0]} is not before asked_at" in found


def test_checker_finds_duplicates_missing_split_and_missing_types(data: dict[str, Any]) -> None:
    broken = copy.deepcopy(data)
    maya = next(u for u in broken["users"] if u["user_id"] == "maya")
    maya["sessions"][1]["messages"][0]["metadata"]["turn"] = "maya-s01-01"
    maya["questions"][1]["asked_at"] = maya["questions"][0]["asked_at"]
    found = problems(broken)
    assert "turn maya-s01-01 occurs 2 times" in found
    assert any(p.startswith("asked_at ") and "of user maya occurs 2 times" in p for p in found)

    unsplit = copy.deepcopy(data)
    unsplit["users"][0]["split"] = None
    assert any("split None is not one of" in p for p in problems(unsplit))

    no_speaker = copy.deepcopy(data)
    for user in no_speaker["users"]:
        if user["split"] == "heldout":
            user["questions"] = [q for q in user["questions"] if q["type"] != "speaker"]
    assert "split heldout: no question of type speaker" in problems(no_speaker)


SPEC = """user: zoe
name: Zoe
split: dev
timezone: Europe/Paris
about: a test person

## 2024-03-30 10:00 | winter time
U#mine: my cat is called Pompon
A: A lovely name.
A: Truly.

## 2024-04-02 09:30 | shared, summer time
>Ben#bens: I fixed the router
U: thanks Ben
line two of Zoe's message

## questions
? speaker bens @2024-05-01 08:00 | Who fixed the router? | Ben
? paraphrase mine | What is my pet's name? | Pompon
"""


def test_builder_numbers_turns_names_speakers_and_dates_by_zone(tmp_path: Path) -> None:
    spec = tmp_path / "zoe.txt"
    spec.write_text(SPEC)
    user = parse(spec)
    first, shared = user["sessions"]
    assert first["at"] == "2024-03-30T10:00:00+01:00"
    assert shared["at"] == "2024-04-02T09:30:00+02:00"  # after the switch to summer time
    assert [m["metadata"]["turn"] for m in first["messages"]] == [
        "zoe-s01-01",
        "zoe-s01-02",
        "zoe-s01-03",
    ]
    assert "name" not in first["messages"][0]  # a one-to-one session names nobody
    assert [m.get("name") for m in shared["messages"]] == ["Ben", "Zoe"]
    assert shared["messages"][1]["content"] == "thanks Ben\nline two of Zoe's message"
    speaker_q, paraphrase_q = user["questions"]
    assert speaker_q["evidence"] == ["zoe-s02-01"]
    assert speaker_q["asked_at"] == "2024-05-01T08:00:00+02:00"
    assert paraphrase_q["evidence"] == ["zoe-s01-01"]
    assert paraphrase_q["asked_at"] > shared["at"]


def test_builder_records_the_version_that_added_a_person(tmp_path: Path) -> None:
    spec = tmp_path / "zoe.txt"
    spec.write_text(SPEC)
    assert parse(spec)["added"] == 1  # the first version's people carry no header
    spec.write_text(SPEC.replace("split: dev", "split: dev\nadded: 2"))
    assert parse(spec)["added"] == 2
    spec.write_text(SPEC.replace("split: dev", "split: dev\nadded: two"))
    with pytest.raises(SpecError, match="'added' is not a version number: 'two'"):
        parse(spec)


def test_builder_refuses_an_unknown_label_with_file_and_line(tmp_path: Path) -> None:
    spec = tmp_path / "zoe.txt"
    spec.write_text(SPEC.replace("? paraphrase mine", "? paraphrase mien"))
    with pytest.raises(SpecError, match=r"zoe.txt:19: unknown label\(s\) mien"):
        parse(spec)


def test_units_start_at_each_non_assistant_message(tmp_path: Path) -> None:
    spec = tmp_path / "zoe.txt"
    spec.write_text(SPEC)
    cut = units(parse(spec))
    assert [u.turns for u in cut] == [
        ("zoe-s01-01", "zoe-s01-02", "zoe-s01-03"),
        ("zoe-s02-01",),
        ("zoe-s02-02",),
    ]
    assert (
        cut[0].text == "Zoe: my cat is called Pompon\nAssistant: A lovely name.\nAssistant: Truly."
    )
    assert cut[1].text.startswith("Ben: I fixed")


def test_evidence_recall_counts_turns_covered_by_the_top_k_hits() -> None:
    hits = [("a", "b"), ("c",), ("d", "e")]
    assert evidence_recall(["b", "e"], hits, k=2) == 0.5
    assert evidence_recall(["b", "e"], hits, k=3) == 1.0
    assert evidence_recall(["x"], hits, k=3) == 0.0
    assert rrf([("a",), ("b",)], [("b",), ("c",)])[0] == ("b",)


def test_haystack_pads_each_history_with_whole_conversations_of_its_own_split(
    data: dict[str, Any],
) -> None:
    before = copy.deepcopy(data)
    padded = with_haystack(data, 30)
    assert data == before  # the set itself is left alone
    assert problems(padded) == []  # order, ids and evidence still hold
    assert padded == with_haystack(data, 30)  # the same haystack every run
    by_id = {u["user_id"]: u for u in data["users"]}
    for user in padded["users"]:
        own = by_id[user["user_id"]]
        assert user["questions"] == own["questions"]
        own_threads = {s["thread_id"] for s in own["sessions"]}
        extra = [s for s in user["sessions"] if s["thread_id"] not in own_threads]
        assert len(extra) == user["haystack"] == 30
        # each distractor is a whole conversation another person of the split had
        others = {
            tuple(m["content"] for m in s["messages"])
            for o in data["users"]
            if o["split"] == own["split"] and o["user_id"] != own["user_id"]
            for s in o["sessions"]
        }
        mine = {tuple(m["content"] for m in s["messages"]) for s in own["sessions"]}
        for session in extra:
            said = tuple(m["content"] for m in session["messages"])
            assert said in others and said not in mine
        # dated inside the user's history: after its first session, before any question
        first = min(datetime.fromisoformat(s["at"]) for s in own["sessions"])
        asked = min(datetime.fromisoformat(q["asked_at"]) for q in own["questions"])
        assert all(first < datetime.fromisoformat(s["at"]) < asked for s in extra)
        # a distractor's turn never is, nor looks like, a question's evidence
        evidence = {t for q in own["questions"] for t in q["evidence"]}
        turns = {m["metadata"]["turn"] for s in extra for m in s["messages"]}
        assert not turns & evidence
        assert all(t.startswith(f"{own['user_id']}-h") for t in turns)


def test_haystack_takes_what_the_split_has_and_refuses_a_negative_size(
    data: dict[str, Any],
) -> None:
    padded = with_haystack(data, 10_000)
    for user in padded["users"]:
        available = sum(
            len(o["sessions"])
            for o in data["users"]
            if o["split"] == user["split"] and o["user_id"] != user["user_id"]
        )
        assert user["haystack"] == available
    unpadded = with_haystack(data, 0)
    assert [u["sessions"] for u in unpadded["users"]] == [u["sessions"] for u in data["users"]]
    with pytest.raises(ValueError, match="sessions must be >= 0"):
        with_haystack(data, -1)


def test_length_sweep_batches_conversations_of_the_length_asked() -> None:
    from bench.memory.conversation_scale import said_texts
    from bench.memory.remember_length import _batches

    for length in (10, 40):
        batches = _batches(length, 3, 120)
        assert len(batches) == 3 and all(batches)
        convs = [c for b in batches for c in b]
        # every conversation but the generator's last has exactly the messages asked for
        assert {len(c["messages"]) for c in convs[:-1]} == {length}
        assert len({c["thread_id"] for c in convs}) == len(convs)
        # each batch holds about the texts asked for: it closes at the first conversation
        # that takes it to them
        for batch in batches[:-1]:
            texts = [len(said_texts(c)) for c in batch]
            assert sum(texts) >= 120 > sum(texts[:-1])

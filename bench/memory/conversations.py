"""The conversation-memory development set: loading, checking, and cutting it into memory units.

The set lives in ``bench/memory/data/conversations.json`` (built from the hand-written specs
in ``bench/memory/data/specs/`` by ``python -m bench.memory.build_conversations``; the format
is described in ``bench/memory/data/README.md``). This module is what the harness and the
tests read it through:

* :func:`load` reads the file;
* :func:`problems` lists everything wrong with it (empty when it is sound): ids unique,
  every evidence turn exists, belongs to the asking user and precedes the question, every
  user has a split, and every question type occurs in both halves;
* :func:`units` cuts one user's sessions into memory units: a unit starts at each message
  whose role is not ``assistant``, and the assistant messages after it join it;
* :func:`with_haystack` gives each user a longer history: other people's conversations,
  taken whole, as distractors (see there why).
"""

from __future__ import annotations

import copy
import json
import random
from collections import Counter
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

__all__ = [
    "DATA",
    "QUESTION_TYPES",
    "SPLITS",
    "Unit",
    "load",
    "problems",
    "speaker",
    "units",
    "with_haystack",
]

DATA = Path(__file__).resolve().parent / "data" / "conversations.json"
QUESTION_TYPES = ("paraphrase", "exact", "multi", "temporal", "update", "speaker")
SPLITS = ("dev", "heldout")
ROLES = ("user", "assistant")


@dataclass(frozen=True)
class Unit:
    """One memory unit: a non-assistant message and the assistant replies that follow it."""

    user_id: str
    thread_id: str
    at: str
    turns: tuple[str, ...]
    text: str


def load(path: Path = DATA) -> dict[str, Any]:
    """The data set as stored (``{"users": [...], ...}``)."""
    data: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    return data


def speaker(user: dict[str, Any], message: dict[str, Any]) -> str:
    """Who said ``message``: its ``name``, else the user's name or ``Assistant``."""
    if message.get("name"):
        return str(message["name"])
    return "Assistant" if message["role"] == "assistant" else str(user["name"])


def units(user: dict[str, Any]) -> list[Unit]:
    """The user's memory units, in conversation order, each text prefixed by its speakers."""
    out: list[Unit] = []
    for session in user["sessions"]:
        turns: list[str] = []
        lines: list[str] = []
        for message in session["messages"]:
            if message["role"] != "assistant" and turns:
                out.append(_unit(user, session, turns, lines))
                turns, lines = [], []
            turns.append(message["metadata"]["turn"])
            lines.append(f"{speaker(user, message)}: {message['content']}")
        if turns:
            out.append(_unit(user, session, turns, lines))
    return out


def _unit(
    user: dict[str, Any], session: dict[str, Any], turns: list[str], lines: list[str]
) -> Unit:
    return Unit(
        user["user_id"], session["thread_id"], session["at"], tuple(turns), "\n".join(lines)
    )


def with_haystack(data: dict[str, Any], sessions: int, *, seed: str = "haystack") -> dict[str, Any]:
    """``data`` with each user's history padded by up to ``sessions`` conversations of the
    other people of the same split, taken whole, as distractors.

    The set gives each person about ten sessions: at k = 10 every retriever is then near
    its ceiling, and the set cannot show what fusion and the time window are worth to a
    user with a long history, whose memory mostly holds conversations about other things.
    The distractors are real conversations of the set (coherent, with their own people,
    numbers and dates in them), so they compete as a user's other chats do; they come from
    the same split only, so the dev half never holds held-out text. Each is re-dated to a
    random time inside the user's own history (after its first session, before its first
    question), and its turns and thread renamed ``<user>-h<nnn>...``: no question's
    evidence changes, and a distractor can never count as evidence. ``data`` is not changed.
    """
    if sessions < 0:
        raise ValueError(f"sessions must be >= 0, got {sessions}")
    out = copy.deepcopy(data)
    originals = copy.deepcopy(data["users"])
    for user in out["users"]:
        uid = user["user_id"]
        rng = random.Random(f"{seed}:{uid}")
        others = [
            session
            for other in originals
            if other["split"] == user["split"] and other["user_id"] != uid
            for session in other["sessions"]
        ]
        picked = rng.sample(others, min(sessions, len(others)))
        first = min(datetime.fromisoformat(s["at"]) for s in user["sessions"])
        until = min(datetime.fromisoformat(q["asked_at"]) for q in user["questions"])
        taken = {datetime.fromisoformat(s["at"]) for s in user["sessions"]}
        extra = []
        for j, session in enumerate(picked):
            at = first
            while at in taken:  # sessions are strictly ordered in time
                at = first + timedelta(seconds=int(rng.uniform(1, (until - first).total_seconds())))
            taken.add(at)
            thread = f"{uid}-h{j:03d}"
            messages = [
                {**m, "metadata": {**(m.get("metadata") or {}), "turn": f"{thread}-{k:02d}"}}
                for k, m in enumerate(session["messages"], start=1)
            ]
            extra.append(
                {**session, "thread_id": thread, "at": at.isoformat(), "messages": messages}
            )
        user["sessions"] = sorted(
            user["sessions"] + extra, key=lambda s: datetime.fromisoformat(s["at"])
        )
        user["haystack"] = len(extra)
    out["haystack"], out["haystack_seed"] = sessions, seed
    return out


def problems(data: dict[str, Any]) -> list[str]:
    """Everything wrong with ``data`` as a list of sentences (empty when it is sound)."""
    found: list[str] = []
    turn_owner: dict[str, tuple[str, datetime]] = {}
    ids: Counter[str] = Counter()
    types_by_split: dict[str, set[str]] = {split: set() for split in SPLITS}
    for user in data.get("users", []):
        uid = user.get("user_id", "?")
        ids[f"user {uid}"] += 1
        if user.get("split") not in SPLITS:
            found.append(f"user {uid}: split {user.get('split')!r} is not one of {SPLITS}")
        last = _user_sessions(user, found, ids, turn_owner)
        for q in user.get("questions", []):
            _check_question(uid, q, last, turn_owner, found)
            ids[f"question {q.get('id')}"] += 1
            ids[f"asked_at {q.get('asked_at')} of user {uid}"] += 1
            if user.get("split") in SPLITS:
                types_by_split[user["split"]].add(q.get("type"))
    found += [f"{what} occurs {n} times" for what, n in ids.items() if n > 1]
    for split, seen in types_by_split.items():
        missing = [t for t in QUESTION_TYPES if t not in seen]
        if missing:
            found.append(f"split {split}: no question of type {', '.join(missing)}")
    return found


def _user_sessions(
    user: dict[str, Any],
    found: list[str],
    ids: Counter[str],
    turn_owner: dict[str, tuple[str, datetime]],
) -> datetime | None:
    """Record the user's turns (owner and time); return the time of the last session."""
    uid = user.get("user_id", "?")
    last: datetime | None = None
    for session in user.get("sessions", []):
        ids[f"thread {session.get('thread_id')}"] += 1
        at = _when(session.get("at"))
        if at is None:
            found.append(
                f"session {session.get('thread_id')}: 'at' is not an ISO datetime with a zone"
            )
            continue
        if last is not None and at <= last:
            found.append(f"session {session.get('thread_id')}: not after the session before it")
        last = at
        for message in session.get("messages", []):
            turn = (message.get("metadata") or {}).get("turn")
            if not turn:
                found.append(f"session {session.get('thread_id')}: a message has no metadata.turn")
                continue
            ids[f"turn {turn}"] += 1
            turn_owner[turn] = (uid, at)
            if message.get("role") not in ROLES:
                found.append(f"turn {turn}: role {message.get('role')!r} is not one of {ROLES}")
            if not str(message.get("content", "")).strip():
                found.append(f"turn {turn}: empty content")
    return last


def _check_question(
    uid: str,
    q: dict[str, Any],
    last: datetime | None,
    turn_owner: dict[str, tuple[str, datetime]],
    found: list[str],
) -> None:
    qid = q.get("id", "?")
    asked = _when(q.get("asked_at"))
    if q.get("type") not in QUESTION_TYPES:
        found.append(f"question {qid}: type {q.get('type')!r} is not one of {QUESTION_TYPES}")
    if not q.get("question") or not q.get("answer"):
        found.append(f"question {qid}: question or answer is empty")
    if asked is None:
        found.append(f"question {qid}: asked_at is not an ISO datetime with a zone")
        return
    if last is not None and asked <= last:
        found.append(f"question {qid}: asked_at is not after the user's last session")
    if not q.get("evidence"):
        found.append(f"question {qid}: no evidence")
    for turn in q.get("evidence", []):
        owner = turn_owner.get(turn)
        if owner is None:
            found.append(f"question {qid}: evidence {turn} is no turn of the set")
        elif owner[0] != uid:
            found.append(f"question {qid}: evidence {turn} belongs to user {owner[0]}, not {uid}")
        elif owner[1] >= asked:
            found.append(f"question {qid}: evidence {turn} is not before asked_at")


def _when(value: Any) -> datetime | None:
    try:
        at = datetime.fromisoformat(str(value))
    except ValueError:
        return None
    return at if at.tzinfo is not None else None

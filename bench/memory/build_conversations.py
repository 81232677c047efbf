"""Assemble the conversation-memory set from its hand-written specs.  ``python -m bench.memory.build_conversations``

Each file ``bench/memory/data/specs/<user>.txt`` holds one user: a few ``key: value`` header
lines (``user``, ``name``, ``split``, ``timezone`` as an IANA zone, ``about``, and
``added``, the version of the set that added the person, 1 when absent), then one
``## YYYY-MM-DD HH:MM | title`` block per session (local time of the user), then a
``## questions`` block. Inside a session each message starts with its speaker:

* ``U:`` the user, ``A:`` the assistant, ``>Name:`` another person (role ``user`` with that
  ``name``; in such a shared session the user's own messages carry the user's name too);
* ``U#label:`` (any speaker) gives the message a label that questions cite as evidence;
* a line without a speaker continues the message above it (lists, paragraphs).

A question line reads ``? type label [label ...] [@YYYY-MM-DD HH:MM] | question | answer``.
Questions without ``@`` are asked at distinct times after the user's last session.
Lines starting with ``//`` are notes for the writer and are dropped.

The builder only numbers turns, resolves labels to turn ids and dates everything; the words
are the specs' own. It refuses a spec it cannot read (unknown label, speaker or key) and
checks the result with :func:`bench.memory.conversations.problems` before writing it.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

from bench.memory.conversations import DATA, problems

SPECS = DATA.parent / "specs"
HEADER_KEYS = ("user", "name", "split", "timezone", "about")
OPTIONAL_KEYS = ("added",)
_SESSION = re.compile(r"^## (\d{4}-\d{2}-\d{2} \d{2}:\d{2}) \| (.+)$")
_MESSAGE = re.compile(r"^(U|A|>[A-Z][\w .'-]*?)(?:#([\w-]+))?: ?(.*)$")
_QUESTION = re.compile(
    r"^\? (\w+) ([^|@]+?)(?: @(\d{4}-\d{2}-\d{2} \d{2}:\d{2}))? \| (.+?) \| (.+)$"
)


class SpecError(ValueError):
    """A spec file the builder cannot read; the message names the file and line."""


@dataclass
class _Session:
    at: datetime
    title: str
    messages: list[dict[str, Any]] = field(default_factory=list)
    labels: list[str | None] = field(default_factory=list)


def parse(path: Path) -> dict[str, Any]:
    """One user of the set from its spec file."""
    header: dict[str, str] = {}
    sessions: list[_Session] = []
    questions: list[tuple[int, re.Match[str]]] = []
    in_questions = False
    for number, raw in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        line = raw.rstrip()
        where = f"{path.name}:{number}"
        if not line.strip() or line.startswith("//"):
            continue
        if line == "## questions":
            in_questions = True
        elif in_questions:
            match = _QUESTION.match(line)
            if not match:
                raise SpecError(f"{where}: not a question line: {line[:60]!r}")
            questions.append((number, match))
        elif session := _SESSION.match(line):
            zone = ZoneInfo(header["timezone"])
            at = datetime.strptime(session.group(1), "%Y-%m-%d %H:%M").replace(tzinfo=zone)
            sessions.append(_Session(at, session.group(2).strip()))
        elif not sessions:
            key, _, value = line.partition(":")
            if key not in HEADER_KEYS + OPTIONAL_KEYS:
                raise SpecError(f"{where}: unknown header key {key!r}")
            header[key] = value.strip()
        else:
            _add_line(sessions[-1], line, where)
    return _assemble(path, header, sessions, questions)


def _add_line(session: _Session, line: str, where: str) -> None:
    match = _MESSAGE.match(line)
    if match is None:
        if not session.messages:
            raise SpecError(f"{where}: text before the session's first speaker")
        session.messages[-1]["content"] += "\n" + line.strip()
        return
    who, label, text = match.groups()
    message: dict[str, Any] = {"role": "assistant" if who == "A" else "user", "content": text}
    if who.startswith(">"):
        message["name"] = who[1:].strip()
    session.messages.append(message)
    session.labels.append(label)


def _assemble(
    path: Path,
    header: dict[str, str],
    sessions: list[_Session],
    questions: list[tuple[int, re.Match[str]]],
) -> dict[str, Any]:
    missing = [k for k in HEADER_KEYS if k not in header]
    if missing:
        raise SpecError(f"{path.name}: header lacks {', '.join(missing)}")
    uid, zone = header["user"], ZoneInfo(header["timezone"])
    if not header.get("added", "1").isdigit():
        raise SpecError(f"{path.name}: 'added' is not a version number: {header['added']!r}")
    labels: dict[str, str] = {}
    out_sessions = []
    for s_index, session in enumerate(sessions, 1):
        thread = f"{uid}-s{s_index:02d}"
        shared = any("name" in m for m in session.messages)
        for m_index, (message, label) in enumerate(
            zip(session.messages, session.labels, strict=True), 1
        ):
            turn = f"{thread}-{m_index:02d}"
            if shared and message["role"] == "user" and "name" not in message:
                message["name"] = header["name"]
            message["metadata"] = {"turn": turn}
            if label:
                if label in labels:
                    raise SpecError(f"{path.name}: label {label!r} is used twice")
                labels[label] = turn
        out_sessions.append(
            {
                "thread_id": thread,
                "at": session.at.isoformat(),
                "title": session.title,
                "messages": session.messages,
            }
        )
    last = sessions[-1].at
    out_questions = []
    for q_index, (number, match) in enumerate(questions, 1):
        kind, cited, when, text, answer = match.groups()
        unknown = [c for c in cited.split() if c not in labels]
        if unknown:
            raise SpecError(f"{path.name}:{number}: unknown label(s) {', '.join(unknown)}")
        if when:
            asked = datetime.strptime(when, "%Y-%m-%d %H:%M").replace(tzinfo=zone)
        else:  # from two days after the last session on, one a day, between 08:00 and 20:00
            day = (last + timedelta(days=1 + q_index)).replace(hour=8, minute=0, second=0)
            asked = day + timedelta(minutes=(q_index * 137) % 720)
        out_questions.append(
            {
                "id": f"{uid}-q{q_index:02d}",
                "type": kind,
                "asked_at": asked.isoformat(),
                "question": text.strip(),
                "answer": answer.strip(),
                "evidence": [labels[c] for c in cited.split()],
            }
        )
    return {
        "user_id": uid,
        "name": header["name"],
        "split": header["split"],
        "timezone": header["timezone"],
        "about": header["about"],
        "added": int(header.get("added", "1")),
        "sessions": out_sessions,
        "questions": out_questions,
    }


def build(specs: Path = SPECS) -> dict[str, Any]:
    """The whole set from every spec file, users in file-name order."""
    users = [parse(p) for p in sorted(specs.glob("*.txt"))]
    return {
        "name": "retrievalagent conversation-memory dev set",
        "version": 2,
        "question_types": ["paraphrase", "exact", "multi", "temporal", "update", "speaker"],
        "users": users,
    }


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--out", type=Path, default=DATA)
    args = parser.parse_args(argv)
    data = build()
    found = problems(data)
    if found:
        print("\n".join(found), file=sys.stderr)
        return 1
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(data, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    n_q = sum(len(u["questions"]) for u in data["users"])
    print(f"wrote {args.out}: {len(data['users'])} users, {n_q} questions")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

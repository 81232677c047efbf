"""Passage helpers shared by the dataset builders: chunking, dedup, tokenising, writing."""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterable
from pathlib import Path

MIN_WORDS = 50
MAX_WORDS = 400
TARGET_WORDS = 300

_TOKEN = re.compile(r"[a-z0-9]+")


def tokenize(text: str) -> list[str]:
    """Lower-case alphanumeric runs: the tokenizer used for vocab checks and BM25 baselines."""
    return _TOKEN.findall(text.lower())


def nwords(text: str) -> int:
    return len(text.split())


def _split_long(par: str, max_words: int) -> list[str]:
    """Split one over-long paragraph at sentence (or line) boundaries."""
    sep = "\n" if "\n" in par and nwords(par) > max_words else " "
    units = par.split("\n") if sep == "\n" else re.split(r"(?<=[.!?;:])\s+", par)
    out: list[str] = []
    cur: list[str] = []
    count = 0
    for u in units:
        w = nwords(u)
        if w > max_words:  # no boundary at all: cut by words
            words = u.split()
            for k in range(0, len(words), max_words):
                piece = " ".join(words[k : k + max_words])
                if cur:
                    out.append(sep.join(cur))
                    cur, count = [], 0
                out.append(piece)
            continue
        if count + w > TARGET_WORDS and cur:
            out.append(sep.join(cur))
            cur, count = [], 0
        cur.append(u)
        count += w
    if cur:
        out.append(sep.join(cur))
    return out


def chunk_paragraphs(
    paragraphs: list[str], max_words: int = MAX_WORDS, target: int = TARGET_WORDS
) -> list[str]:
    """Greedy paragraph packing into chunks of at most ``max_words`` (about ``target``).

    A trailing chunk shorter than ``MIN_WORDS`` is folded into the previous one when
    the result stays within ``max_words * 1.25``.
    """
    pieces: list[str] = []
    for p in paragraphs:
        if nwords(p) > max_words:
            pieces.extend(_split_long(p, max_words))
        elif p.strip():
            pieces.append(p)
    chunks: list[list[str]] = []
    count = 0
    for p in pieces:
        w = nwords(p)
        if (chunks and count + w <= target) or (
            chunks and count < MIN_WORDS and count + w <= max_words
        ):
            chunks[-1].append(p)
            count += w
        else:
            chunks.append([p])
            count = w
    if len(chunks) > 1:
        last = sum(nwords(p) for p in chunks[-1])
        prev = sum(nwords(p) for p in chunks[-2])
        if last < MIN_WORDS and last + prev <= max_words * 1.25:
            chunks[-2].extend(chunks.pop())
    return ["\n\n".join(c) for c in chunks]


def norm_key(text: str) -> str:
    return hashlib.sha1(" ".join(text.lower().split()).encode()).hexdigest()


def dedup(passages: list[dict]) -> tuple[list[dict], dict[str, str]]:
    """Drop exact duplicate passages (same text up to case and whitespace).

    Returns the kept passages and a map ``dropped id -> kept id``.
    """
    seen: dict[str, str] = {}
    kept: list[dict] = []
    remap: dict[str, str] = {}
    for p in passages:
        k = norm_key(p["text"])
        if k in seen:
            remap[p["id"]] = seen[k]
            continue
        seen[k] = p["id"]
        kept.append(p)
    return kept, remap


def write_jsonl(path: Path, rows: Iterable[dict]) -> int:
    path.parent.mkdir(parents=True, exist_ok=True)
    n = 0
    tmp = path.with_suffix(path.suffix + ".tmp")
    with tmp.open("w", encoding="utf-8") as f:
        for r in rows:
            f.write(json.dumps(r, ensure_ascii=False, sort_keys=False) + "\n")
            n += 1
    tmp.replace(path)
    return n


def read_jsonl(path: Path) -> list[dict]:
    with path.open(encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]

"""Durable facts about a user, drawn from what they said, and the checks they must pass.

With a chat model, the exchanges of conversation memory are joined by short facts about
the user and their situation ("Runs PostgreSQL 13 on Debian 11."), each keyed by a subject
so that a newer fact on the same subject replaces the older one. A model fills these
fields, and small models misfill them, so each fact is checked against the user's own
messages before it is stored: every number, version and capitalised name in it must be
something the user typed (a plain word that opens the fact, "Stopped using Docker.", is
capitalised by its place, not a name), it must be one short line, hold no secret, and
point at the messages it came from (``checked_facts``).

The model's side lives with the other LLM roles (``models``); this module holds the
Protocol it implements and the checks.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from retrievalagent.memory._secrets import mask_secrets

__all__ = ["ExtractedFact", "FactExtractor", "checked_facts", "subject_slug"]

#: Longest fact kept (characters); a longer one is dropped, not cut.
MAX_FACT_CHARS = 300
_SLUG_UNSAFE = re.compile(r"[^a-z0-9]+")
# Tokens a fact must not invent: anything with a digit, and capitalised words.
_NAMED = re.compile(r"[^\W_]*\d[^\W_]*(?:[.\-][^\W_]+)*|\b[A-Z][\w'.\-]*")
# Capitalised words any sentence may start with or use without the user typing them.
_COMMON = frozenset(
    [
        "the",
        "a",
        "an",
        "user",
        "they",
        "he",
        "she",
        "it",
        "their",
        "his",
        "her",
        "uses",
        "use",
        "has",
        "have",
        "is",
        "was",
        "runs",
        "run",
        "works",
        "lives",
        "prefers",
        "wants",
        "plans",
        "owns",
        "i",
    ]
)


@dataclass(frozen=True)
class ExtractedFact:
    """A fact about the user, its subject, and the user messages (0-based) it came from."""

    subject: str
    fact: str
    turns: tuple[int, ...] = ()


@runtime_checkable
class FactExtractor(Protocol):
    """Draws durable facts about a user from what they said (a chat model's role)."""

    def extract(self, said: Sequence[str], known: Sequence[str]) -> list[ExtractedFact]:
        """Facts in ``said`` (the user's messages, numbered from 0); ``known`` are the
        subjects already stored, to be reused when a fact updates one."""

    async def aextract(self, said: Sequence[str], known: Sequence[str]) -> list[ExtractedFact]: ...


def subject_slug(subject: str) -> str:
    """A subject as a key: lower-case words joined by '-', at most 5 words / 48 chars."""
    words = [w for w in _SLUG_UNSAFE.split(subject.lower()) if w][:5]
    return "-".join(words)[:48].strip("-")


def _invented(fact: str, source: str) -> list[str]:
    """Numbers and names in ``fact`` that ``source`` does not contain."""
    typed = source.lower()
    out = []
    for found in _NAMED.finditer(fact):
        token = found.group(0).strip(".'-")
        if not token or token.lower() in _COMMON or token.lower() in typed:
            continue
        # a word the sentence is about ("Paris is home.") is a name, however it ends
        subject = re.match(r"\s+(?:is|was|are|were|has|have)\b", fact[found.end() :])
        if _opens_sentence(fact, found.start()) and _plain_opening(token, typed) and not subject:
            continue  # a plain word capitalised by its place
        out.append(token)
    return out


#: Words a fact written as a sentence about the user opens with, capitalised because they
#: open it, not names ("Stopped using Docker.", "Drives a Tesla.", "Married to Anna.",
#: "Currently lives in Lisbon."). A list, not a word's ending: "Boeing engineer.", "Redis
#: user." and "Italy resident." open with names the user must have typed.
_OPENING_WORDS = frozenset(
    {"does", "did", "not", "no", "now", "still", "once", "never", "recently", "formerly",
     "previously", "currently", "usually", "mostly", "often", "also", "married", "single",
     "divorced", "engaged", "born", "retired", "moved", "left", "quit", "joined", "started",
     "stopped", "switched", "changed", "got", "had", "has", "went", "began", "became", "sold",
     "bought", "drives", "drove", "lives", "lived", "works", "worked", "owns", "owned",
     "speaks", "studies", "studied", "uses", "used", "prefers", "preferred", "runs", "ran",
     "plays", "played", "likes", "liked", "loves", "hates", "wants", "needs", "manages",
     "leads", "teaches", "rents", "rented", "upgraded", "migrated", "relocated", "resigned"}
)  # fmt: skip


def _opens_sentence(fact: str, at: int) -> bool:
    return not fact[:at].strip() or fact[:at].rstrip()[-1:] in ".!?"


def _plain_opening(token: str, typed: str) -> bool:
    """Whether a fact's first word is a plain word (a verb, an adverb) capitalised by its
    place, not a name the user must have typed ("Klarna is ...", "PostgreSQL 15 ..."): one
    of ``_OPENING_WORDS``, or a form of a word the user typed ("Enjoys hiking." after "I
    enjoy hiking"; its stem begins one of their words)."""
    if not token.isalpha() or not token[1:].islower():
        return False
    word = token.lower()
    if word in _OPENING_WORDS:
        return True
    stem = re.sub(r"(?:ies|es|s|ed|d|ing)$", "", word)
    return len(stem) >= 3 and stem != word and re.search(rf"\b{stem}", typed) is not None


def checked_facts(facts: Sequence[ExtractedFact], said: Sequence[str]) -> list[ExtractedFact]:
    """The facts worth storing: one line, short, no secret, a subject, and nothing in them
    (number, version, name) the user did not type in the messages they cite."""
    kept: dict[str, ExtractedFact] = {}
    for raw in facts:
        fact = " ".join(str(raw.fact).split())
        subject = subject_slug(str(raw.subject))
        if not fact or not subject or len(fact) > MAX_FACT_CHARS or mask_secrets(fact)[1]:
            continue
        turns = tuple(sorted({t for t in raw.turns if isinstance(t, int) and 0 <= t < len(said)}))
        cited = " ".join(said[t] for t in turns) if turns else " ".join(said)
        if _invented(fact, cited):
            continue
        if not turns:  # the messages holding the fact's words
            turns = tuple(i for i, text in enumerate(said) if _shares_words(fact, text)) or tuple(
                range(len(said))
            )
        kept[subject] = ExtractedFact(subject, fact, turns)  # one fact per subject, the last
    return list(kept.values())


def _shares_words(fact: str, text: str) -> bool:
    words = {w for w in re.findall(r"[^\W_]{3,}", fact.lower())} - _COMMON
    return bool(words & set(re.findall(r"[^\W_]{3,}", text.lower())))

"""The words the agent sends to a chat model, kept in one place."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

__all__ = [
    "ANSWER_SYSTEM",
    "GRADE_SYSTEM",
    "PREFERENCES_PREFIX",
    "REWRITE_SYSTEM",
    "SEARCH_HINTS_PREFIX",
    "format_passages",
    "memory_context",
    "search_hints",
]

# The prefix of the answer prompt when recalled memory cleared the relevance bar. Its
# wording is part of the public contract (docs: "Memory & persistence").
SEARCH_HINTS_PREFIX = "Known search hints for this corpus (synonyms / aliases ...):\n"
# The block carrying the user's stored preferences, applied on every turn.
PREFERENCES_PREFIX = "The user's standing preferences (follow them in every answer):\n"

ANSWER_SYSTEM = """\
You answer questions using only the numbered passages below, which were retrieved from the \
user's documents.
- Cite every claim with the number of the passage it comes from, in square brackets, e.g. [2].
- If the passages do not contain the answer, say so plainly; do not guess.
- Be concise: a few sentences unless the question asks for more.

Passages:
{passages}"""

GRADE_SYSTEM = """\
You check an answer produced by a retrieval system and decide what, if anything, to \
remember about this user for later turns.

Judge:
- sufficient / confidence: is the answer supported by the passages, and does it answer the \
question?
- memory_worth_storing / memory_kind / memory_key / memory_confidence / memory_fact: \
remember one of two kinds of thing, or nothing.
  * search_fact: the question used a word or spelling that the documents express \
differently (a synonym, alias, brand spelling, abbreviation, common typo, informal word for \
a formal one) and the passages show the mapping. memory_key is the user's word exactly as \
typed; memory_fact a short mapping, e.g. '"backup copy" is called "snapshot" in these \
documents'. Not for trivial substring matches or facts about a single document.
  * preference: the user stated how they want to be answered (language, length, format, \
tone, how to address them). memory_key is its subject (language, length, format, tone, \
address, or another one-word subject); memory_fact the instruction, e.g. 'Answer in \
German.'. A request about this one question only is not a preference.
  Store nothing else about the user (no identity, secrets or personal details)."""

GRADE_HUMAN = """\
Question: {question}

Passages:
{passages}

Answer:
{answer}"""

REWRITE_SYSTEM = """\
A search over the user's documents did not find enough to answer the question. Write one \
new search query that is more likely to match how the documents phrase it (other words, \
synonyms, the likely technical term). Reply with the query only."""

REWRITE_HUMAN = """\
Question: {question}
Queries already tried (do not repeat them):
{tried}"""


def format_passages(sources: Sequence[dict[str, Any]], max_chars: int = 1500) -> str:
    """Passages numbered from 1, each with its source, heading path and text."""
    blocks = []
    for number, src in enumerate(sources, 1):
        heading = " > ".join(src.get("headings") or [])
        origin = src.get("source", "")
        label = f"[{number}] {origin}" + (f" — {heading}" if heading else "")
        text = str(src.get("text", ""))
        if len(text) > max_chars:
            text = text[:max_chars].rsplit(" ", 1)[0] + " …"
        blocks.append(f"{label}\n{text}")
    return "\n\n".join(blocks) if blocks else "(no passages were found)"


def memory_context(facts: Sequence[str], preferences: Sequence[str]) -> str:
    """The recalled memory as the answer prompt shows it: search hints, then preferences."""
    blocks = []
    if facts:
        blocks.append(SEARCH_HINTS_PREFIX + "\n".join(f"- {f}" for f in facts))
    if preferences:
        blocks.append(PREFERENCES_PREFIX + "\n".join(f"- {p}" for p in preferences))
    return "\n\n".join(blocks)


def search_hints(memory_context: str) -> str:
    """The system-prompt prefix carrying recalled memory (empty when there is none)."""
    return f"{memory_context}\n\n" if memory_context else ""

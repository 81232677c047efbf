"""The words the agent sends to a chat model, kept in one place."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

__all__ = [
    "ANSWER_SYSTEM",
    "GRADE_SYSTEM",
    "REWRITE_SYSTEM",
    "SEARCH_HINTS_PREFIX",
    "format_passages",
    "search_hints",
]

# The prefix of the answer prompt when recalled memory cleared the relevance bar. Its
# wording is part of the public contract (docs: "Memory & persistence").
SEARCH_HINTS_PREFIX = "Known search hints for this corpus (synonyms / aliases ...):\n"

ANSWER_SYSTEM = """\
You answer questions using only the numbered passages below, which were retrieved from the \
user's documents.
- Cite every claim with the number of the passage it comes from, in square brackets, e.g. [2].
- If the passages do not contain the answer, say so plainly; do not guess.
- Be concise: a few sentences unless the question asks for more.

Passages:
{passages}"""

GRADE_SYSTEM = """\
You check an answer produced by a retrieval system and decide what, if anything, it should \
remember for future searches over the same documents.

Judge:
- sufficient / confidence: is the answer supported by the passages, and does it answer the \
question?
- memory_worth_storing / memory_confidence / memory_fact: store a fact only when the question \
used a word or spelling that the documents express differently (a synonym, alias, brand \
spelling, abbreviation, common typo, informal word for a formal one) and the passages show \
the mapping. Such a fact helps later searches find the documents' wording. Do NOT store \
trivial substring matches, facts about a single document, or anything about the user's \
identity, preferences or workflow. Phrase a stored fact as a short mapping, e.g. \
'"backup copy" is called "snapshot" in these documents'."""

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


def search_hints(memory_context: str) -> str:
    """The system-prompt prefix carrying recalled memory (empty when there is none)."""
    return f"{SEARCH_HINTS_PREFIX}{memory_context}\n\n" if memory_context else ""

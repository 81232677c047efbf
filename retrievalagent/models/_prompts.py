"""The words the agent sends to a chat model, kept in one place."""

from __future__ import annotations

import re
from collections.abc import Sequence

from retrievalagent.memory import dated_line
from retrievalagent.types import Source

__all__ = [
    "ANSWER_SYSTEM",
    "CONVERSATIONS_PREFIX",
    "FACTS_HUMAN",
    "FACTS_SYSTEM",
    "GRADE_HUMAN",
    "GRADE_PASSAGE_CHARS",
    "GRADE_SYSTEM",
    "INLINE_SUFFIX",
    "NO_CITED_PASSAGES",
    "PREFERENCES_PREFIX",
    "REWRITE_SYSTEM",
    "SEARCH_FACTS_PREFIX",
    "cited_numbers",
    "dated_line",
    "format_passages",
    "memory_context",
    "memory_preamble",
]

# The prefix of the answer prompt's block of recalled search facts. Its wording ("search
# hints") is the spec's and part of the public contract (docs: "Memory & persistence").
SEARCH_FACTS_PREFIX = "Known search hints for this corpus (synonyms / aliases ...):\n"
# The block carrying the user's stored preferences, applied on every turn.
PREFERENCES_PREFIX = "The user's standing preferences (follow them in every answer):\n"
# The block carrying what the user said in earlier conversations, each line dated, so the
# model can resolve "yesterday" or "last week" and tell a newer statement from an older.
CONVERSATIONS_PREFIX = (
    "From this user's earlier conversations (today is {today}; use what bears on the "
    "question, and prefer the newer where two disagree):\n"
)

# Conversation memory with a model: durable facts about the user from their own messages.
FACTS_SYSTEM = """Read what a user wrote to an assistant and list durable facts about the user and their \
situation that would help answer their later questions: what they run, use or own, where \
they live or work, their role, plans and decisions. Not the questions they asked, not \
passing moods, never passwords, keys or tokens. Write each fact as one short sentence in \
the third person using the user's own words, names and numbers. Give each a subject of one \
to three words; when a fact updates one of the known subjects, use that subject."""

FACTS_HUMAN = """Known subjects: {known}

User messages:
{messages}"""

ANSWER_SYSTEM = """\
You answer questions using only the numbered passages below, which were retrieved from the \
user's documents.
- Cite every claim with the number of the passage it comes from, in square brackets, e.g. [2].
- If the passages do not contain the answer, say so plainly; do not guess.
- Be concise: a few sentences unless the question asks for more.

Passages:
{passages}"""

# The grade's guidance lives in the Grade schema's field descriptions, which the provider
# receives with every structured call anyway; the system prompt only frames the task, so
# the guidance is not paid for twice (see docs/cost.md).
GRADE_SYSTEM = """\
Judge an answer of a retrieval system against the passages it cites, and pick what, if \
anything, to remember about this user. Each field's description says how."""

# The grade sees the passages the answer cites (numbered as the answer saw them, trimmed),
# not every passage again. The "Question: ...\n\nPassages:" layout is relied on by tools
# that read grade prompts (bench/memory/alias_bench.py).
GRADE_HUMAN = """\
Question: {question}

Passages:
{passages}

Answer:
{answer}"""

#: Longest cited passage the grade prompt shows (characters; cut at a word boundary).
GRADE_PASSAGE_CHARS = 600
NO_CITED_PASSAGES = "(the answer cites no passage)"

# Appended to the answer prompt in inline grading (one structured call answers and grades).
INLINE_SUFFIX = """

Fill the JSON fields: the answer as above, then grade it as each field says."""

REWRITE_SYSTEM = """\
A search over the user's documents did not find enough to answer the question. Write one \
new search query that is more likely to match how the documents phrase it (other words, \
synonyms, the likely technical term). Reply with the query only."""

REWRITE_HUMAN = """\
Question: {question}
Queries already tried (do not repeat them):
{tried}"""


_CITATION = re.compile(r"\[(\d+(?:\s*[-–,;]\s*\d+)*)\]")


def cited_numbers(answer: str, n_sources: int) -> list[int]:
    """The passage numbers an answer cites (``[2]``, ``[1, 3]``, ``[1][4]``, ``[2-3]``), in
    order of first citation, only those between 1 and ``n_sources``."""
    found: list[int] = []
    for group in _CITATION.findall(answer):
        for part in re.split(r"\s*[,;]\s*", group):
            ends = [int(x) for x in re.split(r"\s*[-–]\s*", part) if x]
            if len(ends) == 2 and 0 < ends[1] - ends[0] < 50:  # a range, [2-4]
                ends = list(range(ends[0], ends[1] + 1))
            for number in ends:
                if 1 <= number <= n_sources and number not in found:
                    found.append(number)
    return found


def format_passages(
    sources: Sequence[Source],
    max_chars: int = 1500,
    numbers: Sequence[int] | None = None,
) -> str:
    """Passages numbered from 1, each with its source, heading path and text; ``numbers``
    keeps only those passages (with their numbers)."""
    blocks = []
    for number, src in enumerate(sources, 1):
        if numbers is not None and number not in numbers:
            continue
        heading = " > ".join(src.get("headings") or [])
        origin = src.get("source", "")
        label = f"[{number}] {origin}" + (f" — {heading}" if heading else "")
        text = str(src.get("text", ""))
        if len(text) > max_chars:
            text = text[:max_chars].rsplit(" ", 1)[0] + " …"
        blocks.append(f"{label}\n{text}")
    return "\n\n".join(blocks) if blocks else "(no passages were found)"


def memory_context(
    facts: Sequence[str],
    preferences: Sequence[str],
    conversations: Sequence[str] = (),
    today: str = "",
) -> str:
    """The recalled memory as the answer prompt shows it: search facts, what the user said
    earlier (each line already dated, see ``dated_line``), then the standing preferences,
    last, as the instructions closest to the passages."""
    blocks = []
    if facts:
        blocks.append(SEARCH_FACTS_PREFIX + "\n".join(f"- {f}" for f in facts))
    if conversations:
        prefix = CONVERSATIONS_PREFIX.format(today=today or "unknown")
        blocks.append(prefix + "\n".join(f"- {c}" for c in conversations))
    if preferences:
        blocks.append(PREFERENCES_PREFIX + "\n".join(f"- {p}" for p in preferences))
    return "\n\n".join(blocks)


def memory_preamble(memory_context: str) -> str:
    """The system-prompt prefix carrying recalled memory (empty when there is none)."""
    return f"{memory_context}\n\n" if memory_context else ""

"""Which past messages of a thread are sent to the model, and which a thread keeps.

The model sees whole Human→AI exchanges, newest first, until the token budget is spent;
the thread itself keeps everything unless a FIFO limit is set. After a regenerated answer
the thread's state follows the new branch only, so the replaced answer is never sent again.

The rewrite node has its own history inside a thread (``rewrite_history``): the rewritten
queries whose retrieval was graded insufficient. They are listed to the rewriter as already
tried, and the node refuses a rewrite that repeats one, in any later turn of the thread.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Iterable, Sequence

from langchain_core.messages import AIMessage, AnyMessage, HumanMessage, RemoveMessage
from langchain_core.messages.utils import count_tokens_approximately

__all__ = [
    "MAX_REWRITE_HISTORY",
    "fifo_removals",
    "history_for_model",
    "is_repeat",
    "normalize_query",
    "remember_failed_rewrite",
    "tried_queries",
]

#: failed rewrites remembered per thread (oldest forgotten first)
MAX_REWRITE_HISTORY = 50
_EDGE = re.compile(r"^[\s\"'`.,;:!?]+|[\s\"'`.,;:!?]+$")


def _pairs(messages: Sequence[AnyMessage]) -> list[tuple[HumanMessage, AIMessage]]:
    pairs = []
    for before, after in itertools.pairwise(messages):
        if isinstance(before, HumanMessage) and isinstance(after, AIMessage):
            pairs.append((before, after))
    return pairs


def history_for_model(messages: Sequence[AnyMessage], budget_tokens: int) -> list[AnyMessage]:
    """Past exchanges that fit in ``budget_tokens``, oldest first, never half a pair.

    The last message, when it is the current question, is not part of the history.
    """
    past = list(messages)
    if past and isinstance(past[-1], HumanMessage):
        past = past[:-1]
    kept: list[AnyMessage] = []
    used = 0
    for human, ai in reversed(_pairs(past)):
        cost = count_tokens_approximately([human, ai])
        if used + cost > budget_tokens:
            break
        kept[:0] = [human, ai]
        used += cost
    return kept


def fifo_removals(messages: Sequence[AnyMessage], keep_last: int | None) -> list[RemoveMessage]:
    """Removals that leave only the newest ``keep_last`` messages (starting at a question)."""
    if keep_last is None or len(messages) <= keep_last:
        return []
    cut = len(messages) - keep_last
    while cut < len(messages) and not isinstance(messages[cut], HumanMessage):
        cut += 1  # never start the kept window with an orphaned answer
    return [RemoveMessage(id=m.id) for m in messages[:cut] if m.id]


# -- the rewrite node's own history ---------------------------------------------------------
def normalize_query(query: str) -> str:
    """Case, spacing and surrounding quotes/punctuation do not make a query new."""
    return " ".join(_EDGE.sub("", query).casefold().split())


def tried_queries(this_turn: Iterable[str] | None, failed: Iterable[str] | None) -> list[str]:
    """This turn's queries, then the thread's failed rewrites, without duplicates."""
    out: dict[str, str] = {}
    for query in [*(this_turn or []), *(failed or [])]:
        out.setdefault(normalize_query(query), query)
    return list(out.values())


def is_repeat(query: str, tried: Iterable[str]) -> bool:
    return normalize_query(query) in {normalize_query(t) for t in tried}


def remember_failed_rewrite(history: Sequence[str] | None, query: str) -> list[str] | None:
    """The thread's rewrite history with ``query`` added, or None when it is already there."""
    history = list(history or [])
    if not normalize_query(query) or is_repeat(query, history):
        return None
    return [*history, query][-MAX_REWRITE_HISTORY:]

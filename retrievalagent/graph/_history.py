"""Which past messages of a thread are sent to the model, and which a thread keeps.

The model sees whole Human→AI exchanges, newest first, until the token budget is spent;
the thread itself keeps everything unless a FIFO limit is set.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence

from langchain_core.messages import AIMessage, AnyMessage, HumanMessage, RemoveMessage
from langchain_core.messages.utils import count_tokens_approximately

__all__ = ["fifo_removals", "history_for_model", "last_exchange"]


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


def last_exchange(messages: Sequence[AnyMessage]) -> tuple[str, str] | None:
    """The most recent (question, answer) pair of a thread, if any."""
    pairs = _pairs(messages)
    if not pairs:
        return None
    human, ai = pairs[-1]
    return str(human.content), str(ai.content)


def fifo_removals(messages: Sequence[AnyMessage], keep_last: int | None) -> list[RemoveMessage]:
    """Removals that leave only the newest ``keep_last`` messages (starting at a question)."""
    if keep_last is None or len(messages) <= keep_last:
        return []
    cut = len(messages) - keep_last
    while cut < len(messages) and not isinstance(messages[cut], HumanMessage):
        cut += 1  # never start the kept window with an orphaned answer
    return [RemoveMessage(id=m.id) for m in messages[:cut] if m.id]

"""From a proposed mapping to a search fact worth storing, or nothing.

A proposal is stored only when memory does not explain it already: its alias is not one a
recalled fact covers, and its corpus term is not the one a recalled fact points to.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from retrievalagent.aliases._finder import AliasProposal
from retrievalagent.index import LexicalEncoder

__all__ = ["SearchFact", "new_search_fact", "search_fact_text"]


def search_fact_text(alias: str, canonical: str) -> str:
    """The wording of a learned alias as a search fact (parsed back by nothing: it is read
    by people and BM25)."""
    return f'"{alias}" is called "{canonical}" in these documents'


@dataclass(frozen=True)
class SearchFact:
    """A search fact to store: its text, the question word it explains, and how sure."""

    text: str
    alias: str
    confidence: float


def new_search_fact(
    proposal: AliasProposal | None,
    encoder: LexicalEncoder,
    *,
    known_aliases: Sequence[str] = (),
    memory_terms: str = "",
) -> SearchFact | None:
    """The fact for ``proposal``, or None when there is none or memory already explains it
    (``known_aliases``: question words recalled facts cover; ``memory_terms``: the corpus
    terms they point to)."""
    if proposal is None:
        return None
    known = {a.lower() for a in known_aliases}
    explained = set(encoder.query_terms(memory_terms))
    if proposal.alias.lower() in known or (
        explained and set(encoder.query_terms(proposal.canonical)) <= explained
    ):
        # Remembered already, or its corpus term is the one a recalled fact already
        # points to ("dealer" -> "vehicle" on a turn "car" -> "vehicle" answered).
        return None
    return SearchFact(
        search_fact_text(proposal.alias, proposal.canonical), proposal.alias, proposal.confidence
    )

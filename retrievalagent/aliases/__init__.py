"""Offline alias learning: which corpus term a question word the corpus lacks stands for.

Retrieval-side evidence (the index, the embedder, the retrieved passages), no language
model: the offline grader (:class:`retrievalagent.models.EvidenceGrader`) asks
:class:`AliasFinder` for a proposal after a sufficient answer, and stores what
:func:`new_search_fact` makes of it as a search fact, so the next search finds the word
lexically too. Only the offline grader uses this part.
"""

from __future__ import annotations

from retrievalagent.aliases._finder import AliasFinder, AliasProposal, stem_root
from retrievalagent.aliases._search_fact import SearchFact, new_search_fact

__all__ = [
    "AliasFinder",
    "AliasProposal",
    "SearchFact",
    "new_search_fact",
    "stem_root",
]

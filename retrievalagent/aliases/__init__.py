"""Offline alias learning: which corpus term a question word the corpus lacks stands for.

Retrieval-side evidence (the index, the embedder, the retrieved passages), no language
model: the offline grader (:class:`retrievalagent.models.EvidenceGrader`) asks
:class:`AliasFinder` for a proposal after a sufficient answer, and stores what
:func:`new_alias_fact` makes of it as a search fact, so the next search finds the word
lexically too.
"""

from __future__ import annotations

from retrievalagent.aliases._facts import AliasFact, alias_fact, new_alias_fact
from retrievalagent.aliases._finder import AliasFinder, AliasProposal, stem_root

__all__ = [
    "AliasFact",
    "AliasFinder",
    "AliasProposal",
    "alias_fact",
    "new_alias_fact",
    "stem_root",
]

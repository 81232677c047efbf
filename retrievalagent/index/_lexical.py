"""BM25 term weights, computed client-side with one tokenizer for everything.

Documents, queries and recalled memory all go through the same Qdrant BM25 tokenizer
(English stop words, Snowball stemmer, lower-casing) so a term injected from memory
lands on exactly the ids the corpus was indexed with. The engine applies IDF.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from functools import lru_cache

import qdrant_edge as qe

from retrievalagent.index._types import Sparse

__all__ = ["MEMORY_META_WORDS", "LexicalEncoder"]

# Words that phrase a memory ("users say X for Y") rather than name a corpus term; they are
# dropped from the memory term group so recall does not pull in passages about "terms".
MEMORY_META_WORDS = frozenset(
    [
        "alias",
        "aliases",
        "synonym",
        "synonyms",
        "term",
        "terms",
        "corpus",
        "means",
        "mean",
        "meaning",
        "called",
        "call",
        "user",
        "users",
        "say",
        "says",
        "said",
        "word",
        "words",
        "refers",
        "refer",
        "referred",
        "hint",
        "hints",
        "known",
        "search",
        "searches",
        "mapping",
        "maps",
        "map",
        "equivalent",
        "same",
        "spelling",
        "typo",
        "typed",
        "writes",
        "write",
        "wrote",
        "instead",
        "prefer",
        "prefers",
        "preferred",
        "use",
        "uses",
        "used",
        "document",
        "documents",
        "docs",
        "these",
        "asked",
    ]
)
_WORD = re.compile(r"[^\W_]+(?:[-'][^\W_]+)*", re.UNICODE)
# Typical chunk length in BM25 tokens (stop words removed) for ~1000-character chunks.
AVG_DOC_TOKENS = 150.0


class LexicalEncoder:
    """Sparse BM25 vectors for chunks and queries.

    Args:
        k1: Term-frequency saturation.
        b: Length normalisation.
    """

    def __init__(self, k1: float = 1.2, b: float = 0.75) -> None:
        self._bm25 = qe.Bm25(qe.Bm25Config(k=k1, b=b, avg_len=AVG_DOC_TOKENS, language="english"))
        self._term_ids = lru_cache(maxsize=65536)(self._word_ids)

    def encode_document(self, text: str) -> Sparse:
        vec = self._bm25.embed_document(text)
        return Sparse(list(vec.indices), [float(v) for v in vec.values])

    def query_terms(self, text: str) -> dict[int, float]:
        vec = self._bm25.embed_query(text)
        return {int(i): float(v) for i, v in zip(vec.indices, vec.values, strict=True)}

    def encode_query(self, text: str, extra_groups: Sequence[tuple[str, float]] = ()) -> Sparse:
        """The query vector: the question's terms, plus each extra group's terms at its weight.

        A term present in several groups keeps its highest weight, so a memory repeating a
        question word does not double-count it.
        """
        weights = self.query_terms(text)
        for group_text, weight in extra_groups:
            for term, value in self.query_terms(group_text).items():
                weights[term] = max(weights.get(term, 0.0), value * weight)
        ordered = sorted(weights.items())
        return Sparse([t for t, _ in ordered], [w for _, w in ordered])

    def words(self, text: str) -> list[str]:
        """The content words of ``text`` (stop words removed), in order, lower-cased."""
        return [w for w in (m.group(0).lower() for m in _WORD.finditer(text)) if self._term_ids(w)]

    def term_ids(self, word: str) -> tuple[int, ...]:
        """The term ids one word maps to (empty for a stop word)."""
        return self._term_ids(word.lower())

    def _word_ids(self, word: str) -> tuple[int, ...]:
        return tuple(int(i) for i in self._bm25.embed_query(word).indices)

    def memory_terms(self, memory_text: str) -> str:
        """The words of recalled memory worth searching for (phrasing words dropped, each
        word once: a term's query weight does not grow with repetition)."""
        words = (w for w in self.words(memory_text) if w not in MEMORY_META_WORDS)
        return " ".join(dict.fromkeys(words))

    def coverage(self, query: str, texts: Iterable[str]) -> float:
        """Share of the query's terms that occur in ``texts`` (1.0 when it has none)."""
        wanted = set(self.query_terms(query))
        if not wanted:
            return 1.0
        seen: set[int] = set()
        for text in texts:
            seen.update(self.query_terms(text))
        return len(wanted & seen) / len(wanted)

"""Offline alias learning: which corpus term does a question word the corpus lacks stand for?

Without a language model, the grader can still learn that users say "repository" where the
documents say "vault": when a question word occurs nowhere in the corpus (BM25 cannot match
it) and dense search still found passages that answer the question, the word names something
those passages call differently. This module picks that corpus term, or nothing.

Evidence, all from the packaged embedder and the retrieved passages (three batched
embedding calls per graded turn, only when a question word is absent from the corpus):

* **Salience of the absent word**: how much the question's meaning changes without it
  (``1 - cos(q, q minus the word)``). Filler words ("things", "barely") carry little and are
  never mapped; a mapping is only worth storing for a word the question turns on.
* **Grounding of the candidate**: candidates are terms of the retrieved passages that the
  corpus treats as names (heading words, code spans, identifiers such as ``ceiling_kbps``)
  or that appear in the answer built from those passages.
* **Meaning kept when swapped in**: substitute the candidate for the absent word in the
  question and compare with the question, relative to dropping the word (``r``); and the
  reverse, the absent word in the corpus sentences that use the candidate (``r_corpus``).
* **Word similarity** of the two words.
* **Margin** over the best candidate of another stem: a mapping is proposed with confidence
  only when one corpus term clearly wins.

The weights were set on the bundled sample docs; ``bench/memory/alias_bench.py`` measures
the result on text the weights never saw.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from langchain_core.embeddings import Embeddings

from retrievalagent.retrieval._index import VectorIndex
from retrievalagent.retrieval._lexical import LexicalEncoder

__all__ = ["AliasFinder", "AliasProposal", "stem_root"]

_CODE_SPAN = re.compile(r"`([^`\n]{1,80})`")
_IDENTIFIER = re.compile(r"(?<![\w.-])[A-Za-z][A-Za-z0-9]*(?:[_.][A-Za-z0-9]+)+(?![\w-])")
_CITATION = re.compile(r"\[\d+\]")
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+|\n+")
_SUFFIXES = ("ing", "ed", "es", "s", "e", "y")
_TABLE_KEY = re.compile(r"^\s*\|\s*`?([^|`]{2,60}?)`?\s*\|", re.MULTILINE)
_DEFINITION = re.compile(
    r"(?:^|[.!?]\s+)(?:The |An? )?([A-Za-z][\w.-]{2,40}) (?:is|are) (?:the|a|an) ", re.MULTILINE
)

# Weights of the evidence (see the module docstring), and the shape of the confidence.
W_WORD, W_QUESTION, W_CORPUS, W_NAME, W_ANSWER, W_DEFINED = 0.3, 0.2, 0.15, 0.2, 0.2, 0.1
SCORE_FLOOR, SCORE_FULL = 0.30, 0.42  # candidate score mapped to strength 0..1
MARGIN_FULL = 0.08  # margin over the best other stem that counts as a clear win


def stem_root(word: str) -> str:
    """A crude common root, so "expired", "expiry" and "expire" count as one term."""
    word = word.lower()
    for suffix in _SUFFIXES:
        if word.endswith(suffix) and len(word) - len(suffix) >= 4:
            return word[: -len(suffix)]
    return word


def _clip(value: float, low: float = -1.0, high: float = 1.0) -> float:
    return max(low, min(high, value))


def _dot(a: Sequence[float], b: Sequence[float]) -> float:
    return float(sum(x * y for x, y in zip(a, b, strict=True)))


def _unit_pattern(unit: str) -> re.Pattern[str]:
    return re.compile(rf"(?<![\w]){re.escape(unit)}(?![\w])", re.IGNORECASE)


@dataclass
class AliasProposal:
    """A learned mapping and the evidence behind it."""

    alias: str
    canonical: str
    confidence: float
    score: float
    margin: float
    salience: float
    runner_up: str = ""
    evidence: dict[str, float] = field(default_factory=dict)


@dataclass
class _Candidate:
    unit: str  # a word or an identifier as the corpus writes it (lower-cased)
    roots: frozenset[str]
    named: bool  # a heading word, code span or identifier
    defined: bool  # a section is named after it, a table row keyed by it, or "The X is a ..."
    in_answer: bool
    rank: int  # first passage it occurs in
    word: float = 0.0
    question: float = 0.0
    corpus: float = -1.0  # no corpus sentence uses the term: no support from that side
    score: float = 0.0


class AliasFinder:
    """Proposes ``alias -> corpus term`` mappings from one graded turn.

    Args:
        encoder: The agent's BM25 encoder (its tokenizer decides what a "word" is).
        index: Answers which term ids occur nowhere in the corpus.
        embeddings: The agent's embedder (the packaged MiniLM by default).
        min_salience: Least meaning an absent word must carry to be mapped.
        shortlist: Candidates per absent word that get the corpus-side check.
        max_candidates: Cap on candidate terms per turn (bounds the embedding work).
    """

    def __init__(
        self,
        encoder: LexicalEncoder,
        index: VectorIndex,
        embeddings: Embeddings,
        *,
        min_salience: float = 0.06,
        shortlist: int = 8,
        max_candidates: int = 60,
    ) -> None:
        self.encoder = encoder
        self.index = index
        self.embeddings = embeddings
        self.min_salience = min_salience
        self.shortlist = shortlist
        self.max_candidates = max_candidates

    # -- which question words are missing from the corpus ---------------------------------
    def absent_words(self, question: str) -> list[str]:
        """Content words of ``question`` none of whose BM25 terms occur in the corpus."""
        words = [
            w for w in dict.fromkeys(self.encoder.words(question)) if len(w) > 2 and w.isalpha()
        ]
        ids = {w: self.encoder.term_ids(w) for w in words}
        absent = self.index.absent_terms(sorted({i for v in ids.values() for i in v}))
        return [w for w in words if ids[w] and set(ids[w]) <= absent]

    # -- candidates -------------------------------------------------------------------------
    def _parts(self, unit: str) -> list[str]:
        return [p for p in self.encoder.words(unit) if p.isalpha() and len(p) > 2]

    def _candidates(
        self, sources: Sequence[dict[str, Any]], answer: str, question_terms: set[int]
    ) -> list[_Candidate]:
        named_roots: set[str] = set()
        defined: set[str] = set()
        seen: dict[str, _Candidate] = {}
        answer_roots = {stem_root(w) for w in self.encoder.words(_CITATION.sub(" ", answer))}

        def add(unit: str, rank: int, named: bool) -> None:
            unit = unit.lower().strip("._")
            parts = self._parts(unit)
            if not parts or len(unit) > 40 or unit in seen:
                return
            if any(set(self.encoder.term_ids(p)) & question_terms for p in parts):
                return  # shares a term with the question: not what the question lacks
            roots = frozenset(stem_root(p) for p in parts)
            seen[unit] = _Candidate(unit, roots, named, False, bool(roots & answer_roots), rank)

        for rank, src in enumerate(sources):
            headings = " ".join(src.get("headings") or [])
            text = headings + "\n" + str(src.get("text", ""))
            named_roots.update(stem_root(w) for w in self.encoder.words(headings))
            deepest = (src.get("headings") or [""])[-1].strip().lower()
            if deepest and len(deepest.split()) <= 3:
                defined.add(deepest)
            defined.update(k.strip().lower() for k in _TABLE_KEY.findall(text))
            defined.update(k.lower() for k in _DEFINITION.findall(text))
            for span in _CODE_SPAN.findall(text):
                named_roots.update(stem_root(w) for w in self.encoder.words(span))
            for ident in _IDENTIFIER.findall(text):
                add(ident, rank, True)
            # Words that only occur inside identifiers compete as the identifier, not alone.
            for word in self.encoder.words(_IDENTIFIER.sub(" ", text)):
                if word.isalpha() and len(word) > 2:
                    add(word, rank, False)
        grounded = []
        for cand in seen.values():
            cand.named = cand.named or bool(cand.roots & named_roots)
            cand.defined = cand.unit in defined
            if cand.named or cand.in_answer:
                grounded.append(cand)
        grounded.sort(key=lambda c: (-(c.named + c.in_answer), c.rank))
        return grounded[: self.max_candidates]

    # -- scoring -----------------------------------------------------------------------------
    def propose(
        self,
        question: str,
        sources: Sequence[dict[str, Any]],
        answer: str,
        answer_confidence: float,
    ) -> AliasProposal | None:
        """The best-supported mapping for this turn, or None when nothing is convincing."""
        absent = self.absent_words(question)
        if not absent or not sources:
            return None
        patterns = {a: _unit_pattern(a) for a in absent}
        texts = [question] + [patterns[a].sub("", question, count=1) for a in absent]
        vectors = self.embeddings.embed_documents(texts)
        q_vec = vectors[0]
        absent_salience = {
            a: (1.0 - _dot(q_vec, v)) for a, v in zip(absent, vectors[1:], strict=True)
        }
        kept = {a: s for a, s in absent_salience.items() if s >= self.min_salience}
        if not kept:
            return None
        aliases = sorted(kept, key=lambda a: -kept[a])[:2]
        question_terms = {i for w in self.encoder.words(question) for i in self.encoder.term_ids(w)}
        candidates = self._candidates(sources, answer, question_terms)
        best: AliasProposal | None = None
        for alias in aliases:
            pool = [
                c
                for c in candidates
                if stem_root(alias) not in c.roots
                and not any(p.startswith(alias) or alias.startswith(p) for p in self._parts(c.unit))
            ]
            if not pool:
                continue
            proposal = self._score_alias(alias, kept[alias], question, q_vec, pool, sources)
            if proposal is not None and (best is None or proposal.score > best.score):
                best = proposal
        if best is None:
            return None
        strength = _clip((best.score - SCORE_FLOOR) / (SCORE_FULL - SCORE_FLOOR), 0.0, 1.0)
        clear = _clip(best.margin / MARGIN_FULL, 0.0, 1.0)
        best.confidence = round(
            _clip(0.2 * answer_confidence + 0.6 * strength + 0.2 * clear, 0.0, 0.99), 3
        )
        return best

    def _score_alias(
        self,
        alias: str,
        salience: float,
        question: str,
        q_vec: Sequence[float],
        pool: list[_Candidate],
        sources: Sequence[dict[str, Any]],
    ) -> AliasProposal | None:
        pattern = _unit_pattern(alias)
        swapped = [pattern.sub(c.unit, question, count=1) for c in pool]
        vectors = self.embeddings.embed_documents([alias] + [c.unit for c in pool] + swapped)
        a_vec, unit_vecs, swap_vecs = (
            vectors[0],
            vectors[1 : 1 + len(pool)],
            vectors[1 + len(pool) :],
        )
        kept_without = 1.0 - salience  # cos(question, question without the word)
        for cand, u_vec, s_vec in zip(pool, unit_vecs, swap_vecs, strict=True):
            cand.word = _dot(a_vec, u_vec)
            cand.question = _clip((_dot(q_vec, s_vec) - kept_without) / max(salience, 1e-3))
            cand.score = (
                W_WORD * cand.word
                + W_QUESTION * cand.question
                + W_NAME * cand.named
                + W_ANSWER * cand.in_answer
                + W_DEFINED * cand.defined
            )
        shortlist = sorted(pool, key=lambda c: -c.score)[: self.shortlist]
        self._corpus_side(alias, shortlist, sources)
        for cand in shortlist:
            cand.score += W_CORPUS * cand.corpus
        ranked = sorted(shortlist, key=lambda c: (-c.score, len(c.unit)))
        top = ranked[0]
        # The winner's family: the terms sharing a root with it ("expiry", "expired") or with
        # one of those ("ceiling_kbps", "quiet_ceiling_kbps"). The margin is over the rest.
        family = {c.unit for c in ranked if c.roots & top.roots}
        family_roots = frozenset().union(*(c.roots for c in ranked if c.unit in family))
        others = [c for c in ranked if c.unit not in family and not (c.roots & family_roots)]
        close = [c for c in ranked if c.unit in family and c.score >= top.score - 0.02]
        canonical = min(close, key=lambda c: (len(c.roots), len(c.unit))).unit
        runner = others[0] if others else None
        margin = top.score - (runner.score if runner else 0.0)
        return AliasProposal(
            alias=alias,
            canonical=canonical,
            confidence=0.0,
            score=round(top.score, 4),
            margin=round(margin, 4),
            salience=round(salience, 4),
            runner_up=runner.unit if runner else "",
            evidence={
                "word": round(top.word, 4),
                "question": round(top.question, 4),
                "corpus": round(top.corpus, 4),
                "named": float(top.named),
                "in_answer": float(top.in_answer),
                "defined": float(top.defined),
            },
        )

    def _corpus_side(
        self, alias: str, shortlist: list[_Candidate], sources: Sequence[dict[str, Any]]
    ) -> None:
        """``r_corpus``: the absent word put into the corpus sentences that use a candidate."""
        sentences = [
            s.strip()
            for src in sources
            for s in _SENTENCE_END.split(str(src.get("text", "")))
            if len(s.strip()) >= 12
        ]
        jobs: list[tuple[_Candidate, str, str, str]] = []
        for cand in shortlist:
            pattern = _unit_pattern(cand.unit)
            using = [s for s in sentences if pattern.search(s)][:3]
            jobs.extend(
                (cand, s, pattern.sub(alias, s, count=1), pattern.sub("", s, count=1))
                for s in using
            )
        if not jobs:
            return
        flat = [t for _, s, swapped, dropped in jobs for t in (s, swapped, dropped)]
        scored: set[str] = set()
        vectors = self.embeddings.embed_documents(flat)
        for n, (cand, *_rest) in enumerate(jobs):
            s_vec, swap_vec, drop_vec = vectors[3 * n], vectors[3 * n + 1], vectors[3 * n + 2]
            kept_without = _dot(s_vec, drop_vec)
            value = _clip((_dot(s_vec, swap_vec) - kept_without) / max(1.0 - kept_without, 1e-3))
            cand.corpus = value if cand.unit not in scored else max(cand.corpus, value)
            scored.add(cand.unit)

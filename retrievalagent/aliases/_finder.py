"""Offline alias learning: which corpus term does a question word the corpus lacks stand for?

Without a language model, the grader can still learn that users say "repository" where the
documents say "vault": when a question word occurs nowhere in the corpus (BM25 cannot match
it) and dense search still found passages that answer the question, the word names something
those passages call differently. This module picks that corpus term, or nothing.

Evidence, all from the packaged embedder, the index and the retrieved passages (three
batched embedding calls and two index searches per absent word, only when a question word
is absent from the corpus):

* **Salience of the absent word**: how much the question's meaning changes without it
  (``1 - cos(q, q minus the word)``). Filler words ("things", "barely") carry little and are
  never mapped; a mapping is only worth storing for a word the question turns on.
* **Grounding of the candidate**: candidates are whole words or identifiers of the passages
  the answer cites, and of the passage the absent word points to most (below) when the
  absent word fits the corpus sentences that use them (``r_corpus`` > 0), that the corpus
  treats as names (heading words, code spans, identifiers such as ``ceiling_kbps``),
  that appear in the answer built from those passages (section headings the answerer
  quotes before a sentence do not count: they would favour whatever the top passage is
  titled), or that are spelled like the absent word ("initialise" / "initialize", "calc" /
  "calculate"). A piece of the absent word is never a candidate: "teapot" is not called
  "tea" (nor "pot"), whatever passage says "tea".
* **Which passage the word points to**: for each retrieved passage, how much its dense
  similarity to the question drops when the word is removed (``cos(q, p) - cos(q minus
  the word, p)``, read from the index), mixed with the passage's rank. A candidate is as
  supported as the best passage it occurs in, so the right term need not be in the top one.
* **Meaning kept when swapped in**: substitute the candidate for the absent word in the
  question and compare with the question, relative to dropping the word (``r``); and the
  reverse, the absent word in the corpus sentences that use the candidate (``r_corpus``).
* **Word similarity** of the two words.
* **Margin** over the best candidate of another stem: a mapping is proposed with confidence
  only when one corpus term clearly wins.

Nothing is proposed when the passages share no term with the rest of the question (the
question is the absent word alone, as "what is AAUI?"): dense search then matched only the
pieces of an unknown word, and there is no evidence the passages are about it.

The confidence needs the *meaning* evidence (word similarity and the two swaps) not to be
clearly negative, however well the candidate is grounded: a named term of the top passage
that fits neither sentence ("room" -> "vault") is not stored. A plain word inflected unlike
the absent word ("pruned" -> "removes") keeps only part of its strength.

The weights were set on the bundled sample docs; ``bench/memory/alias_bench.py`` measures
the result on text the weights never saw (Linux man pages: most stored facts are right,
some are not -- see its results).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import KW_ONLY, dataclass, field
from difflib import SequenceMatcher

from langchain_core.embeddings import Embeddings

from retrievalagent.index import LexicalEncoder, VectorIndex
from retrievalagent.types import Source

__all__ = ["AliasFinder", "AliasProposal", "answer_body", "stem_root"]

_CODE_SPAN = re.compile(r"`([^`\n]{1,80})`")
_IDENTIFIER = re.compile(r"(?<![\w.-])[A-Za-z][A-Za-z0-9]*(?:[_.][A-Za-z0-9]+)+(?![\w-])")
_CITATION = re.compile(r"\[\d+\]")
_CITED = re.compile(r"\[(\d+)\]")
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+|\n+")
_SUFFIXES = ("ing", "ed", "es", "s", "e", "y")
_TABLE_KEY = re.compile(r"^\s*\|\s*`?([^|`]{2,60}?)`?\s*\|", re.MULTILINE)
_DEFINITION = re.compile(
    r"(?:^|[.!?]\s+)(?:The |An? )?([A-Za-z][\w.-]{2,40}) (?:is|are) (?:the|a|an) ", re.MULTILINE
)

# Weights of the evidence (see the module docstring), and the shape of the confidence.
W_WORD, W_QUESTION, W_CORPUS, W_NAME, W_ANSWER, W_DEFINED = 0.3, 0.2, 0.15, 0.15, 0.1, 0.1
W_PASSAGE = 0.25  # support of the best passage the candidate occurs in
SCORE_FLOOR, SCORE_FULL = 0.30, 0.42  # candidate score mapped to strength 0..1
# Meaning evidence alone (word, question and corpus terms) mapped to 0..1: a mapping whose
# words neither resemble each other nor fit each other's sentences is not stored, however
# well the candidate is grounded in the passages.
MEANING_FLOOR, MEANING_FULL = -0.12, 0.0
SPELLING_RATIO = 0.6  # difflib ratio from which a passage word counts as a variant spelling
# An alias and its corpus term play the same part in a sentence ("pruned" / "expired"); a
# plain word inflected differently ("pruned" / "removes") is usually a neighbour of the
# answer, not the term, so it keeps this share of its strength.
INFLECTION_MISMATCH = 0.8
MARGIN_FULL = 0.08  # margin over the best other stem that counts as a clear win
PULL_SPREAD = 0.04  # least spread of the drops in similarity that orders passages fully
PULL_DEPTH = 64  # dense hits read per similarity check
CONTEXT_WORDS = 12  # words either side of a candidate in the corpus-side check
ANCHOR_PASSAGES = 4  # passages that must share a term with the rest of the question


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


def _kin(a: frozenset[str], b: frozenset[str]) -> bool:
    """Roots of one word family: equal, or one a long prefix of the other ("path",
    "pathname")."""
    return bool(a & b) or any(
        x.startswith(y) or y.startswith(x) for x in a for y in b if min(len(x), len(y)) >= 4
    )


def _piece_of(unit: str, alias: str) -> bool:
    """Whether ``unit`` is only the start or the end of ``alias`` ("tea", "pot" of "teapot"):
    a compound or a longer form of a word is not another name for that word."""
    return unit != alias and (alias.startswith(unit) or alias.endswith(unit))


def cited_ranks(answer: str, n_sources: int) -> set[int]:
    """The passages ``answer`` cites (``[2]`` is rank 1); every passage when it cites none."""
    cited = {int(c) - 1 for c in _CITED.findall(answer)} & set(range(n_sources))
    return cited or set(range(n_sources))


def inflection(word: str) -> str:
    """ "ed", "s" or "" -- a crude part-of-speech hint for single words."""
    word = word.lower()
    if len(word) >= 5 and word.endswith("ed") and not word.endswith("eed"):
        return "ed"
    if len(word) >= 4 and word.endswith("s") and not word.endswith(("ss", "us", "is")):
        return "s"
    return ""


def answer_body(answer: str, sources: Sequence[Source]) -> str:
    """The answer without citations and without the section headings quoted before
    sentences ("LF-611 Peer handshake failed: ..."): those name the passage, not the fact."""
    text = _CITATION.sub(" ", answer)
    for src in sources:
        for heading in src.get("headings") or []:
            heading = " ".join(str(heading).split())
            if heading:
                text = text.replace(heading + ":", " ")
    return text


#: Words the BM25 stop list keeps that say how or when, never what: a corpus lacking
#: "often" or "anyway" does not call them something else, and mapping them stored junk
#: ('"often" is called "years"') in the offline learner.
# fmt: off
NOT_A_NAME = frozenset(
    ["about", "above", "across", "actually", "after", "again", "ago", "almost", "alone", "already", "also", "although", "always", "anyway", "anywhere", "around", "away", "back", "basically", "before", "behind", "below", "beside", "besides", "better", "between", "beyond", "certainly", "clearly", "currently", "definitely", "despite", "during", "else", "elsewhere", "enough", "especially", "even", "ever", "every", "everything", "everywhere", "exactly", "fairly", "finally", "first", "frequently", "generally", "hardly", "however", "instead", "just", "kind", "last", "lately", "later", "least", "less", "likely", "mainly", "maybe", "meanwhile", "merely", "might", "more", "mostly", "much", "must", "nearly", "never", "next", "normally", "nothing", "now", "nowhere", "obviously", "often", "okay", "once", "only", "otherwise", "perhaps", "please", "possibly", "pretty", "probably", "quickly", "quite", "rather", "really", "recently", "regularly", "right", "simply", "since", "slightly", "sometimes", "somewhat", "somewhere", "soon", "still", "suddenly", "sure", "thanks", "though", "through", "today", "together", "tomorrow", "totally", "toward", "towards", "truly", "twice", "typically", "under", "unless", "until", "usually", "very", "whatever", "whenever", "wherever", "whether", "while", "within", "without", "yesterday", "yet"]
)
# fmt: on


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
    ranks: set[int]  # the passages it occurs in
    spelled: bool = False  # a variant spelling or completion of the absent word
    cited: bool = True  # occurs in a passage the answer cites
    word: float = 0.0
    question: float = 0.0
    corpus: float = -1.0  # no corpus sentence uses the term: no support from that side
    support: float = 0.0  # weight of the best passage it occurs in
    score: float = 0.0

    @property
    def meaning(self) -> float:
        return W_WORD * self.word + W_QUESTION * self.question + W_CORPUS * self.corpus


class _Pool:
    """The candidate terms of the retrieved passages, gathered passage by passage."""

    def __init__(
        self, encoder: LexicalEncoder, question_terms: set[int], answer_roots: set[str]
    ) -> None:
        self.encoder = encoder
        self.question_terms = question_terms
        self.answer_roots = answer_roots
        self.seen: dict[str, _Candidate] = {}
        self.named_roots: list[set[str]] = []  # per passage: roots of its headings, code spans
        self.defined: set[str] = set()

    def parts(self, unit: str) -> list[str]:
        return [p for p in self.encoder.words(unit) if p.isalpha() and len(p) > 2]

    def add(self, unit: str, rank: int, named: bool) -> None:
        unit = unit.lower().strip("._")
        if (known := self.seen.get(unit)) is not None:
            known.ranks.add(rank)
            known.named = known.named or named
            return
        parts = self.parts(unit)
        if not parts or len(unit) > 40:
            return
        if any(set(self.encoder.term_ids(p)) & self.question_terms for p in parts):
            return  # shares a term with the question: not what the question lacks
        roots = frozenset(stem_root(p) for p in parts)
        in_answer = bool(roots & self.answer_roots)
        self.seen[unit] = _Candidate(unit, roots, named, False, in_answer, {rank})

    def read(self, rank: int, src: Source) -> None:
        """One passage: its identifiers and words compete, its headings and code spans
        make names, and the terms it defines are noted."""
        headings = " ".join(src.get("headings") or [])
        text = headings + "\n" + str(src.get("text", ""))
        names = {stem_root(w) for w in self.encoder.words(headings)}
        self.named_roots.append(names)
        self.defined.update(_defined_terms(src, text))
        for span in _CODE_SPAN.findall(text):
            names.update(stem_root(w) for w in self.encoder.words(span))
        for ident in _IDENTIFIER.findall(text):
            self.add(ident, rank, True)
        # Words that only occur inside identifiers compete as the identifier, not alone.
        for word in self.encoder.words(_IDENTIFIER.sub(" ", text)):
            if word.isalpha() and len(word) > 2:
                self.add(word, rank, False)

    def candidates(self) -> list[_Candidate]:
        for cand in self.seen.values():
            # A name where it occurs: a heading word or code span of a passage that uses it.
            cand.named = cand.named or any(cand.roots & self.named_roots[r] for r in cand.ranks)
            cand.defined = cand.unit in self.defined
        return list(self.seen.values())


def _defined_terms(src: Source, text: str) -> set[str]:
    """Terms a passage defines: the section it is (a short deepest heading), the keys of
    its table rows, and "The X is a ..." subjects."""
    defined = {k.strip().lower() for k in _TABLE_KEY.findall(text)}
    defined.update(k.lower() for k in _DEFINITION.findall(text))
    deepest = (src.get("headings") or [""])[-1].strip().lower()
    if deepest and len(deepest.split()) <= 3:
        defined.add(deepest)
    return defined


def _cheap_evidence(cand: _Candidate) -> float:
    """What ranks a candidate before any embedding: spelling, naming, the answer, its passage."""
    return (
        cand.spelled
        + W_NAME * cand.named
        + W_ANSWER * cand.in_answer
        + W_DEFINED * cand.defined
        + W_PASSAGE * cand.support
    )


def _confidence(best: AliasProposal, answer_confidence: float) -> float:
    """0..0.99: the winner's score and meaning evidence, its margin, and the answer's grade."""
    strength = _clip((best.score - SCORE_FLOOR) / (SCORE_FULL - SCORE_FLOOR), 0.0, 1.0)
    meaning = (best.evidence["meaning"] - MEANING_FLOOR) / (MEANING_FULL - MEANING_FLOOR)
    strength = min(strength, _clip(meaning, 0.0, 1.0))
    if not best.evidence["inflection_agrees"]:
        strength *= INFLECTION_MISMATCH
    clear = _clip(best.margin / MARGIN_FULL, 0.0, 1.0)
    return round(_clip(0.2 * answer_confidence + 0.6 * strength + 0.2 * clear, 0.0, 0.99), 3)


@dataclass
class _Salience:
    """The question's vector, and per absent word the question's vector without it and how
    much meaning it carries (only the words that carry enough)."""

    question: list[float]
    without: dict[str, list[float]]
    kept: dict[str, float]


@dataclass(eq=False)
class AliasFinder:
    """Proposes ``alias -> corpus term`` mappings from one graded turn.

    Args:
        encoder: The agent's BM25 encoder (its tokenizer decides what a "word" is).
        index: Answers which term ids occur nowhere in the corpus, and how close passages
            are to the question with and without the absent word.
        embeddings: The agent's embedder (the packaged MiniLM by default).
        min_salience: Least meaning an absent word must carry to be mapped.
        shortlist: Candidates per absent word that get the corpus-side check.
        swap_limit: Candidates per absent word swapped into the question.
        max_candidates: Cap on candidate terms per absent word (bounds the embedding work).
    """

    encoder: LexicalEncoder
    index: VectorIndex
    embeddings: Embeddings
    _: KW_ONLY
    min_salience: float = 0.06
    shortlist: int = 8
    swap_limit: int = 24
    max_candidates: int = 80

    # -- which question words are missing from the corpus ---------------------------------
    def absent_words(self, question: str) -> list[str]:
        """Content words of ``question`` none of whose BM25 terms occur in the corpus."""
        words = [
            w for w in dict.fromkeys(self.encoder.words(question)) if len(w) > 2 and w.isalpha()
        ]
        ids = {w: self.encoder.term_ids(w) for w in words}
        absent = self.index.absent_terms(sorted({i for v in ids.values() for i in v}))
        return [w for w in words if ids[w] and set(ids[w]) <= absent and w not in NOT_A_NAME]

    def anchored(self, question: str, absent: Sequence[str], sources: Sequence[Source]) -> bool:
        """Whether the passages share a term with the rest of the question.

        A question that is the absent word and nothing the passages say ("what is AAUI?")
        was matched by nothing but the pieces of that unknown word: no part of it shows the
        passages are about it, so a mapping learned from them is a guess (on a glossary of
        acronyms, 98 of 103 such guesses were wrong).
        """
        missing = {w.lower() for w in absent}
        rest = {
            i
            for w in self.encoder.words(question)
            if w not in missing
            for i in self.encoder.term_ids(w)
        }
        if not rest:
            return False
        for src in sources[:ANCHOR_PASSAGES]:
            text = " ".join(src.get("headings") or []) + " " + str(src.get("text", ""))
            if rest & set(self.encoder.query_terms(text)):
                return True
        return False

    def _salience(self, question: str, absent: Sequence[str]) -> _Salience:
        """How much the question's meaning changes without each absent word."""
        q_vec = self.embeddings.embed_query(question)  # cached: dense search embedded it
        dropped = [_unit_pattern(a).sub("", question, count=1) for a in absent]
        without = dict(zip(absent, self.embeddings.embed_documents(dropped), strict=True))
        kept = {a: 1.0 - _dot(q_vec, without[a]) for a in absent}
        kept = {a: s for a, s in kept.items() if s >= self.min_salience}
        return _Salience(q_vec, without, kept)

    # -- which retrieved passages the absent word points to ------------------------------
    def passage_weights(
        self,
        q_vec: Sequence[float],
        without_vec: Sequence[float],
        sources: Sequence[Source],
    ) -> list[float]:
        """0..1 per passage: its rank, and how much closer the word brings it (relative to
        the other passages). Similarities come from the index, so no passage is embedded."""
        n = len(sources)
        if not n:
            return []
        limit = max(PULL_DEPTH, 4 * n)
        with_word = {h.id: h.score for h in self.index.dense_search(q_vec, limit)}
        without = {h.id: h.score for h in self.index.dense_search(without_vec, limit)}
        # Passages below the depth: the last score read bounds their similarity.
        floor_with = min(with_word.values(), default=0.0)
        floor_without = min(without.values(), default=0.0)
        pulls = [
            with_word.get(str(src.get("id")), floor_with)
            - without.get(str(src.get("id")), floor_without)
            for src in sources
        ]
        low, spread = min(pulls), max(max(pulls) - min(pulls), PULL_SPREAD)
        return [
            0.5 * (pull - low) / spread + 0.5 * (1.0 - rank / n) for rank, pull in enumerate(pulls)
        ]

    # -- candidates -------------------------------------------------------------------------
    def _candidates(
        self, sources: Sequence[Source], answer: str, question_terms: set[int]
    ) -> list[_Candidate]:
        answer_roots = {stem_root(w) for w in self.encoder.words(answer_body(answer, sources))}
        pool = _Pool(self.encoder, question_terms, answer_roots)
        for rank, src in enumerate(sources):
            pool.read(rank, src)
        return pool.candidates()

    @staticmethod
    def _spelled_like(alias: str, unit: str) -> bool:
        """A variant spelling ("initialise" / "initialize") or a completion ("calc" /
        "calculate") of the absent word: grounded by its letters, not by its place."""
        if unit[:1] != alias[:1] or "_" in unit or "." in unit:
            return False
        if len(alias) >= 3 and unit.startswith(alias):
            return True
        return SequenceMatcher(None, alias, unit).ratio() >= SPELLING_RATIO

    def _grounded(
        self,
        alias: str,
        candidates: Sequence[_Candidate],
        weights: Sequence[float],
        cited: set[int],
    ) -> list[_Candidate]:
        """The candidates grounded for ``alias`` (named, in the answer, or spelled like it)
        that occur in a ``cited`` passage or the one ``alias`` points to most, cheap
        evidence first, at most ``max_candidates`` (bounds the embedding work)."""
        pointed = max(range(len(weights)), key=lambda r: weights[r])
        pool = []
        for cand in candidates:
            if stem_root(alias) in cand.roots or _piece_of(cand.unit, alias):
                continue
            cand.cited = bool(cand.ranks & cited)
            if not cand.cited and pointed not in cand.ranks:
                continue
            cand.spelled = self._spelled_like(alias, cand.unit)
            if cand.named or cand.in_answer or cand.spelled:
                cand.support = max(weights[r] for r in cand.ranks)
                pool.append(cand)
        pool.sort(key=lambda c: -_cheap_evidence(c))
        return pool[: self.max_candidates]

    # -- scoring -----------------------------------------------------------------------------
    def propose(
        self,
        question: str,
        sources: Sequence[Source],
        answer: str,
        answer_confidence: float,
    ) -> AliasProposal | None:
        """The best-supported mapping for this turn, or None when nothing is convincing."""
        absent = self.absent_words(question)
        if not absent or not sources or not self.anchored(question, absent, sources):
            return None
        salience = self._salience(question, absent)
        if not salience.kept:
            return None
        question_terms = {i for w in self.encoder.words(question) for i in self.encoder.term_ids(w)}
        candidates = self._candidates(sources, answer, question_terms)
        cited = cited_ranks(answer, len(sources))
        best: AliasProposal | None = None
        for alias in sorted(salience.kept, key=lambda a: -salience.kept[a])[:2]:
            weights = self.passage_weights(salience.question, salience.without[alias], sources)
            if not (pool := self._grounded(alias, candidates, weights, cited)):
                continue
            proposal = self._score_alias(
                alias, salience.kept[alias], question, salience.question, pool, sources
            )
            if proposal is not None and (best is None or proposal.score > best.score):
                best = proposal
        if best is not None:
            best.confidence = _confidence(best, answer_confidence)
        return best

    def _score_alias(
        self,
        alias: str,
        salience: float,
        question: str,
        q_vec: Sequence[float],
        pool: list[_Candidate],
        sources: Sequence[Source],
    ) -> AliasProposal | None:
        # Stage 1 (one short text per candidate): word similarity and the cheap evidence.
        vectors = self.embeddings.embed_documents([alias] + [c.unit for c in pool])
        a_vec = vectors[0]
        for cand, u_vec in zip(pool, vectors[1:], strict=True):
            cand.word = _dot(a_vec, u_vec)
            cand.question = 0.0
            cand.score = (
                W_WORD * cand.word
                + W_NAME * cand.named
                + W_ANSWER * cand.in_answer
                + W_DEFINED * cand.defined
                + W_PASSAGE * cand.support
            )
        # Stage 2 (a question-length text each): the word swapped into the question.
        pool = sorted(pool, key=lambda c: (-c.spelled, -c.score))[: self.swap_limit]
        pattern = _unit_pattern(alias)
        swapped = [pattern.sub(c.unit, question, count=1) for c in pool]
        kept_without = 1.0 - salience  # cos(question, question without the word)
        for cand, s_vec in zip(pool, self.embeddings.embed_documents(swapped), strict=True):
            cand.question = _clip((_dot(q_vec, s_vec) - kept_without) / max(salience, 1e-3))
            cand.score += W_QUESTION * cand.question
        # Stage 3 (a few corpus snippets each, for the shortlist only).
        shortlist = sorted(pool, key=lambda c: -c.score)[: self.shortlist]
        self._corpus_side(alias, shortlist, sources)
        for cand in shortlist:
            cand.score += W_CORPUS * cand.corpus
        # A term the answer does not cite must at least fit where the corpus uses it.
        ranked = sorted(
            (c for c in shortlist if c.cited or c.corpus > 0), key=lambda c: (-c.score, len(c.unit))
        )
        if not ranked:
            return None
        top = ranked[0]
        # The winner's family: the terms sharing a root with it ("expiry", "expired"; "path",
        # "pathname") or with one of those ("ceiling_kbps", "quiet_ceiling_kbps"). The
        # margin is over the rest.
        family = {c.unit for c in ranked if _kin(c.roots, top.roots)}
        family_roots = frozenset().union(*(c.roots for c in ranked if c.unit in family))
        others = [c for c in ranked if c.unit not in family and not _kin(c.roots, family_roots)]
        close = [c for c in ranked if c.unit in family and c.score >= top.score - 0.02]
        wanted = inflection(alias)
        canonical = min(
            close, key=lambda c: (inflection(c.unit) != wanted, len(c.roots), len(c.unit))
        ).unit
        # Identifiers and phrases have no inflection to compare; plain words must agree.
        plain = [c for c in ranked if c.unit in family and c.unit.isalpha()]
        agrees = not plain or any(inflection(c.unit) == wanted for c in plain)
        runner = others[0] if others else None
        margin = top.score - (runner.score if runner else 0.0)
        # One term in several forms ("passphrase", "passphrase_file"): its meaning evidence
        # is that of its best-fitting form.
        meaning = max(c.meaning for c in ranked if c.unit in family)
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
                "passage": round(top.support, 4),
                "spelled": float(top.spelled),
                "inflection_agrees": float(agrees),
                "meaning": round(meaning, 4),
            },
        )

    def _corpus_side(
        self, alias: str, shortlist: list[_Candidate], sources: Sequence[Source]
    ) -> None:
        """``r_corpus``: the absent word put where the corpus uses a candidate.

        Each use is a window of a few words either side inside its sentence: enough context
        to carry the meaning, and short, so long reference sentences cost little to embed.
        """
        sentences = [
            s.strip()
            for src in sources
            for s in _SENTENCE_END.split(str(src.get("text", "")))
            if len(s.strip()) >= 12
        ]
        jobs: list[tuple[_Candidate, str, str, str]] = []
        for cand in shortlist:
            cand.corpus = -1.0
            pattern = _unit_pattern(cand.unit)
            windows = []
            for sentence in sentences:
                found = pattern.search(sentence)
                if found is None:
                    continue
                before = sentence[: found.start()].split()[-CONTEXT_WORDS:]
                after = sentence[found.end() :].split()[:CONTEXT_WORDS]
                windows.append((" ".join(before), found.group(0), " ".join(after)))
                if len(windows) == 3:
                    break
            jobs.extend(
                (cand, f"{b} {unit} {a}", f"{b} {alias} {a}", f"{b} {a}") for b, unit, a in windows
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

"""Offline mode: answers, grades and rewrites computed without any language model.

The answer is extractive: the sentences of the retrieved passages that best cover the
question, each followed by the number of the passage it came from. The grade comes from
retrieval evidence (dense similarity of the best passage, share of the question's terms the
passages contain). The grader can still learn: when a question word occurs nowhere in the
corpus but the passages answered it anyway, it stores a search fact mapping that word to
the passage word that means the same (found by :mod:`retrievalagent.aliases`), so the next
search finds it lexically too.
"""

from __future__ import annotations

import asyncio
import math
import re
import threading
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from langchain_core.embeddings import Embeddings
from langchain_core.runnables import RunnableConfig

from retrievalagent.aliases import AliasFinder, SearchFact, new_search_fact
from retrievalagent.index import LexicalEncoder, VectorIndex
from retrievalagent.memory import (
    EARLIER,
    NOTHING_FOUND,
    Preference,
    asks,
    by_subject,
    find_preference,
    last_stated,
    user_statements,
)
from retrievalagent.models._base import Answer, AnswerRequest
from retrievalagent.types import Grade, Source

__all__ = ["EvidenceGrader", "ExtractiveAnswerer", "FeedbackRewriter"]

GENERATED_BY = "extractive (offline, no LLM)"
_SENTENCE = re.compile(r"(?<=[.!?])\s+(?=[A-Z0-9\"'(\[`*])|\n\s*\n|\n(?=\s*[-*] |\s*\d+\. )")
_MAX_ANSWER_CHARS = 700
_CITATION = re.compile(r"\s*\[\d+\]\s*")  # ends each sentence of an extractive answer
_TAUGHT_QUESTIONS = 256  # questions whose first attempt's alias a rewrite may still use


def _prose_sentences(text: str) -> list[str]:
    out = []
    for raw in _SENTENCE.split(text):
        sentence = " ".join(raw.split())
        if len(sentence) >= 12 and not sentence.startswith("```"):
            out.append(sentence)
    return out


def _sentences(text: str) -> list[str]:
    """Sentences of a passage in order; each Markdown table row counts as one sentence."""
    out: list[str] = []
    prose: list[str] = []
    for line in text.splitlines():
        if not line.lstrip().startswith("|"):
            prose.append(line)
            continue
        out.extend(_prose_sentences("\n".join(prose)))
        prose = []
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if not all(set(c) <= set("-: ") for c in cells):  # skip the |---|---| rule line
            out.append(" — ".join(c for c in cells if c))
    out.extend(_prose_sentences("\n".join(prose)))
    return out


def _quoted_earlier(
    recalled: Sequence[tuple[str, str]], bears: Callable[[str], int], user_id: str = ""
) -> str:
    """What the user told the agent before that bears on this question, quoted with its
    date: of the best recalled conversation memory holding statements about themselves,
    those sharing the most words with the question (``bears``), else all (none may name
    what is asked: "I named him Rex." for "What's my dog called?"). Not all when some do:
    "Which city do I live in?" quoted the diagnosis said beside the city."""
    for at, text in recalled:
        said = user_statements(text, [user_id] if user_id else ())
        if not said:
            continue
        shared = [bears(sentence) for sentence in said]
        most = max(shared)
        chosen = [s for s, n in zip(said, shared, strict=True) if n == most] if most else said
        day = f" on {at[:10]}" if at[:10] else ""
        return " " + EARLIER.format(day=day, statement=" ".join(chosen)[:300])
    return ""


def states_preferences_only(message: str, before: Sequence[Preference] = ()) -> bool:
    """Whether stating preferences is all ``message`` does: it asks nothing of the
    documents (``before``: as ``find_preference``)."""
    return find_preference(message, before=before) is not None and not asks(message)


@dataclass
class _Scored:
    score: float
    passage: int
    order: int
    text: str


def _dot(a: Sequence[float], b: Sequence[float]) -> float:
    return sum(x * y for x, y in zip(a, b, strict=True))


def _chosen(scored: Sequence[_Scored]) -> list[_Scored]:
    """The best sentence and up to two more close to it (within the length budget), in the
    order of the passages."""
    ranked = sorted(scored, key=lambda s: -s.score)
    best = ranked[0]
    chosen, length = [best], len(best.text)
    for candidate in ranked[1:]:
        if len(chosen) >= 3 or candidate.score < 0.75 * best.score:
            break
        if length + len(candidate.text) > _MAX_ANSWER_CHARS:
            continue
        chosen.append(candidate)
        length += len(candidate.text)
    chosen.sort(key=lambda s: (s.passage, s.order))
    return chosen


def _cited(chosen: Sequence[_Scored], sources: Sequence[Source]) -> str:
    """The chosen sentences as the answer: each ends with its passage's number, and the
    first from a passage is introduced by its section."""
    parts, introduced = [], set()
    for s in chosen:
        text = s.text.lstrip("-*• ").strip()
        text = text if text[-1:] in ".!?:" else text + "."
        headings = sources[s.passage].get("headings") or []
        section = " ".join(headings[-1].split()) if len(headings) >= 2 else ""
        if section and s.passage not in introduced and not text.startswith(section):
            # The section often carries what the sentence leaves implicit (a version, a code).
            text = f"{section}: {text}"
        introduced.add(s.passage)
        parts.append(f"{text} [{s.passage + 1}]")
    return " ".join(parts)


class ExtractiveAnswerer:
    """Answers with the sentences of the passages that best match the question, cited by number.

    A sentence's score mixes its share of question terms (BM25 tokens, recalled alias terms
    included), its cosine similarity to the question (when an embedder is given; sentence
    vectors are cached per chunk) and the rank of its passage. A passage's own heading
    competes as a sentence, since reference pages often put the answer there.
    """

    streams_tokens = False

    def __init__(
        self, encoder: LexicalEncoder, embeddings: Embeddings | None = None, cache_size: int = 2048
    ) -> None:
        self.encoder = encoder
        self.embeddings = embeddings
        self._cache: OrderedDict[str, list[list[float]]] = OrderedDict()
        self._cache_size = cache_size

    def _units(self, src: Source) -> list[str]:
        return _sentences(str(src.get("text", "")))

    def _section_terms(self, src: Source) -> set[int]:
        headings = src.get("headings") or []
        return set(self.encoder.query_terms(headings[-1])) if len(headings) >= 2 else set()

    def _vectors(self, key: str, units: list[str]) -> list[list[float]] | None:
        if self.embeddings is None or not units:
            return None
        if key in self._cache:
            self._cache.move_to_end(key)
            return self._cache[key]
        vectors = self.embeddings.embed_documents(units)
        self._cache[key] = vectors
        while len(self._cache) > self._cache_size:
            self._cache.popitem(last=False)
        return vectors

    def answer(self, request: AnswerRequest, config: RunnableConfig | None = None) -> Answer:
        before = last_stated(request.history)
        if states_preferences_only(request.question, before):
            stated = by_subject(request.question, before=before)
            noted = " ".join(p.instruction for p in stated)
            these = "this preference" if len(stated) == 1 else "these preferences"
            return Answer(
                f"Noted, I will remember {these}: {noted} "
                "(Offline answers quote your documents; a language model configured "
                "later will follow it.)",
                GENERATED_BY,
                llm=False,
            )
        if not request.sources:  # what the user said before still bears on it
            return Answer(
                NOTHING_FOUND + self._earlier(request),
                GENERATED_BY,
                llm=False,
            )
        scored = self._scored_sentences(request)
        if not scored:
            return Answer("The passages found hold no readable text.", GENERATED_BY, llm=False)
        text = _cited(_chosen(scored), request.sources) + self._earlier(request)
        return Answer(text, GENERATED_BY, llm=False)

    def _earlier(self, request: AnswerRequest) -> str:
        wanted = set(self.encoder.query_terms(request.question))

        def bears(sentence: str) -> int:
            return len(wanted.intersection(self.encoder.query_terms(sentence)))

        return _quoted_earlier(request.earlier, bears, request.user_id)

    def _wanted_terms(self, request: AnswerRequest) -> set[int]:
        """The terms an answer sentence should hold: the query's, the question's and the
        recalled facts' corpus terms."""
        wanted = set(self.encoder.query_terms(request.query))
        wanted |= set(self.encoder.query_terms(request.question))
        if request.memory_terms:
            wanted |= set(self.encoder.query_terms(request.memory_terms))
        return wanted

    def _scored_sentences(self, request: AnswerRequest) -> list[_Scored]:
        """Every sentence of the top four passages, scored (see the class docstring)."""
        wanted = self._wanted_terms(request)
        question_vector = None
        if self.embeddings is not None:
            question_vector = self.embeddings.embed_query(request.question)
        passages = request.sources[:4]
        section_terms = [self._section_terms(src) for src in passages]
        passage_terms = [
            set(self.encoder.query_terms(str(src.get("text", "")))) | section
            for src, section in zip(passages, section_terms, strict=True)
        ]
        # Rarity among the retrieved passages stands in for IDF: "409" (in one passage)
        # says more than "error" (in all of them).
        weight = {
            t: math.log(1 + len(passages) / (1 + sum(t in terms for terms in passage_terms)))
            for t in wanted
        }
        total = sum(weight.values()) or 1.0
        scored: list[_Scored] = []
        for p, src in enumerate(passages):
            units = self._units(src)
            vectors = self._vectors(str(src.get("id", p)) + str(len(units)), units)
            prior = 1.0 / (1 + p)
            for order, sentence in enumerate(units):
                # A sentence also speaks for the section heading above it ("LF-409 Vault is
                # locked ..."), which the answer then quotes before it.
                terms = set(self.encoder.query_terms(sentence)) | section_terms[p]
                lexical = sum(weight[t] for t in wanted & terms) / total
                semantic = 0.0
                if vectors is not None and question_vector is not None:
                    semantic = max(0.0, _dot(vectors[order], question_vector))
                score = 0.4 * lexical + 0.35 * semantic + 0.25 * prior
                scored.append(_Scored(score, p, order, sentence))
        return scored

    async def aanswer(self, request: AnswerRequest, config: RunnableConfig | None = None) -> Answer:
        return await asyncio.to_thread(self.answer, request, config)


def _rescaled(cosine: float) -> float:
    """0..1 from the range where the packaged model separates relevant from unrelated text."""
    return min(1.0, max(0.0, (cosine - 0.25) / 0.45))


class EvidenceGrader:
    """Grades the answer from what it says and proposes search facts for words the corpus
    lacks.

    ``confidence`` is about the answer the user gets: the cosine similarity of its sentence
    closest to the question (rescaled), mixed with the share of the question's terms the
    answer contains. An extractive answer quoting a passage that is about something else
    ("what a vault is" for "where is the repository stored by default?") is then
    insufficient, even when the passages themselves were close to the question. Whether the
    passages were (their best cosine and the share of question terms they contain) decides
    whether an alias is worth learning from the turn.
    """

    def __init__(
        self,
        encoder: LexicalEncoder,
        index: VectorIndex,
        embeddings: Embeddings,
        min_confidence: float = 0.35,
        *,
        learn_aliases: bool = True,
    ) -> None:
        self.encoder = encoder
        self.index = index
        self.embeddings = embeddings
        self.min_confidence = min_confidence
        # The alias search embeds ~100 short texts (~0.3 s on 2 cores) for a question with
        # a word the corpus lacks; an agent with nowhere to store the fact skips it.
        self.aliases = AliasFinder(encoder, index, embeddings) if learn_aliases else None
        # What each recent question taught from the passages its own words found, for its
        # rewritten attempts (whose passages answer the rewrite's added words instead).
        self._taught: OrderedDict[str, SearchFact | None] = OrderedDict()
        self._taught_lock = threading.Lock()

    @staticmethod
    def _unexplained(request: AnswerRequest) -> str:
        """The question without the words recalled facts explain: such a word is absent
        from the corpus by definition, covered by the fact's terms, not missing (else every
        such turn is rewritten)."""
        question = request.question
        for alias in request.known_aliases:
            question = re.sub(rf"(?i)\b{re.escape(alias)}\w*", " ", question)
        return question

    def _evidence(self, request: AnswerRequest) -> float:
        """How well the passages match the question (the gate for learning an alias)."""
        if not request.sources:
            return 0.0
        top = request.sources[:3]
        cosines = [request.dense_scores.get(s["id"], 0.0) for s in top]
        texts = [" ".join(s.get("headings") or []) + " " + str(s.get("text", "")) for s in top]
        coverage = self.encoder.coverage(self._unexplained(request), [*texts, request.memory_terms])
        return round(0.6 * _rescaled(max(cosines, default=0.0)) + 0.4 * coverage, 3)

    def _confidence(self, request: AnswerRequest) -> float:
        """How well the answer addresses the question: its closest sentence and its terms."""
        sentences = [s for s in _CITATION.split(request.answer) if s.strip()]
        if not request.sources or not sentences:
            return 0.0
        question = self.embeddings.embed_query(request.question)  # cached: search embedded it
        closest = max(_dot(question, v) for v in self.embeddings.embed_documents(sentences))
        coverage = self.encoder.coverage(
            self._unexplained(request), [request.answer, request.memory_terms]
        )
        return round(0.6 * _rescaled(closest) + 0.4 * coverage, 3)

    def _alias(self, request: AnswerRequest) -> SearchFact | None:
        """The search fact for a question word absent from the corpus, if one is learned.

        Only the passages the user's own words found teach: a rewritten attempt (the query
        is no longer the question) keeps what the first attempt of its question taught.
        """
        if self.aliases is None:
            return None
        if request.query != request.question:
            with self._taught_lock:
                return self._taught.get(request.question)
        fact = None
        if (evidence := self._evidence(request)) >= self.min_confidence:
            proposal = self.aliases.propose(
                request.question, request.sources, request.answer, evidence
            )
            fact = new_search_fact(
                proposal,
                self.encoder,
                known_aliases=request.known_aliases,
                memory_terms=request.memory_terms,
            )
        with self._taught_lock:
            self._taught[request.question] = fact
            self._taught.move_to_end(request.question)
            while len(self._taught) > _TAUGHT_QUESTIONS:
                self._taught.popitem(last=False)
        return fact

    def grade(self, request: AnswerRequest, config: RunnableConfig | None = None) -> Grade:
        before = last_stated(request.history)
        preference = find_preference(request.question, before=before)
        if preference is not None:  # rules in memory._preferences (documented)
            only = states_preferences_only(request.question, before)
            confidence = 0.9 if only else self._confidence(request)
            return Grade(
                sufficient=only or confidence >= self.min_confidence,
                confidence=confidence,
                memory_worth_storing=True,
                memory_kind="preference",
                memory_key=preference.subject,
                memory_confidence=0.9,
                memory_fact=preference.instruction,
            )
        confidence = self._confidence(request)
        learned = self._alias(request)
        return Grade(
            sufficient=bool(request.sources) and confidence >= self.min_confidence,
            confidence=confidence,
            memory_worth_storing=learned is not None,
            memory_key=learned.alias if learned else "",
            memory_confidence=learned.confidence if learned else 0.0,
            memory_fact=learned.text if learned else "",
        )

    async def agrade(self, request: AnswerRequest, config: RunnableConfig | None = None) -> Grade:
        return await asyncio.to_thread(self.grade, request, config)


class FeedbackRewriter:
    """Offline query rewrite: add the best passage's most distinctive words (pseudo-relevance
    feedback), skipping rewrites already tried."""

    def __init__(self, encoder: LexicalEncoder, extra_words: int = 3) -> None:
        self.encoder = encoder
        self.extra_words = extra_words

    def rewrite(
        self, request: AnswerRequest, tried: Sequence[str], config: RunnableConfig | None = None
    ) -> str | None:
        if not request.sources:
            return None
        have = set(self.encoder.words(request.query))
        counts: dict[str, int] = {}
        for src in request.sources[:2]:
            for word in self.encoder.words(str(src.get("text", ""))):
                if word not in have and len(word) > 3 and not word.isdigit():
                    counts[word] = counts.get(word, 0) + 1
        ranked = sorted(counts, key=lambda w: (-counts[w], w))
        tried_set = {t.strip().lower() for t in tried}
        for start in range(0, max(1, len(ranked) - self.extra_words + 1)):
            extra = ranked[start : start + self.extra_words]
            if not extra:
                break
            candidate = f"{request.question} {' '.join(extra)}"
            if candidate.lower() not in tried_set:
                return candidate
        return None

    async def arewrite(
        self, request: AnswerRequest, tried: Sequence[str], config: RunnableConfig | None = None
    ) -> str | None:
        return self.rewrite(request, tried, config)

"""Hybrid search over one user's conversation memories, held in process.

A LangGraph store without a vector index cannot rank a user's ten thousand past exchanges
per question: listing them alone takes a third of a second from PostgreSQL. So the
conversation memories of recently active users are held here, as the store backend loads
them: unit vectors in one matrix (the dense list is one matrix product) and BM25 postings
over the same term ids the corpus uses (the lexical list), so names, numbers and versions
match by their words. The two lists are fused by the agent's own fuser, as document search
fuses its lists.

Each candidate also carries absolute scores, since a fused score is relative to its lists
and cannot say whether anything is relevant at all: ``similarity`` (cosine), ``lexical``
(the share of the query's IDF weight the memory contains) and ``alone`` (their mix before
context, below). Selection gates on those (``memory._recall``).

A time window (from "last week", "in March", ... see ``memory._temporal``) puts the
memories said within it first, each part ranked by relevance. A question about how things
stand now ("What is my rate now?", "Am I still on line 14?") lifts the candidates by their
order in time (``PRESENT_BONUS``): of two statements on it, the newer comes first.

An exchange also ranks by the one just before it in its conversation (``CONTEXT_STEPS``,
``CONTEXT_DECAY``): a follow-up ("passed all his phase 4 exams", after "How did Seán do?")
is about what was said before it, which its own words rarely name. That orders the lists;
the relevance gate reads a memory's own words (``Candidate.alone``), except that an answer
to a question (the exchange before it ends with "?") passes the gate when its question
does, and a correction ("Sorry, I meant Milan.") when what it corrects does: an unrelated
message that merely came next is not recalled, a reply or a correction is.

A memory's similarity also reads its parts (``said_spans``: what was said, cut at its
clauses, each with a vector of its own, pooled from the message's run of the embedder
where it can: see ``embeddings._spans``): one vector for a whole message dilutes the clause that
answers a question ("small win: raised my rate to 110 AUD an hour from 1 July, Koala said
yes without a fight" is 0.19 similar to "How much do I charge per hour now?", its clause
about the rate 0.49), and sees nothing of a long one past the embedder's token limit.
"""

from __future__ import annotations

import math
import re
import threading
from collections import OrderedDict
from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

import numpy as np

from retrievalagent.index import Hit, LexicalEncoder
from retrievalagent.memory._conversations import SENTENCE_END, found_by
from retrievalagent.memory._kinds import kinds_asked, kinds_named
from retrievalagent.retrieval import Fuser, make_fuser

__all__ = [
    "Candidate",
    "IndexCache",
    "UserIndex",
    "memory_fuser",
    "rank_pool",
    "relevance",
    "said_spans",
    "unit",
]

#: Candidates each list contributes to fusion.
_LIST_DEPTH = 50
#: Candidates taken by their relevance alone, beside the fused ones (set beforehand).
_BY_RELEVANCE = 3
#: How recall fuses its lists: convex, the dense list weighted 0.6 (chosen on the dev half
#: of bench/memory's conversation set, see docs/benchmarks.md).
MEMORY_DENSE_WEIGHT = 0.6
#: Added to the fused score (convex fusion: 0 to 1) of what a person the question names
#: said ("What did Sam say about the crash?"), chosen on the same dev half.
SPEAKER_BONUS = 0.3
_Score = TypeVar("_Score", float, np.ndarray)  # one memory's, or every row's at once
#: The fewest memories IDF is computed as if there were (see ``UserIndex._idf``).
_MIN_IDF_DOCS = 100
#: Candidates from outside a question's time window, however much the window holds: a
#: question read as pointing at a time ("May 2 teams share the server?", "... on Sunday?")
#: may not be about that time, and what bears on it by its words must stay within reach.
OUTSIDE_WINDOW = 3
#: How many exchanges back in its conversation a memory draws relevance from, and the share
#: of it each step keeps (chosen on the dev half of bench/memory's conversation set).
CONTEXT_STEPS = 1
CONTEXT_DECAY = 0.6
#: Added to the fused score of the newest of the candidates on the question's subject, in
#: proportion to their order by time, when a question asks how things stand now (chosen on
#: the same dev half).
PRESENT_BONUS = 0.1
#: Which candidates that order takes in: those whose relevance by their own words is at
#: least this share of the best one's (chosen on the same dev half: 0.3 and 0.5 and 0.7
#: gave recall@5 0.890, 0.881 and 0.872, recall@10 0.995 each).
SUBJECT_SHARE = 0.3
#: For a question about now, the memories whose later restatements are looked for: the
#: most relevant (at most ``_UPDATED_LEADS``, within ``UPDATED_SHARE`` of the best), and the
#: least IDF a word they share must have to name the same thing (a word in about one in
#: ten of a user's memories, or fewer). Set beforehand from the statements of a hostile
#: pass ("Where do I live now?"), not tuned; on the dev half of bench/memory's conversation
#: set recall@10 stayed 0.979, and went from 0.933 to 0.942 with 50 conversations added
#: (see ``UserIndex._updates_lifted``).
_UPDATED_LEADS = 3
#: Words that say something changed ("moved", "left", "switched", "new", "no longer"): a
#: later mention of the same name without one ("had lunch with Sarah") is no update.
_CHANGE = re.compile(
    r"\b(?:mov(?:e|ed|ing)|left|leav(?:e|ing)|quit|switch(?:ed|ing)?|chang(?:e|ed|ing)"
    r"|sold|bought|replac(?:e|ed|ing)|migrat(?:e|ed|ing)|rais(?:e|ed)|lower(?:ed)?"
    r"|join(?:ed|ing)?|start(?:ed|ing)|stopp?(?:ed|ing)?|became|become|now|new|no longer"
    r"|anymore|instead|upgrad(?:e|ed|ing)|downgrad(?:e|ed|ing)|went|got|took over|retired"
    r"|hired|promoted|divorced|married|broke up|split up)\b",
    re.IGNORECASE,
)
#: The speaker as the subject ("I", "I'm", "we"): "My brother just moved to Oslo" changes
#: nothing about the user.
_FIRST_PERSON = re.compile(r"\b(?:i|i['’](?:m|ve|d|ll)|we|we['’](?:re|ve|d|ll))\b", re.IGNORECASE)
#: Words that may open a clause whose subject is left out ("Small win: raised my rate",
#: "just moved to Lisbon"): said of the speaker.
_OPENERS = frozenset(
    {"just", "finally", "recently", "also", "so", "and", "then", "already", "officially",
     "today", "yesterday", "btw", "oh", "well", "anyway", "actually", "now"}
)  # fmt: skip
#: A change only thought of ("I might move to Oslo", "if I switch to Rust", "thinking about
#: leaving"), not made.
_NOT_MADE = re.compile(
    r"\b(?:might|may|maybe|perhaps|if|would|could|should|thinking\ (?:about|of)|considering"
    r"|plan(?:ning)?\ to|want(?:ing)?\ to|hop(?:e|ing)\ to|not\ sure|whether)\b",
    re.IGNORECASE,
)
_CLAUSE_START = re.compile(r"^(?:.*[,;:—–(])?\s*", re.DOTALL)


def _asks_of_self(question: str) -> bool:
    """Whether ``question`` asks about the user ("Where do I live now?"), not about
    something of theirs ("What does my team use now?")."""
    return re.search(r"\b(?:i|me|i['’]m)\b", question, re.IGNORECASE) is not None


def _tells_change(said: str, by_speaker: bool) -> bool:
    """Whether one of ``said``'s sentences tells of a change made (a word of ``_CHANGE``),
    not one only considered ("I might move"); with ``by_speaker``, one the speaker made:
    its subject "I", "we", or none ("Small win: raised my rate"), not another person ("my
    brother moved", for "Where do I live now?")."""
    for sentence in (s for line in said.splitlines() for s in SENTENCE_END.split(line)):
        change = _CHANGE.search(sentence)
        if change is None or _NOT_MADE.search(sentence):
            continue
        if not by_speaker or _FIRST_PERSON.search(sentence):
            return True
        before = sentence[: change.start()]
        opening = before[_CLAUSE_START.match(before).end() :]  # type: ignore[union-attr]
        if all(w.casefold() in _OPENERS for w in re.findall(r"[^\W\d_]+", opening)):
            return True
    return False


#: A name: a capitalised word inside a sentence ("Berlin", "Google", "EUR", "Jenkins"; not
#: a sentence's first word, nor "I"), what a restatement names again.
_NAME = re.compile(r"(?<![.!?:\n]\s)(?<!^)(?<=\s)(?!I\b|I'|I’)[A-Z][\w\-]*")
UPDATED_SHARE = 0.8
NAMING_IDF = 2.2
#: An exchange whose first line corrects what was said just before ("Sorry, I meant
#: Milan.", "Correction: it's 16 GB", "Typo, Debian 12", "No wait, Tuesday"): about the
#: exchange it follows (``_answering``).
_CORRECTING = re.compile(
    r"^[^:\n]{1,40}:\s*(?:(?:correction|typo|no\ wait|wait,?\ no)\b"
    r"|[^\n]{0,40}?\b(?:i\ meant|i\ misspoke|scratch\ that|should\ have\ said|i\ mean(?!\ it\b))\b)",
    re.IGNORECASE,
)
#: Where what was said is cut into parts: after a clause's punctuation, and at line ends.
_PART_BREAK = re.compile(r"(?<=[.!?…,;:])\s+|\n+")
#: A stored line's speaker ("user: ", "Jonas: "), not part of what was said.
_SPEAKER = re.compile(r"^[^:\n]{1,40}: ")
#: Fewest words a part needs to be embedded: "ok so," or "Sure:" says nothing alone.
PART_MIN_WORDS = 3
#: Most parts one memory is embedded as (a long paste's clauses are joined into as many).
MAX_PARTS = 24
#: The share of a memory's similarity taken from its best part, where that is higher than
#: the whole text's (the rest is the whole's), for its place in the order; the relevance
#: bar reads the whole's alone (see ``UserIndex.search``). Set at 0.5 beforehand, not tuned:
#: on the dev half of bench/memory's conversation set, recall@5 went from 0.876 to 0.900
#: (recall@10 0.982 both); with long histories see docs/benchmarks.md.
PART_WEIGHT = 0.5


def relevance(similarity: _Score, lexical: _Score) -> _Score:
    """How relevant a memory is to a question, on an absolute scale (fused scores are
    relative to their lists): its similarity and its share of the question's word weight,
    mixed with the fusion's own weights. ``conversation_relevance_threshold`` gates it."""
    return MEMORY_DENSE_WEIGHT * similarity + (1.0 - MEMORY_DENSE_WEIGHT) * lexical


def memory_fuser() -> Fuser:
    """The fusion recall uses: the document search's convex fusion, weighted for memory."""
    return make_fuser("convex", dense_weight=MEMORY_DENSE_WEIGHT)


def unit(vector: Sequence[float] | np.ndarray) -> np.ndarray:
    """A vector as unit-length float32 (all zeros stays zeros), for cosine by one dot."""
    arr = np.asarray(vector, dtype=np.float32).ravel()
    norm = float(np.linalg.norm(arr))
    return arr / norm if norm and math.isfinite(norm) else np.zeros_like(arr)


def said_spans(said: str) -> list[tuple[int, int]]:
    """Where the parts of what was said in a memory are (character offsets), the parts
    ranked beside the whole (see the module docstring): its clauses of
    ``PART_MIN_WORDS`` words or more, speakers left out, at most ``MAX_PARTS`` (runs of
    neighbours taken as one beyond that). Empty when there would be only one: the whole
    text's vector says the same."""
    spans: list[tuple[int, int]] = []
    at = 0
    for line in said.split("\n"):
        speaker = _SPEAKER.match(line)
        begin = speaker.end() if speaker else 0
        for piece in _PART_BREAK.split(line[begin:]):
            stripped = piece.strip()
            start = line.index(piece, begin) + piece.index(stripped) if stripped else begin
            begin = start + len(stripped)
            if len(stripped.split()) >= PART_MIN_WORDS:
                spans.append((at + start, at + begin))
        at += len(line) + 1
    if len(spans) > MAX_PARTS:
        size = math.ceil(len(spans) / MAX_PARTS)
        spans = [
            (spans[i][0], spans[min(i + size, len(spans)) - 1][1])
            for i in range(0, len(spans), size)
        ]
    return spans if len(spans) > 1 else []


@dataclass
class Candidate:
    """One memory found for a query, with why: both absolute scores and the fused rank."""

    key: str
    value: dict[str, Any]
    similarity: float
    lexical: float
    fused: float
    in_window: bool = False
    #: The relevance the bar reads: by its own words, or, for an answer, by the question it
    #: answers (``_answering``); not what the exchange before it lends its ranking.
    alone: float = 0.0
    #: Added to its relevance where recall orders by it: newer first when asked "now".
    boost: float = 0.0

    @property
    def score(self) -> float:
        """What recall orders it by: its relevance with the context lift, plus ``boost``."""
        return float(relevance(self.similarity, self.lexical)) + self.boost


@dataclass
class _Rows:
    """Row-aligned storage; a replaced or deleted row is marked dead (``UserIndex._alive``),
    compacted later."""

    keys: list[str] = field(default_factory=list)
    at: list[str] = field(default_factory=list)
    threads: list[str] = field(default_factory=list)
    speakers: list[frozenset[str]] = field(default_factory=list)
    terms: list[dict[int, float]] = field(default_factory=list)
    places: list[int] = field(default_factory=list)
    written: list[int] = field(default_factory=list)  # "written_us": one write, one value
    #: an exchange (not a fact) stored with its place: one that follows another in order
    linked: list[bool] = field(default_factory=list)


class UserIndex:
    """The conversation memories of one user: vectors, BM25 postings and stored values.

    ``context``: whether a memory also ranks by the exchange before it (off for a pool
    another engine picked, which holds only some exchanges of a conversation)."""

    def __init__(self, encoder: LexicalEncoder, *, context: bool = True) -> None:
        self.encoder = encoder
        self.context = context
        self.values: dict[str, dict[str, Any]] = {}
        self._row_of: dict[str, int] = {}
        self._rows = _Rows()
        self._matrix = np.zeros((0, 0), dtype=np.float32)
        # the vectors of memories' parts (``said_spans``), each memory's in a run of rows:
        # row -> (first, end) in ``_part_matrix``
        self._part_matrix = np.zeros((0, 0), dtype=np.float32)
        self._parts_of: dict[int, tuple[int, int]] = {}
        self._parts_end = 0
        self._part_runs: tuple[np.ndarray, np.ndarray] | None = None  # rows, firsts
        # Per-row state a search reads whole is kept as arrays, so a search over ten
        # thousand memories does not walk Python lists: liveness (grown with the matrix),
        # and the times said (rebuilt at the first search after a change).
        self._alive = np.zeros(0, dtype=bool)
        self._at: np.ndarray | None = None
        # the row of the exchange before each row (-1: none; see _previous), grown with
        # the matrix: kept up as rows are added in the order said, rebuilt when one comes
        # earlier than its thread's last or one is removed
        self._before = np.zeros(0, dtype=np.int64)
        self._last_of: dict[str, int] = {}  # thread -> its latest row
        self._asks = np.zeros(0, dtype=bool)  # ends with a question (see _answering)
        self._corrects = np.zeros(0, dtype=bool)  # corrects the one before (see _answering)
        self._before_stale = False
        # term -> (rows, weights) as lists, and as arrays once a search needed them
        self._postings: dict[int, tuple[list[int], list[float]]] = {}
        self._posting_arrays: dict[int, tuple[np.ndarray, np.ndarray]] = {}
        self._df: dict[int, int] = {}
        self._thread_rows: dict[str, list[int]] = {}
        self._text_rows: dict[str, list[int]] = {}  # what was said -> rows that say it
        self._speakers: dict[str, int] = {}  # speaker name (case-folded) -> rows
        self._dead = 0
        #: What the store said when this index was last brought up to date.
        self.stamps: tuple[str, str] = ("", "")
        self.high_water = 0  # the newest "written_us" seen
        self.checked = 0.0  # time.monotonic() of that

    def __len__(self) -> int:
        return len(self.values)

    @property
    def dimension(self) -> int:
        """The length of the vectors held (0 before the first)."""
        return int(self._matrix.shape[1]) if self._rows.keys else 0

    # -- changes ---------------------------------------------------------------------------
    def holds(self, key: str, value: dict[str, Any]) -> bool:
        """Whether the memory under ``key`` is already held as ``value`` (as stored)."""
        return key in self._row_of and self.values.get(key) == _held_value(value)

    def upsert(
        self,
        key: str,
        value: dict[str, Any],
        vector: np.ndarray,
        parts: np.ndarray | None = None,
    ) -> None:
        """Add a memory, or replace the one stored under ``key`` (the same value again
        changes nothing: a store read back what this index holds already). ``parts``: the
        unit vectors of its ``said_spans``, one per row, if it has any."""
        if self.holds(key, value):
            return
        value = _held_value(value)
        if key in self._row_of:
            self._kill(self._row_of.pop(key))
            self._compact_if_sparse()
        text = str(value.get("text") or "")
        row = len(self._rows.keys)
        searched = found_by(text, value.get("form"), value.get("subject"))
        # the kinds of what the people said: a reply naming Ubuntu says nothing of theirs
        said = value.get("said")
        kinds = kinds_named(said if isinstance(said, str) else text)
        sparse = self.encoder.encode_document(f"{searched} {kinds}".rstrip())
        terms = dict(zip(sparse.indices, sparse.values, strict=True))
        self._append_vector(row, vector)
        if parts is not None and parts.ndim == 2 and len(parts):
            self._append_parts(row, parts)
        self._alive[row] = True
        self._rows.keys.append(key)
        self._rows.at.append(str(value.get("at") or ""))
        self._at = None
        thread = str(value.get("thread_id") or "")
        self._rows.threads.append(thread)
        place, stamp = value.get("place"), value.get("written_us")
        placed = isinstance(place, int) and _small_int(place) and place >= 0
        self._rows.places.append(place if isinstance(place, int) and placed else 0)
        self._rows.written.append(stamp if isinstance(stamp, int) and _small_int(stamp) else 0)
        # memories stored without their place (before it was kept) rank by their own words:
        # a store lists them in no particular order, and one import shares one time
        self._rows.linked.append(placed and value.get("form") in (None, "", "exchange"))
        self._asks[row] = text.rstrip().endswith("?")
        self._corrects[row] = _CORRECTING.match(text) is not None
        self._follow(row, thread)
        names = value.get("speakers")
        people = (
            frozenset(str(n).casefold() for n in names if n)
            if isinstance(names, list)
            else frozenset()
        )
        self._rows.speakers.append(people)
        for name in people:
            self._speakers[name] = self._speakers.get(name, 0) + 1
        self._thread_rows.setdefault(thread, []).append(row)
        self._text_rows.setdefault(text, []).append(row)
        self._rows.terms.append(terms)
        for term, weight in terms.items():
            rows, weights = self._postings.setdefault(term, ([], []))
            rows.append(row)
            weights.append(weight)
            self._posting_arrays.pop(term, None)
            self._df[term] = self._df.get(term, 0) + 1
        self._row_of[key] = row
        self.values[key] = value
        written = value.get("written_us")
        if isinstance(written, int) and not isinstance(written, bool):
            self.high_water = max(self.high_water, written)

    def delete(self, keys: Iterable[str]) -> None:
        for key in keys:
            if key in self._row_of:
                self._kill(self._row_of.pop(key))
                self.values.pop(key, None)
        self._compact_if_sparse()

    def values_at(self, row: int) -> dict[str, Any]:
        return self.values.get(self._rows.keys[row], {}) if self._alive[row] else {}

    def _kill(self, row: int) -> None:
        self._alive[row] = False
        self._before_stale = True
        self._dead += 1
        for term in self._rows.terms[row]:
            self._df[term] -= 1
        for name in self._rows.speakers[row]:
            self._speakers[name] -= 1
            if not self._speakers[name]:
                del self._speakers[name]

    def _append_vector(self, row: int, vector: np.ndarray) -> None:
        if self._matrix.shape[1] != vector.shape[0]:
            if row:  # another embedding size than the rows so far: keep them all unscored
                vector = np.zeros(self._matrix.shape[1], dtype=np.float32)
            else:
                self._matrix = np.zeros((16, vector.shape[0]), dtype=np.float32)
        if row >= self._matrix.shape[0]:
            grown = np.zeros(
                (max(16, 2 * self._matrix.shape[0]), self._matrix.shape[1]), np.float32
            )
            grown[: self._matrix.shape[0]] = self._matrix
            self._matrix = grown
        if row >= self._alive.shape[0]:
            alive = np.zeros(self._matrix.shape[0], dtype=bool)
            alive[: self._alive.shape[0]] = self._alive
            self._alive = alive
            before = np.full(self._matrix.shape[0], -1, dtype=np.int64)
            before[: self._before.shape[0]] = self._before
            self._before = before
            asks = np.zeros(self._matrix.shape[0], dtype=bool)
            asks[: self._asks.shape[0]] = self._asks
            self._asks = asks
            corrects = np.zeros(self._matrix.shape[0], dtype=bool)
            corrects[: self._corrects.shape[0]] = self._corrects
            self._corrects = corrects
        self._matrix[row] = vector

    def _append_parts(self, row: int, parts: np.ndarray) -> None:
        if not self._matrix.shape[1] or parts.shape[1] != self._matrix.shape[1]:
            return  # another embedding size: the memory ranks by its whole vector
        first, end = self._parts_end, self._parts_end + len(parts)
        if end > self._part_matrix.shape[0]:  # parts share the rows' width, set by the first
            grown = np.zeros((max(64, 2 * end), parts.shape[1]), dtype=np.float32)
            if first:
                grown[:first] = self._part_matrix[:first]
            self._part_matrix = grown
        self._part_matrix[first:end] = parts
        self._parts_of[row] = (first, end)
        self._parts_end = end
        self._part_runs = None

    def _best_parts(self, query_vector: np.ndarray, size: int) -> np.ndarray:
        """Per row, the similarity of its best part to the query (-inf: no parts)."""
        best = np.full(size, -np.inf, dtype=np.float64)
        if not self._parts_of or query_vector.shape[0] != self._part_matrix.shape[1]:
            return best
        if self._part_runs is None:
            runs = sorted((first, row) for row, (first, _) in self._parts_of.items())
            self._part_runs = (
                np.array([row for _, row in runs], dtype=np.int64),
                np.array([first for first, _ in runs], dtype=np.int64),
            )
        rows, firsts = self._part_runs
        sims = _dot(self._part_matrix[: self._parts_end], query_vector)
        # each memory's parts are one run, the runs in order: the best of each at once
        best[rows] = np.maximum.reduceat(sims, firsts)
        return best

    def _compact_if_sparse(self) -> None:
        """Rebuild once dead rows outnumber live ones: each search scans every row."""
        if self._dead > 64 and self._dead > len(self._row_of):
            self._compact()

    def _parts(self, row: int) -> np.ndarray | None:
        span = self._parts_of.get(row)
        return None if span is None else self._part_matrix[span[0] : span[1]].copy()

    def _compact(self) -> None:
        """Rebuild without dead rows (after many replacements or deletions)."""
        live = [
            (k, self.values[k], self._matrix[self._row_of[k]], self._parts(self._row_of[k]))
            for k in self._row_of
        ]
        kept = self.stamps, self.high_water, self.checked
        self.__init__(self.encoder, context=self.context)  # type: ignore[misc]
        for key, value, vector, parts in live:
            self.upsert(key, value, vector, parts)
        self.stamps, self.high_water, self.checked = kept

    def session_window(self, back: int, current_thread: str = "") -> tuple[str, str] | None:
        """When the conversation ``back`` conversations before the current one took place
        (1: the latest other one), as a window; None when there were not that many."""
        spans: dict[str, tuple[str, str]] = {}
        for value in self.values.values():
            thread, at = str(value.get("thread_id") or ""), str(value.get("at") or "")
            if not at or thread == current_thread:
                continue
            first, last = spans.get(thread, (at, at))
            spans[thread] = (min(first, at), max(last, at))
        order = sorted(spans.values(), key=lambda span: span[1], reverse=True)
        if not 0 < back <= len(order):
            return None
        first, last = order[back - 1]
        return first, last + "\x7f"  # just after its last memory

    # -- search ----------------------------------------------------------------------------
    def _idf(self, term: int) -> float:
        # A user's first memories would make every word they hold look common (one memory:
        # each of its words is in all of them), so IDF counts at least _MIN_IDF_DOCS.
        n, df = max(len(self.values), _MIN_IDF_DOCS), self._df.get(term, 0)
        return math.log(1.0 + (n - df + 0.5) / (df + 0.5))

    def _posting(self, term: int) -> tuple[np.ndarray, np.ndarray] | None:
        """The rows holding ``term`` and its weight in each, as arrays."""
        arrays = self._posting_arrays.get(term)
        if arrays is None:
            postings = self._postings.get(term)
            if not postings or not postings[0]:
                return None
            arrays = (np.array(postings[0], dtype=np.int64), np.array(postings[1], np.float64))
            self._posting_arrays[term] = arrays
        return arrays

    def _lexical(self, query_terms: Collection[int], size: int) -> tuple[np.ndarray, np.ndarray]:
        """BM25 score and matched share of the query's IDF weight, per row."""
        bm25 = np.zeros(size, dtype=np.float64)
        share = np.zeros(size, dtype=np.float64)
        total = sum(self._idf(t) for t in query_terms)
        for term in query_terms:
            posting = self._posting(term)
            if posting is None:
                continue
            idf = self._idf(term)
            rows, weights = posting
            # a row holds a term once, so rows are distinct: plain fancy-index adds
            bm25[rows] += idf * weights
            share[rows] += idf / total if total else 0.0
        return bm25, share

    def search(
        self,
        query: str,
        query_vector: np.ndarray,
        fuser: Fuser,
        limit: int,
        *,
        window: tuple[str, str] | None = None,
        thread_id: str = "",
        seen: Collection[str] = (),
        present: bool = False,
        until: str = "",
    ) -> list[Candidate]:
        """The ``limit`` best memories for ``query``: those said within ``window`` first
        (when any are), each part in fused order. Memories of ``thread_id`` drawn only from
        messages in ``seen`` (ids of the messages of this thread the answer prompt shows,
        and the texts of its exchanges) are left out: the model sees those turns already;
        so are those said after ``until`` (a UTC time as ``iso`` writes it: a turn replayed
        at its time), before ranking, so that they take no place among the candidates."""
        size = len(self._rows.keys)
        if not self.values or limit <= 0:
            return []
        alive = self._open_rows(size, thread_id, seen, until)
        similarity = np.zeros(size, dtype=np.float64)
        if query_vector.shape[0] == self._matrix.shape[1]:
            similarity = _dot(self._matrix[:size], query_vector)
            best_part = self._best_parts(query_vector, size)
            ranked_by = similarity + PART_WEIGHT * np.maximum(best_part - similarity, 0.0)
        else:
            ranked_by = similarity
        asked = list(self.encoder.query_terms(kinds_asked(query)))
        bm25, share = self._lexical(asked, size)
        # the bar reads the whole text's similarity: a clause lifts its memory in the order,
        # but a short one is close to many questions (on the dev half, gating on the lifted
        # similarity recalled 3.76 memories for questions of another user, 3.39 on the whole)
        alone = relevance(similarity, share)
        similarity = ranked_by
        if self.context:
            before = self._previous()
            similarity, bm25, share = (_in_context(a, before) for a in (similarity, bm25, share))
            alone = _answering(alone, before, self._asks[:size], self._corrects[:size])
        if present:
            alone = self._updates_lifted(alone, alive, set(asked), _asks_of_self(query))
        named = self._named(query)
        spoken = np.zeros(size, dtype=bool)
        if named:
            spoken = np.fromiter((bool(named & s) for s in self._rows.speakers), bool, count=size)
        scores = _Scores(similarity, bm25, share, spoken, alone)
        if window is None:
            return self._ranked(scores, alive, fuser, limit, in_window=False, present=present)
        if self._at is None:
            self._at = np.array(self._rows.at, dtype=str)
        inside = alive & (self._at >= window[0]) & (self._at < window[1])
        first = self._ranked(scores, inside, fuser, limit, in_window=True)
        room = max(limit - len(first), OUTSIDE_WINDOW)  # a full window still leaves some
        rest = self._ranked(scores, alive & ~inside, fuser, room, in_window=False)
        return first + rest

    def _open_rows(
        self, size: int, thread_id: str, seen: Collection[str], until: str
    ) -> np.ndarray:
        """The rows a search may return: stored, not held by this prompt's history, and
        said by ``until`` (when given)."""
        alive = self._alive[:size].copy()
        if until:
            if self._at is None:
                self._at = np.array(self._rows.at, dtype=str)
            alive &= (self._at <= until) | (self._at == "")
        for row in self._thread_rows.get(thread_id, []) if seen else []:
            if _held(self.values_at(row), seen):
                alive[row] = False
        # an exchange the prompt shows as history, by its words: in this thread, or stored
        # from another (the history ``chat`` was given, under another thread or none)
        for said in seen:
            for row in self._text_rows.get(said, ()):
                alive[row] = False
        return alive

    def _follow(self, row: int, thread: str) -> None:
        """Note the exchange before a new row, when it is said after every row of its
        thread held (the usual case: a conversation is stored in order); else leave it to
        the rebuild of ``_previous``."""
        self._before[row] = -1
        if self._before_stale or not thread or not self._rows.linked[row]:
            return
        last = self._last_of.get(thread)
        if last is not None and self._said_order(last) > self._said_order(row):
            self._before_stale = True
            return
        self._before[row] = -1 if last is None else last
        self._last_of[thread] = row

    def _updates_lifted(
        self, alone: np.ndarray, alive: np.ndarray, asked: Collection[int], of_self: bool
    ) -> np.ndarray:
        """For a question about how things stand now: a memory said after one of the most
        relevant that names what it named, beyond the question's words (a word few of the
        user's memories hold: "I moved from Berlin to Lisbon." after "I live in Berlin.",
        asked "Where do I live now?"), and bears on the question itself (``SUBJECT_SHARE``
        of the best relevance) with a word of change ("moved", "left", "new": ``_CHANGE``),
        is read as an update of it: the one of them that bears most on the question is as
        relevant. The newer then comes first (``PRESENT_BONUS``, ``memory._recall``), where by
        its own words it came after the statement it replaced, or under the bar."""
        rows = np.flatnonzero(alive)
        best = float(alone[rows].max()) if rows.size > 1 else 0.0
        if best <= 0.0:
            return alone
        ranked = rows[np.argsort(-alone[rows], kind="stable")]
        leads = [int(r) for r in ranked[:_UPDATED_LEADS] if alone[r] >= UPDATED_SHARE * best]
        out = alone.copy()
        for lead in leads:
            names = set(self.encoder.query_terms(" ".join(_NAME.findall(self._said(lead)))))
            named = [
                t
                for t in self._rows.terms[lead]
                if t in names and t not in asked and self._idf(t) >= NAMING_IDF
            ]
            when = self._said_order(lead)
            later = {
                int(row)
                for term in named
                if (posting := self._posting(term)) is not None
                for row in posting[0]
                if int(row) != lead
                and alive[row]
                and alone[row] >= SUBJECT_SHARE * best
                and self._said_order(int(row)) > when
                and _tells_change(self._said(int(row)), of_self)
            }
            if later:  # the one that bears most on the question: what the statement became
                update = max(later, key=lambda row: (alone[row], self._said_order(row)))
                out[update] = max(out[update], alone[lead])
        return out

    def _said(self, row: int) -> str:
        """What the people said in a memory (without the assistant's reply)."""
        value = self.values[self._rows.keys[row]]
        said = value.get("said")
        return said if isinstance(said, str) and said else str(value.get("text") or "")

    def _said_order(self, row: int) -> tuple[str, int, int]:
        """When a memory was said: its time, then its write (two imports of one thread at
        one time, in the order imported), then its place in that conversation."""
        return self._rows.at[row], self._rows.written[row], self._rows.places[row]

    def _previous(self) -> np.ndarray:
        """Per row, the row of the exchange said just before it in its conversation (-1:
        none, or not linked): by ``_said_order``, then the order stored."""
        if self._before_stale:
            size = len(self._rows.keys)
            if self._at is None:
                self._at = np.array(self._rows.at, dtype=str)
            threads = np.array(self._rows.threads, dtype=str)
            places = np.array(self._rows.places, dtype=np.int64)
            written = np.array(self._rows.written, dtype=np.int64)
            usable = self._alive[:size] & np.array(self._rows.linked, dtype=bool)
            usable &= threads != ""  # without a thread, two memories are no conversation
            rows = np.flatnonzero(usable)
            keys = (rows, places[rows], written[rows], self._at[rows], threads[rows])
            order = rows[np.lexsort(keys)]
            self._before[:] = -1
            same = threads[order[1:]] == threads[order[:-1]]
            self._before[order[1:][same]] = order[:-1][same]
            ends = np.append(~same, True)[: order.size]  # each thread's last row
            self._last_of = {self._rows.threads[r]: int(r) for r in order[ends]}
            self._before_stale = False
        return self._before[: len(self._rows.keys)]

    def _named(self, query: str) -> frozenset[str]:
        """The speakers of this user's memories that ``query`` names."""
        words = {w.casefold() for w in re.findall(r"[^\W\d_][\w'-]*", query)}
        return frozenset(name for name in self._speakers if name in words)

    def _ranked(
        self,
        scores: _Scores,
        mask: np.ndarray,
        fuser: Fuser,
        limit: int,
        *,
        in_window: bool,
        present: bool = False,
    ) -> list[Candidate]:
        if limit <= 0 or not mask.any():
            return []
        rows = np.flatnonzero(mask)
        dense = _top(rows, scores.similarity[rows], _LIST_DEPTH)
        lexical_rows = rows[scores.bm25[rows] > 0]
        lexical = _top(lexical_rows, scores.bm25[lexical_rows], _LIST_DEPTH)
        fused = fuser(
            [Hit(self._rows.keys[r], float(scores.similarity[r])) for r in dense],
            [Hit(self._rows.keys[r], float(scores.bm25[r])) for r in lexical],
        )
        if scores.spoken.any():  # what a person the question names said comes first
            for hit in fused:
                if scores.spoken[self._row_of[hit.id]]:
                    hit.score += SPEAKER_BONUS
            fused.sort(key=lambda h: -h.score)  # stable: ties keep the fuser's order
        boosts: dict[str, float] = {}
        if present and len(fused) > 1:
            # "what is my rate now?": of what was said on it, the newest comes first. Only
            # the candidates on the question's subject are ordered by time (relevant by their
            # own words, near the best): a chat about anything else since takes no share.
            best = max(float(scores.alone[self._row_of[h.id]]) for h in fused)
            on_subject = [
                h for h in fused if scores.alone[self._row_of[h.id]] >= SUBJECT_SHARE * best
            ]
            on_subject.sort(key=lambda h: self._said_order(self._row_of[h.id]))
            for rank, hit in enumerate(on_subject[1:], 1):
                boosts[hit.id] = PRESENT_BONUS * rank / (len(on_subject) - 1)
                hit.score += boosts[hit.id]
            fused.sort(key=lambda h: -h.score)
        if in_window and len(fused) < limit:  # said in the window: relevant by time alone
            found = {f.id for f in fused}
            order = rows[np.argsort(-scores.similarity[rows], kind="stable")]
            fused_keys = [f.id for f in fused]
            fused_keys += [self._rows.keys[r] for r in order if self._rows.keys[r] not in found]
            fused_scores = {f.id: f.score for f in fused}
        else:
            fused_keys = [f.id for f in fused]
            fused_scores = {f.id: f.score for f in fused}
        out = []
        for key in self._with_most_relevant(fused_keys[:limit], rows, scores):
            row = self._row_of[key]
            out.append(
                Candidate(
                    key=key,
                    value=self.values[key],
                    similarity=float(scores.similarity[row]),
                    lexical=float(scores.share[row]),
                    fused=float(fused_scores.get(key, 0.0)),
                    in_window=in_window,
                    alone=float(scores.alone[row]),
                    boost=boosts.get(key, 0.0),
                )
            )
        return out

    def _with_most_relevant(self, keys: list[str], rows: np.ndarray, scores: _Scores) -> list[str]:
        """``keys`` and, after them, the memories most relevant by their own words wherever
        fusion put them: its lists are each scaled to their own spread (see the reader's
        ``_standout_first``)."""
        taken = set(keys)
        best = [self._rows.keys[r] for r in _top(rows, scores.alone[rows], _BY_RELEVANCE)]
        return keys + [key for key in best if key not in taken]


def _held_value(value: dict[str, Any]) -> dict[str, Any]:
    """A stored value as the index keeps it: without its packed vectors, which the index
    holds as matrix rows already (a 384-d vector packed is some 2 KB of text)."""
    packed = ("vector", "part_vectors")
    return {k: v for k, v in value.items() if k not in packed} if "vector" in value else value


def _held(value: dict[str, Any], seen: Collection[str]) -> bool:
    """Whether every message a memory was drawn from is one of ``seen``, by message id (a
    memory with a message without an id is never held; one whose text is in ``seen`` is
    left out by ``_text_rows``, in any thread)."""
    ids = value.get("message_ids")
    sources = value.get("sources")
    if not isinstance(ids, list) or not ids or not isinstance(sources, list):
        return False
    return len(ids) == len(sources) and all(str(i) in seen for i in ids)


@dataclass(frozen=True)
class _Scores:
    similarity: np.ndarray
    bm25: np.ndarray
    share: np.ndarray
    spoken: np.ndarray  # said by a person the question names
    alone: np.ndarray  # relevance by a memory's own words


def _small_int(value: Any) -> bool:
    """An int a store may hand back that fits the index's int64 arrays (not a bool)."""
    return isinstance(value, int) and not isinstance(value, bool) and abs(value) < 2**62


def _answering(
    alone: np.ndarray, before: np.ndarray, asks: np.ndarray, corrects: np.ndarray
) -> np.ndarray:
    """Each row's own relevance, or that of the exchange before it when that one ends with
    a question, or when this one corrects it: an answer ("Passed all his phase 4 exams",
    after "How did Seán do this year?") is about what it was asked, and a correction
    ("Sorry, I meant Milan.", after "I live in Rome.") about what it corrects, which their
    own words rarely name, so each passes the bar when the exchange before does."""
    answers = np.flatnonzero((before >= 0) & (asks[np.maximum(before, 0)] | corrects))
    if not answers.size:
        return alone
    out = alone.copy()
    out[answers] = np.maximum(alone[answers], alone[before[answers]])
    return out


def _in_context(scores: np.ndarray, before: np.ndarray) -> np.ndarray:
    """Each row's score, or that of an exchange up to ``CONTEXT_STEPS`` before it in its
    conversation (``before``: see ``UserIndex._previous``) times ``CONTEXT_DECAY`` per
    step, whichever is higher."""
    lifted, back, keep = scores.copy(), before, 1.0
    for _ in range(CONTEXT_STEPS):
        keep *= CONTEXT_DECAY
        has = back >= 0
        if not has.any():
            break
        lifted[has] = np.maximum(lifted[has], keep * scores[back[has]])
        back = np.where(has, before[np.maximum(back, 0)], -1)
    return lifted


def _top(rows: np.ndarray, scores: np.ndarray, depth: int) -> np.ndarray:
    """The ``depth`` rows with the highest scores, best first (ties by row, stable)."""
    if rows.size > depth:
        part = np.argpartition(-scores, depth - 1)[:depth]
        rows, scores = rows[part], scores[part]
    return rows[np.argsort(-scores, kind="stable")]


class IndexCache:
    """The user indexes of one backend, least recently used dropped past ``max_items``
    memories in all (a dropped user is loaded again at their next recall)."""

    def __init__(self, encoder: LexicalEncoder, max_items: int = 200_000) -> None:
        self.encoder = encoder
        self.max_items = max_items
        self._users: OrderedDict[str, UserIndex] = OrderedDict()
        self.lock = threading.RLock()

    def get(self, user: str) -> UserIndex | None:
        with self.lock:
            index = self._users.get(user)
            if index is not None:
                self._users.move_to_end(user)
            return index

    def put(self, user: str, index: UserIndex) -> None:
        with self.lock:
            self._users[user] = index
            self._users.move_to_end(user)
            total = sum(len(i) for i in self._users.values())
            while total > self.max_items and len(self._users) > 1:
                _, dropped = self._users.popitem(last=False)
                total -= len(dropped)

    def drop(self, user: str) -> None:
        with self.lock:
            self._users.pop(user, None)

    def new(self) -> UserIndex:
        return UserIndex(self.encoder)


def rank_pool(
    encoder: LexicalEncoder,
    fuser: Fuser,
    query: str,
    pool: Sequence[tuple[str, dict[str, Any], float]],
    limit: int,
    *,
    window: tuple[str, str] | None = None,
    sessions_back: int = 0,
    thread_id: str = "",
    seen: Collection[str] = (),
    present: bool = False,
) -> list[Candidate]:
    """Rank memories another engine found (mem0's own search, with its similarity score)
    as ``UserIndex.search`` ranks a user's: BM25 over the pool, fused with the engine's list."""
    index = UserIndex(encoder, context=False)
    for key, value, score in pool:
        # The engine's score stands in for the vector: one dimension, queried with [1.0].
        index.upsert(key, value, np.array([score], dtype=np.float32))
    if sessions_back:
        window = index.session_window(sessions_back, thread_id)
    return index.search(
        query,
        np.ones(1, dtype=np.float32),
        fuser,
        limit,
        window=window,
        thread_id=thread_id,
        seen=seen,
        present=present,
    )


def _dot(matrix: np.ndarray, vector: np.ndarray) -> np.ndarray:
    """``matrix @ vector`` as float64, computed in this thread.

    A matrix-vector product goes to BLAS, which splits one this size over every core:
    on a busy machine the call then waits for a core to come free (7 ms instead of
    0.1 for 10,000 memories). ``einsum`` runs in the calling thread alone (0.3 ms).
    """
    product: np.ndarray = np.einsum("ij,j->i", matrix, vector)
    return product.astype(np.float64)

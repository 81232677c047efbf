"""What one turn recalls: the backend's answer, checked, gated and bounded.

``MemoryReader.read`` is the one call the graph's ``read_memory`` node (and
``RetrievalAgent.recall``) makes. It asks the backend for the three kinds of memory and
decides what of it the turn uses:

* search facts recalled by their alias always, by similarity when it reaches
  ``memory_relevance_threshold``; their corpus terms go into the BM25 query;
* every stated preference (newest per subject);
* conversation memories from other conversations whose relevance (their similarity and
  the share of the question's word weight they hold, mixed, see ``memory._hybrid``)
  reaches ``conversation_relevance_threshold`` (or, once one does, 0.3 of the best
  one's), or that were said in the time the question points to; at most
  ``conversation_top_k`` of them, within ``conversation_max_chars``.

Whatever a backend returns is checked first (a hit without text or a finite score is
dropped, scores are clamped to [0, 1], texts are put on one line and cut), and a memory
that would appear twice (the same text under two ids, or a fact also recalled as said) is
kept once.
"""

from __future__ import annotations

import dataclasses
import math
import textwrap
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from retrievalagent.index import LexicalEncoder
from retrievalagent.memory._base import (
    CONVERSATION,
    PREFERENCE,
    MemoryBackend,
    MemoryHit,
    Recall,
    RecallRequest,
    said_until,
)
from retrievalagent.memory._conversations import (
    SENTENCE_END,
    about_self,
    speaker_lines,
    user_statements,
)
from retrievalagent.memory._keys import fact_targets, mapping_alias, question_keys
from retrievalagent.memory._kinds import kinds_asked, kinds_named
from retrievalagent.memory._preferences import stated_preferences
from retrievalagent.memory._temporal import dated_line, iso, parse_time, time_ref, timestamp

__all__ = ["MemoryReader", "ReadPolicy", "ReadResult", "alias_of"]

#: Longest recalled memory text injected into search and the prompt (longer ones are cut).
MAX_MEMORY_CHARS = 1000
#: Longest conversation memory shown to the model (characters; cut at a word).
MAX_SHOWN_CHARS = 400
#: Once the best past exchange clears the relevance bar, the share of its relevance the
#: others need (chosen on the dev half of bench/memory's conversation set; see ``_bar``).
FOLLOWER_SHARE = 0.3
#: Candidates asked of the backend per conversation memory a turn may keep.
_CANDIDATES = 3
#: How far the best past exchange must stand above the mean relevance of those found for
#: the question to count as plainly about the user's past (see ``_bar``; same dev half).
STANDOUT = 0.12
#: Most memories that can stand out together above the rest (``_standout_first``).
_MOST_STANDING_OUT = 3
#: For a question about now, the share of the best relevance at which two memories count
#: as the same statement made again (put newest first; order only, see
#: ``_newest_restated_first``).
RESTATED_SHARE = 0.8


@dataclass(frozen=True)
class ReadPolicy:
    """The gates and bounds of recall (from ``Settings``)."""

    fact_threshold: float = 0.7
    fact_limit: int = 5
    max_preferences: int = 20
    conversations: bool = True
    conversation_threshold: float = 0.15
    conversation_limit: int = 8
    conversation_chars: int = 2300


@dataclass
class ReadResult:
    """What a turn recalled, kind by kind, and what the trace reports about it."""

    facts: list[MemoryHit] = field(default_factory=list)
    preferences: list[MemoryHit] = field(default_factory=list)
    conversations: list[MemoryHit] = field(default_factory=list)
    #: The recalled facts' corpus terms, for the BM25 query.
    terms: str = ""
    scanned: int = 0
    best_score: float | None = None
    best_similarity: float | None = None
    best_conversation: float | None = None
    malformed: int = 0
    #: Why nothing was kept ("below_threshold", "no_memories"), else "".
    skipped: str = ""
    today: str = ""

    @property
    def kept(self) -> list[MemoryHit]:
        return [*self.facts, *self.preferences, *self.conversations]


def alias_of(hit: MemoryHit) -> str:
    """The alias a recalled fact explains (as stored, else read off a quoted mapping)."""
    if hit.kind != "search_fact":
        return ""
    return str(hit.metadata.get("alias") or "") or mapping_alias(hit.text)


def _one_line(text: str) -> str:
    return " ".join(text.split())


def _usable(raw: Any, max_chars: int = MAX_MEMORY_CHARS) -> tuple[list[MemoryHit], int]:
    """What a backend recalled, minus malformed hits (no finite score, no text, wrong
    types); scores clamped to [0, 1], texts on one line and cut. Returns the hits, in
    order, and how many were dropped."""
    if not isinstance(raw, list | tuple):
        return [], 1
    usable: list[MemoryHit] = []
    for hit in raw:
        try:
            score = float(hit.score)
            text = hit.text if isinstance(hit.text, str) else ""
            if hit.kind == CONVERSATION:  # an exchange's speakers stay apart on one line
                text = " / ".join(line.strip() for line in text.splitlines() if line.strip())
            text = _one_line(text)[:max_chars]
            meta = hit.metadata if isinstance(hit.metadata, dict) else {}
            alone = None if hit.alone is None else float(hit.alone)
            if alone is not None:
                alone = min(1.0, max(0.0, alone)) if math.isfinite(alone) else None
            usable_hit = dataclasses.replace(
                hit,
                id=str(hit.id),
                text=text,
                score=min(1.0, max(0.0, score)),
                metadata=meta,
                alone=alone,
            )
        except (AttributeError, TypeError, ValueError, OverflowError):
            continue
        if math.isfinite(score) and text:
            usable.append(usable_hit)
    return usable, len(raw) - len(usable)


#: Longest conversation memory read whole (an exchange is stored within a few thousand
#: characters; ``_said_text`` then picks what the prompt shows).
_MAX_STORED_CHARS = 8000


def _said_text(hit: MemoryHit, bears: Callable[[str], int] | None = None) -> str:
    """A conversation memory as the prompt shows it (already on one line, speakers apart
    by " / "), cut to ``MAX_SHOWN_CHARS``. A long one shows, in their order, the sentences
    that bear most on the question (``bears`` counts its words in one), then how each
    speaker ended (where a long paste usually says what it was for), then how it began."""
    text = hit.text
    if len(text) <= MAX_SHOWN_CHARS:
        return text
    lines = [
        (speaker, [piece for sentence in SENTENCE_END.split(words) for piece in _pieces(sentence)])
        for speaker, words in speaker_lines(text, " / ")
    ]
    places = [(i, j) for i, (_, said) in enumerate(lines) for j in range(len(said))]
    score = {(i, j): bears(lines[i][1][j]) if bears else 0 for i, j in places}
    ranked = sorted((p for p in places if score[p] > 0), key=lambda p: (-score[p], p))
    ends = [
        (i, len(said) - k) for i, (_, said) in enumerate(lines) for k in (1, 2) if len(said) >= k
    ]
    order = list(dict.fromkeys([*ranked, *ends, (0, 0), *places]))
    chosen: set[tuple[int, int]] = set()
    size = 0
    for i, j in order:
        cost = len(lines[i][1][j]) + 3
        if size + cost <= MAX_SHOWN_CHARS - 20:
            chosen.add((i, j))
            size += cost
    out = []
    for i, (speaker, said) in enumerate(lines):
        kept = [j for j in range(len(said)) if (i, j) in chosen]
        if not kept:
            continue
        parts, last = [], -1
        for j in kept:
            parts.append(("… " if j != last + 1 else "") + said[j])
            last = j
        tail = " …" if last != len(said) - 1 else ""
        out.append((f"{speaker}: " if speaker else "") + " ".join(parts) + tail)
    return " / ".join(out) if out else text[:MAX_SHOWN_CHARS].rsplit(" ", 1)[0] + " …"


#: Longest piece of a sentence ``_said_text`` weighs on its own: a pasted log, its lines
#: joined, reads as one sentence with the user's own words at its end ("... db-4.internal
#: I run Ubuntu 22.04 on that box."), too long to be shown whole and so never shown.
_MAX_PIECE_CHARS = 120


def _pieces(sentence: str) -> list[str]:
    """``sentence``, or for a long one its pieces of at most ``_MAX_PIECE_CHARS``, cut
    between words (a word longer than that is a piece of its own)."""
    if len(sentence) <= _MAX_PIECE_CHARS:
        return [sentence]
    return textwrap.wrap(
        sentence, _MAX_PIECE_CHARS, break_long_words=False, break_on_hyphens=False
    ) or [sentence]


def _norm(text: str) -> str:
    return " ".join(text.casefold().split())


class MemoryReader:
    """Recall for one agent: builds the request, asks the backend, selects what is used."""

    def __init__(self, memory: MemoryBackend, encoder: LexicalEncoder, policy: ReadPolicy) -> None:
        self.memory = memory
        self.encoder = encoder
        self.policy = policy

    def request(
        self,
        question: str,
        user_id: str,
        *,
        thread_id: str = "",
        seen: Collection[str] = (),
        now: datetime | str | None = None,
        limit: int | None = None,
    ) -> RecallRequest:
        """What to ask the backend for ``question`` (``now``: when it is asked)."""
        policy = self.policy
        when = parse_time(now, "now")
        return RecallRequest(
            query=question,
            user_id=user_id,
            limit=limit or policy.fact_limit,
            keys=question_keys(self.encoder, question),
            max_preferences=policy.max_preferences,
            # never fewer candidates than a turn asks for: the bar (``_bar``) is set by the
            # same ones, so recall(k=...) keeps what the turn's read would
            conversations=_CANDIDATES * max(limit or 0, policy.conversation_limit)
            if policy.conversations
            else 0,
            thread_id=thread_id,
            seen=frozenset(seen),
            time=time_ref(question, when),
            asked=iso(when),
        )

    def read(self, request: RecallRequest, limit: int | None = None) -> ReadResult:
        """Ask the backend and select what the turn uses (``limit``: at most that many
        conversation memories instead of the policy's)."""
        recall = _said_by(self.memory.recall(request), request)
        return self.select(recall, limit, request.query, _present(request))

    async def aread(self, request: RecallRequest, limit: int | None = None) -> ReadResult:
        recall = _said_by(await self.memory.arecall(request), request)
        return self.select(recall, limit, request.query, _present(request))

    # -- selection ---------------------------------------------------------------------------
    def select(
        self, recall: Recall, limit: int | None = None, question: str = "", present: bool = False
    ) -> ReadResult:
        """The memories this turn uses, from a backend's ``recall`` (checked first);
        ``question`` picks what a long memory shows; ``present``: it asks how things stand
        now (see ``_newest_restated_first``)."""
        bad = 0
        if not isinstance(recall, Recall):
            recall, bad = Recall(), 1
        facts, bad_facts = _usable(recall.facts)
        preferences, bad_preferences = _usable(recall.preferences)
        said, bad_said = _usable(recall.conversations, max_chars=_MAX_STORED_CHARS)
        facts = sorted(
            (h for h in facts if h.kind not in (PREFERENCE, CONVERSATION)), key=lambda h: -h.score
        )
        preferences = [h for h in preferences if h.kind == PREFERENCE]
        restated = _restating(recall.conversations, {h.key for h in preferences if h.key})
        said = [h for h in said if h.kind == CONVERSATION and h.id not in restated]
        kept = [h for h in facts if h.score >= self.policy.fact_threshold]
        kept, preferences = _once(kept), _once(preferences, [*kept])
        conversations = self._conversations(
            said, [*kept, *preferences], limit, question, present=present
        )
        similarities = [h.similarity for h in facts if h.similarity is not None]
        out = ReadResult(
            facts=kept,
            preferences=preferences,
            conversations=conversations,
            terms=self._terms(kept),
            # the facts and the conversation memories looked at: a user with only the
            # latter read "below_threshold" beside 0 scanned
            scanned=(recall.scanned if isinstance(recall.scanned, int) else 0) + len(said),
            best_score=round(facts[0].score, 4) if facts else None,
            best_similarity=round(max(similarities), 4) if similarities else None,
            best_conversation=round(max(_alone(h) for h in said), 4) if said else None,
            malformed=bad + bad_facts + bad_preferences + bad_said,
        )
        if not out.kept:
            out.skipped = "below_threshold" if facts or said else "no_memories"
        return out

    def _conversations(
        self,
        said: Sequence[MemoryHit],
        already: Sequence[MemoryHit],
        limit: int | None,
        question: str = "",
        *,
        present: bool = False,
    ) -> list[MemoryHit]:
        """Relevant enough (or said in the question's time window), each once, within the
        count and the size bounds, in the order recall ranked them; for a question about
        now (``present``), a statement made again comes in its older one's place before
        the count is cut, so that recall(k=1) gives where things stand."""
        policy = self.policy
        wanted = set(self.encoder.query_terms(kinds_asked(question))) if question else set()

        def bears(sentence: str) -> int:
            searched = f"{sentence} {kinds_named(sentence)}"
            return len(wanted.intersection(self.encoder.query_terms(searched)))

        bar = _bar(said[: _CANDIDATES * policy.conversation_limit], policy)
        relevant = [h for h in _standout_first(said) if h.in_window or _alone(h) >= bar]
        if present:
            relevant = _newest_restated_first(relevant)
        count = limit or policy.conversation_limit
        relevant = _room_outside_window(_once(relevant, already), count)
        if question and about_self(question):
            relevant = _room_for_a_statement(relevant, count)
        # the size bound is the prompt's; an explicit limit (recall(k=...)) counts alone
        kept, budget = [], policy.conversation_chars if limit is None else math.inf
        for hit in relevant:
            text = _said_text(hit, bears if wanted else None)
            shown = _shown_chars(text, hit) if limit is None else len(text)
            if shown > budget:
                break
            budget -= shown
            kept.append(dataclasses.replace(hit, text=text))
            if len(kept) >= (limit or policy.conversation_limit):
                break
        return kept

    def _terms(self, facts: Sequence[MemoryHit]) -> str:
        targets = [fact_targets(self.encoder, h.text, alias_of(h)) for h in facts]
        return " ".join(dict.fromkeys(" ".join(targets).split()))


def _shown_chars(text: str, hit: MemoryHit) -> int:
    """The characters a recalled memory takes in the prompt, which the size bound counts:
    its line, dated and titled as ``dated_line`` shows it (the day's width is the same in
    every zone), with its "- " and line break."""
    title = str(hit.metadata.get("title") or "")
    return len(f"- {dated_line(text, hit.at, title)}\n")


def _restating(raw: Any, subjects: Collection[str]) -> set[str]:
    """The ids of conversation memories in which the user (unnamed, as in a turn with the
    agent) only stated preferences on ``subjects`` (those of the preferences recalled): the
    preference kind shows the newest on each, and such an exchange would bring a replaced
    one back ("I prefer answers in German." after "Answer in French from now on."). One on
    a subject with no preference recalled (stored by an earlier version, which did not
    learn preferences from an imported history) stays recalled."""
    out: set[str] = set()
    for hit in raw if isinstance(raw, list | tuple) and subjects else ():
        if not isinstance(getattr(hit, "text", None), str):
            continue
        stated: list[str] = []
        for speaker, words in speaker_lines(_people_said(hit)):
            if speaker == "assistant":
                continue
            # only the user's own unnamed words: the preference kind holds the user's, and
            # in a shared chat "Answer in Spanish." may be anyone's
            found = stated_preferences(words) if speaker == "user" else None
            if found is None:
                break
            stated += [p.subject for p in found]
        else:
            if stated and set(stated) <= set(subjects):
                out.add(str(getattr(hit, "id", "")))
    return out


def _people_said(hit: MemoryHit) -> str:
    """What the people said in a conversation memory, without the assistant's reply (which
    may carry a name, "Aria: Sure.", and so cannot be told from a person by its line): the
    store keeps it apart as ``said``, mem0 keeps the reply apart as ``reply``."""
    said, reply = hit.metadata.get("said"), hit.metadata.get("reply")
    if isinstance(said, str) and said:
        return said
    if isinstance(reply, str) and reply and hit.text.endswith(reply):
        return hit.text[: -len(reply)].rstrip()
    return hit.text


def _alone(hit: MemoryHit) -> float:
    """A conversation memory's relevance as the bar reads it: by its own words, or an
    answer's by its question's (what the exchange before it lends orders recall, but
    cannot make an unrelated message relevant)."""
    return hit.score if hit.alone is None else hit.alone


def _bar(said: Sequence[MemoryHit], policy: ReadPolicy) -> float:
    """The relevance a conversation memory needs by its own words.

    It is ``conversation_threshold``, unless the question is plainly about the user's past:
    its best exchange reaches the threshold and stands ``STANDOUT`` above the mean of those
    found. Then the next best are kept down to ``FOLLOWER_SHARE`` of its relevance (the
    count and size bounds still apply): a paraphrase or a follow-up shares few words with
    the question, and its similarity alone rarely reaches the bar."""
    # what was said in the question's time window is kept whatever its relevance: the bar
    # is the rest's, set by the rest alone
    scores = [_alone(h) for h in said if not h.in_window]
    best, bar = max(scores, default=0.0), policy.conversation_threshold
    if not scores or best < bar or best - sum(scores) / len(scores) < STANDOUT:
        return bar
    return min(bar, FOLLOWER_SHARE * best)


def _said_by(recall: Recall, request: RecallRequest) -> Recall:
    """``recall`` without the conversation memories said after ``said_until(request)``: a
    turn replayed at its time (``configurable.now``, ``recall(now=...)``) must not quote
    what the user said later. The store's index leaves them out before it ranks; this
    holds for every backend (mem0's pool, times written in another zone)."""
    until = said_until(request)
    if not isinstance(recall, Recall) or not until:
        return recall
    latest = timestamp(until)
    said = [h for h in recall.conversations if _said_when(h) <= latest]
    if len(said) == len(recall.conversations):
        return recall
    return dataclasses.replace(recall, conversations=said)


def _present(request: RecallRequest) -> bool:
    return bool(request.time and request.time.present and not request.time.window)


def _newest_restated_first(hits: list[MemoryHit]) -> list[MemoryHit]:
    """For a question about how things stand now, the memories about as relevant as the
    best one (the same statement made again, changed: "my rate is 60", "I raised my rate
    to 70") newest first, in the places they hold: the prompt and an offline answer read
    the first as how things stand. What is recalled does not change, only its order."""
    if len(hits) < 2:
        return hits
    best = max(_alone(h) for h in hits)
    close = [i for i, h in enumerate(hits) if _alone(h) >= RESTATED_SHARE * best]
    newest = sorted((hits[i] for i in close), key=_said_when, reverse=True)
    out = list(hits)
    for i, hit in zip(close, newest, strict=True):
        out[i] = hit
    return out


def _said_when(hit: MemoryHit) -> float:
    return timestamp(hit.at)


def _standout_first(hits: Sequence[MemoryHit]) -> list[MemoryHit]:
    """``hits`` with the few far more relevant by their own words than all the rest (by
    ``STANDOUT``, at most ``_MOST_STANDING_OUT``) moved up, in their order, to the first
    places after the question's time window.

    Fusion ranks within lists scaled to their own spread: among many near-alike memories
    (a user's tickets, hosts, orders) the dense list's small differences stretch to its
    whole scale, and the memories holding the id the question names, found by their words
    alone, can sit below them all though they alone answer ("which room is srv0213 in
    now?": where it was, and where it has moved since, each dated in the prompt)."""
    outside = [h for h in hits if not h.in_window]
    ranked = sorted(outside, key=_alone, reverse=True)[: _MOST_STANDING_OUT + 1]
    cut = next(
        (i for i in range(1, len(ranked)) if _alone(ranked[i - 1]) - _alone(ranked[i]) >= STANDOUT),
        0,
    )
    lead = {id(h) for h in ranked[:cut]}
    if not lead or all(id(h) in lead for h in outside[:cut]):
        return list(hits)
    rest = [h for h in hits if id(h) not in lead]
    first = next((i for i, h in enumerate(rest) if not h.in_window), len(rest))
    return [*rest[:first], *(h for h in outside if id(h) in lead), *rest[first:]]


def _room_outside_window(hits: list[MemoryHit], count: int) -> list[MemoryHit]:
    """``hits`` (what was said in the question's time window first) with the best one from
    outside the window moved up to the last of ``count`` places if the window would fill
    them all: a time read into the question ("May 2 teams share it?", "... on Sunday?")
    must not push out everything that bears on it by its own words (which it needed to be
    listed here at all). The window keeps the places before it: "What jammed yesterday?"
    shows yesterday's exchange first, however much more an older one says of printers."""
    outside = next((i for i, h in enumerate(hits) if not h.in_window), None)
    if outside is None or outside < count or count < 2:
        return hits
    return [*hits[: count - 1], hits[outside], *hits[count - 1 : outside], *hits[outside + 1 :]]


#: The fewest places ``_room_for_a_statement`` keeps one of (a ``recall(k=2)`` keeps what
#: ranks first), and the share of the best relevance the statement needs (set beforehand:
#: an aside naming the subject, "the nginx docs got wet", is no answer).
_ROOM_FROM = 4
STATEMENT_SHARE = 0.5


def _room_for_a_statement(hits: list[MemoryHit], count: int) -> list[MemoryHit]:
    """``hits`` with the best one in which the user stated something about themselves moved
    up to the last of ``count`` places (of at least ``_ROOM_FROM``), when none of the first
    ``count`` holds such a statement and it bears on the question (``STATEMENT_SHARE``): for a question about the user ("Which PostgreSQL version am I on?"), eight
    earlier questions on the subject ("How do I upgrade PostgreSQL?", each stored with its
    answer) pushed out the one exchange that said "My cluster runs PostgreSQL 13"."""
    if len(hits) <= count or count < _ROOM_FROM:
        return hits
    if any(user_statements(h.text) for h in hits[:count]):
        return hits
    bar = STATEMENT_SHARE * max(_alone(h) for h in hits[:count])
    found = next(
        (
            i
            for i in range(count, len(hits))
            if _alone(hits[i]) >= bar and user_statements(hits[i].text)
        ),
        None,
    )
    if found is None:
        return hits
    return [*hits[: count - 1], hits[found], *hits[count - 1 : found], *hits[found + 1 :]]


def _once(hits: Sequence[MemoryHit], already: Sequence[MemoryHit] = ()) -> list[MemoryHit]:
    """Each memory once: by id and by text (the same words stored twice, or recalled as a
    fact and again as said), the first kept."""
    seen_ids = {h.id for h in already}
    seen_texts = {_norm(h.text) for h in already}
    out = []
    for hit in hits:
        text = _norm(hit.text)
        if hit.id in seen_ids or text in seen_texts:
            continue
        seen_ids.add(hit.id)
        seen_texts.add(text)
        out.append(hit)
    return out

"""Should recalled conversation memory's words go into the document search's BM25 query?  ``python -m bench.memory.conversation_injection``

Issue 21 (item 2) asks to measure it. Recalled *search facts* already add their corpus
terms to the BM25 query as a weighted extra group (``settings.memory_term_weight``);
recalled *conversation memories* ("user: <what they asked>" / "assistant: <first ~240
characters of the reply>") only reach the answer prompt. This bench measures what adding
their words to the BM25 query would do to document retrieval, through the library's own
search path: the agent's ``searcher.dense_hits`` and ``searcher.lexical_hits(question,
memory_terms, memory_weight=w)`` ranked by ``searcher.rank`` (the default convex fusion),
exactly as the graph's ``lexical_search`` and ``fuse`` nodes call them, with
``memory_terms = encoder.memory_terms(text)`` as the graph builds them for facts.

**Data.** The ``aliases`` set over the Linux man-pages corpus (5,235 passages;
``bench/datasets``): 123 needs whose question uses a word the corpus never does, and its
150 control needs (no such word). Every need has four phrasings (a lead-in, a frame and the
need word for word). Phrasing 1 is the *earlier* question, phrasings 2-4 are asked now
(819 questions).

**Past exchanges.** For each need, the earlier phrasing and an answer to it, stored
through the library (``rag.remember([user, assistant], user_id=..., thread_id=need)``),
so the text is what conversation memory keeps. Two kinds of answer:

* ``agent``: the offline agent's own answer to the earlier phrasing (``rag.invoke``,
  extractive; right or wrong, as the agent would have answered);
* ``passage``: the first sentences of the need's relevant passage (section headings
  dropped): a right answer, the best case for injection.

**Conditions** for each question asked now:

* ``none``: no injection (what the library does today);
* ``related``: the same need's past exchange;
* ``unrelated``: another need's past exchange (seeded, another relevant set and alias):
  what a loose recall gate lets through for an unrelated question;
* ``nearest_unrelated``: the best-scored past exchange of another need by ``rag.recall``
  (ungated: the agent's threshold is 0 here; the unrelated memory a gate is most likely
  to let through);
* ``recalled``: every conversation memory ``rag.recall(question, k=5)`` keeps above the
  default gate (``conversation_relevance_threshold`` 0.15, at most ``conversation_top_k``
  5): what the graph would inject on this data (the related one is always stored);
* ``recalled_unrelated``: the same without the related exchange (the five best others
  above the gate): what the graph would inject for a need never discussed before.

each injected as the *exchange* (user and assistant words, speaker labels dropped) or the
*user* words only, at memory term weights 0.5, 1.0 and 1.5. Reported: nDCG@10 and
Recall@10 of the fused list (and of BM25 alone, for reading), their change against
``none`` with a 95% bootstrap interval over needs, and the expected change at mixes of
related and unrelated injections (``f * related + (1 - f) * unrelated``, f = 0.5 and 0.8).
Also split: the related exchange by whether the agent's earlier answer quoted one of the
need's relevant passages (a sentence of 30+ characters found there word for word).

**Decision rule** (``decision`` in the results): inject only if, with the agent's own
answers, some words and weight give a positive expected nDCG@10 change at both mixes and
on ``recalled``.

Results: ``bench/results/memory_conversation_injection.json``. ``--limit N`` keeps N
needs of each kind (a smoke test).
"""

from __future__ import annotations

import argparse
import random
import re
import sys
import time
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
from langgraph.store.memory import InMemoryStore

from bench._common import (
    CachedEmbeddings,
    build_collection,
    ndcg_recall,
    open_agent,
    setup_logging,
    write_result,
)
from retrievalagent.embeddings import MiniLMEmbeddings
from retrievalagent.memory._base import MemoryHit
from retrievalagent.memory._conversations import short_reply
from retrievalagent.memory._recall import _said_text

__all__ = ["main"]

SEED = 20261126
COLLECTION = "memory-aliases"  # the index bench.memory.alias_bench builds
TOP_K = 10
WEIGHTS = (0.5, 1.0, 1.5)
ANSWERS = ("agent", "passage")
CONDITIONS = ("related", "unrelated", "nearest_unrelated", "recalled", "recalled_unrelated")
PARTS = ("exchange", "user")
MIXES = (0.5, 0.8)
RECALL_K = 5  # settings.conversation_top_k
GATE = 0.15  # settings.conversation_relevance_threshold
BOOTSTRAP = 2000

_HEADING = re.compile(r"^[A-Z][A-Z0-9 /_-]*(:.*)?$")
_TURN = re.compile(r"\b(user|assistant): ")


# --------------------------------------------------------------------------- data
def load_needs(limit: int) -> tuple[list[dict[str, Any]], dict[str, dict[str, Any]]]:
    """Alias and control needs (earlier phrasing, phrasings asked now, relevant passages)
    and the corpus by passage id."""
    from bench.datasets import load, load_controls

    corpus, queries = load("aliases")
    controls = load_controls("aliases")
    if limit:
        queries, controls = queries[:limit], controls[:limit]
    needs = [
        {
            "id": row["id"],
            "kind": kind,
            "alias": row.get("alias", ""),
            "earlier": row["phrasings"][0],
            "asks": list(row["phrasings"][1:]),
            "relevant": list(row["relevant"]),
        }
        for kind, rows in (("alias", queries), ("control", controls))
        for row in rows
    ]
    return needs, {p["id"]: p for p in corpus}


def passage_answer(text: str) -> str:
    """A right answer as a reply would start: the passage's prose (from its DESCRIPTION
    part when it has one, section headings dropped), cut as conversation memory cuts it."""
    lines = text.split("\n")
    start = next((i + 1 for i, line in enumerate(lines) if line.startswith("DESCRIPTION")), 0)
    prose = [line for line in lines[start:] if line.strip() and not _HEADING.match(line)]
    return short_reply(" ".join(prose))


def quotes(reply: str, passages: Sequence[str]) -> bool:
    """Whether an extractive reply quotes one of ``passages`` (a sentence of it, 30
    characters or more, appears there word for word)."""
    texts = [" ".join(p.split()) for p in passages]
    sentences = [" ".join(x.split()).strip(" .…") for x in re.split(r"(?<=[.!?])\s+", reply)]
    return any(len(x) >= 30 and any(x in t for t in texts) for x in sentences)


def unrelated_partner(needs: Sequence[dict[str, Any]]) -> dict[str, str]:
    """For each need, another need (seeded) with other relevant passages and alias."""
    rng = random.Random(SEED)
    out = {}
    for need in needs:
        while True:
            other = needs[rng.randrange(len(needs))]
            if set(other["relevant"]).isdisjoint(need["relevant"]) and (
                not need["alias"] or other["alias"] != need["alias"]
            ):
                out[need["id"]] = other["id"]
                break
    return out


def words_of(memory_text: str, part: str) -> str:
    """The injected text of a recalled exchange ("user: ... assistant: ..." on one line):
    its messages without speaker labels; only the user's for ``part == "user"``."""
    if not memory_text:
        return ""
    pieces = _TURN.split(memory_text)  # ["", "user", text, "assistant", text, ...]
    if len(pieces) < 3:
        raise ValueError(f"not a stored exchange: {memory_text[:80]!r}")
    kept = [
        text.strip(" /")
        for speaker, text in zip(pieces[1::2], pieces[2::2], strict=True)
        if part == "exchange" or speaker != "assistant"
    ]
    return "\n".join(kept)


# --------------------------------------------------------------------------- search
class Search:
    """The graph's document search (dense, BM25 with memory terms, convex fusion),
    cached per (question, terms, weight)."""

    def __init__(self, agent: Any) -> None:
        self.searcher = agent.searcher
        self.encoder = self.searcher.encoder
        self._dense: dict[str, list[Any]] = {}
        self._cache: dict[tuple[str, str, float], tuple[list[str], list[str]]] = {}
        self._source: dict[Any, str] = {}

    def terms(self, text: str) -> str:
        return str(self.encoder.memory_terms(text))

    def _sources(self, ids: Sequence[Any]) -> list[str]:
        missing = [i for i in ids if i not in self._source]
        if missing:
            for pid, payload in self.searcher.index.retrieve(missing).items():
                self._source[pid] = payload.get("source", "")
        return [self._source.get(i, "") for i in ids]

    def ranked(self, question: str, terms: str, weight: float) -> tuple[list[str], list[str]]:
        """(fused sources, BM25-alone sources), best first."""
        key = (question, terms, weight if terms else 0.0)
        if key in self._cache:
            return self._cache[key]
        s = self.searcher
        if question not in self._dense:
            self._dense[question] = s.dense_hits(s.embedder.embed(question))
        lexical = s.lexical_hits(question, terms, memory_weight=weight)
        plan = s.plan(question, TOP_K, terms, memory_weight=weight)
        hits = s.rank(plan, self._dense[question], lexical).hits
        out = (
            [h.payload.get("source", "") for h in hits],
            self._sources([h.id for h in lexical[:TOP_K]]),
        )
        self._cache[key] = out
        return out


# --------------------------------------------------------------------------- memory
def store_exchanges(
    agent: Any, needs: Sequence[dict[str, Any]], corpus: dict[str, dict[str, Any]]
) -> dict[str, dict[str, str]]:
    """Each need's earlier exchange stored as conversation memory, one user per kind of
    answer; returns answer kind -> need id -> the stored text. Marks each need whose agent
    answer quotes one of its relevant passages (``need["agent_right"]``)."""
    texts: dict[str, dict[str, str]] = {kind: {} for kind in ANSWERS}
    for need in needs:
        replies = {
            "agent": agent.invoke(need["earlier"]).answer,
            "passage": passage_answer(corpus[need["relevant"][0]]["text"]),
        }
        need["agent_right"] = quotes(
            short_reply(replies["agent"]), [corpus[p]["text"] for p in need["relevant"]]
        )
        for kind, reply in replies.items():
            stored = agent.remember(
                [
                    {"role": "user", "content": need["earlier"]},
                    {"role": "assistant", "content": reply},
                ],
                user_id=kind,
                thread_id=need["id"],
            )
            exchanges = [m for m in stored if m["kind"] == "conversation"]
            # as recall hands it on: on one line, cut at 400 characters
            line = " ".join(exchanges[0]["text"].split())
            texts[kind][need["id"]] = _said_text(MemoryHit(id="", text=line, score=0.0))
    return texts


def recalled(agent: Any, question: str, kind: str) -> list[dict[str, Any]]:
    """Conversation memories recall ranks for ``question`` (no gate: the agent's
    threshold is 0 here; the default gate is applied by the caller)."""
    hits = agent.recall(question, user_id=kind, k=RECALL_K + 1)
    return [h for h in hits if h["kind"] == "conversation"]


# --------------------------------------------------------------------------- metrics
def _bootstrap(diffs: dict[str, list[float]]) -> tuple[float, float, float]:
    """Mean of per-question differences and its 95% interval, resampling needs."""
    groups = [np.asarray(v) for v in diffs.values()]
    sums = np.asarray([g.sum() for g in groups])
    counts = np.asarray([len(g) for g in groups])
    mean = float(sums.sum() / counts.sum())
    rng = np.random.default_rng(SEED)
    picks = rng.integers(0, len(groups), size=(BOOTSTRAP, len(groups)))
    means = sums[picks].sum(axis=1) / counts[picks].sum(axis=1)
    low, high = np.percentile(means, [2.5, 97.5])
    return mean, float(low), float(high)


def _cell(rows: Sequence[dict[str, Any]], base: Sequence[dict[str, Any]] | None) -> dict[str, Any]:
    out: dict[str, Any] = {"n": len(rows)}
    for metric in ("ndcg", "r10", "bm25_ndcg", "bm25_r10"):
        out[metric] = round(float(np.mean([r[metric] for r in rows])), 4)
    if base is not None:
        for metric in ("ndcg", "r10"):
            diffs: dict[str, list[float]] = {}
            for r, b in zip(rows, base, strict=True):
                diffs.setdefault(r["need"], []).append(r[metric] - b[metric])
            mean, low, high = _bootstrap(diffs)
            out[f"delta_{metric}"] = [round(mean, 4), round(low, 4), round(high, 4)]
    return out


def score(ranked: Sequence[str], bm25: Sequence[str], relevant: Sequence[str]) -> dict[str, float]:
    ndcg, r10 = ndcg_recall(ranked, relevant, TOP_K)
    bm25_ndcg, bm25_r10 = ndcg_recall(bm25, relevant, TOP_K)
    return {"ndcg": ndcg, "r10": r10, "bm25_ndcg": bm25_ndcg, "bm25_r10": bm25_r10}


# --------------------------------------------------------------------------- run
def evaluate(
    agent: Any, needs: Sequence[dict[str, Any]], texts: dict[str, dict[str, str]]
) -> tuple[dict[str, list[dict[str, Any]]], dict[str, Any]]:
    """Every question under every condition: rows keyed by condition name, and what
    recall let through."""
    search = Search(agent)
    partner = unrelated_partner(needs)
    rows: dict[str, list[dict[str, Any]]] = {}
    gate: dict[str, dict[str, int]] = {
        k: dict.fromkeys(
            (
                "questions",
                "related",
                "unrelated",
                "with_unrelated",
                "without_related_any",
                "without_related_items",
            ),
            0,
        )
        for k in ANSWERS
    }

    def add(name: str, need: dict[str, Any], question: str, text: str, weight: float) -> None:
        terms = search.terms(text) if text else ""
        ranked, bm25 = search.ranked(question, terms, weight)
        row = {
            "need": need["id"],
            "kind": need["kind"],
            "earlier": "agent_right" if need["agent_right"] else "agent_wrong",
            **score(ranked, bm25, need["relevant"]),
        }
        rows.setdefault(name, []).append(row)

    for n, need in enumerate(needs):
        for question in need["asks"]:
            add("none", need, question, "", 0.0)
            for kind in ANSWERS:
                hits = recalled(agent, question, kind)
                others = [h for h in hits if h["thread_id"] != need["id"]][:RECALL_K]
                kept = [h for h in hits[:RECALL_K] if h["score"] >= GATE]
                kept_others = [h for h in others if h["score"] >= GATE]
                g = gate[kind]
                g["questions"] += 1
                g["related"] += any(h["thread_id"] == need["id"] for h in kept)
                g["unrelated"] += sum(h["thread_id"] != need["id"] for h in kept)
                g["with_unrelated"] += any(h["thread_id"] != need["id"] for h in kept)
                g["without_related_any"] += bool(kept_others)
                g["without_related_items"] += len(kept_others)
                memory = {
                    "related": texts[kind][need["id"]],
                    "unrelated": texts[kind][partner[need["id"]]],
                    "nearest_unrelated": others[0]["text"] if others else "",
                    "recalled": "\n".join(h["text"] for h in kept),
                    "recalled_unrelated": "\n".join(h["text"] for h in kept_others),
                }
                for condition, text in memory.items():
                    for part in PARTS:
                        words = words_of(text, part)
                        for weight in WEIGHTS:
                            add(
                                f"{kind}/{condition}/{part}/{weight}", need, question, words, weight
                            )
        if (n + 1) % 25 == 0:
            print(f"  {n + 1}/{len(needs)} needs", file=sys.stderr, flush=True)
    return rows, gate


def summarise(rows: dict[str, list[dict[str, Any]]]) -> dict[str, Any]:
    """Per condition, for all needs, per kind of need and by whether the agent's earlier
    answer quoted a relevant passage: means and deltas vs ``none``."""
    base = rows["none"]
    out: dict[str, Any] = {}
    for name, group in rows.items():
        cells = {"all": _cell(group, None if name == "none" else base)}
        for field, kind in (
            ("kind", "alias"),
            ("kind", "control"),
            ("earlier", "agent_right"),
            ("earlier", "agent_wrong"),
        ):
            idx = [i for i, r in enumerate(group) if r[field] == kind]
            if idx:
                cells[kind] = _cell(
                    [group[i] for i in idx], None if name == "none" else [base[i] for i in idx]
                )
        out[name] = cells
    return out


def mixes(summary: dict[str, Any]) -> list[dict[str, Any]]:
    """Expected change against no injection when a share f of the injections is related."""
    out = []
    for kind in ANSWERS:
        for part in PARTS:
            for weight in WEIGHTS:
                related = summary[f"{kind}/related/{part}/{weight}"]["all"]
                for bad in ("unrelated", "nearest_unrelated"):
                    unrelated = summary[f"{kind}/{bad}/{part}/{weight}"]["all"]
                    row: dict[str, Any] = {
                        "answer": kind,
                        "part": part,
                        "weight": weight,
                        "unrelated": bad,
                    }
                    for f in MIXES:
                        for metric in ("ndcg", "r10"):
                            value = (
                                f * related[f"delta_{metric}"][0]
                                + (1 - f) * unrelated[f"delta_{metric}"][0]
                            )
                            row[f"{metric}@{round(f * 100)}/{round((1 - f) * 100)}"] = round(
                                value, 4
                            )
                    out.append(row)
    return out


def decide(summary: dict[str, Any], mix_rows: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Inject only where the agent's own answers gain: a (words, weight) whose expected
    nDCG@10 change is positive at both mixes (random unrelated) and on ``recalled`` (what
    the graph would inject when the related exchange is stored)."""
    candidates = []
    for row in mix_rows:
        if row["answer"] != "agent" or row["unrelated"] != "unrelated":
            continue
        at_recall = summary[f"agent/recalled/{row['part']}/{row['weight']}"]["all"]["delta_ndcg"][0]
        gains = [row["ndcg@50/50"], row["ndcg@80/20"], at_recall]
        candidates.append(
            {"part": row["part"], "weight": row["weight"], "worst": min(gains), "gains": gains}
        )
    best = max(candidates, key=lambda c: c["worst"])
    return {"inject": best["worst"] > 0, "best": best}


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--limit", type=int, default=0, help="N needs of each kind (smoke)")
    args = parser.parse_args(argv)
    setup_logging()
    started = time.perf_counter()
    needs, corpus = load_needs(args.limit)
    build = build_collection(COLLECTION, list(corpus.values()), CachedEmbeddings())
    agent = open_agent(
        COLLECTION,
        embeddings=MiniLMEmbeddings().load(),
        memory_store=InMemoryStore(),
        top_k=TOP_K,
        conversation_relevance_threshold=0.0,  # the gate is applied here, to see below it
    )
    try:
        t0 = time.perf_counter()
        texts = store_exchanges(agent, needs, corpus)
        stored_s = time.perf_counter() - t0
        rows, gate = evaluate(agent, needs, texts)
    finally:
        agent.close()
    summary = summarise(rows)
    mix_rows = mixes(summary)
    payload: dict[str, Any] = {
        "command": "python -m bench.memory.conversation_injection "
        + " ".join(argv or sys.argv[1:]),
        "protocol": "see bench/memory/conversation_injection.py docstring",
        "corpus": f"{build['passages']} passages (aliases set over manpages)",
        "needs": {k: sum(n["kind"] == k for n in needs) for k in ("alias", "control")},
        "agent_answer_quotes_relevant": sum(n["agent_right"] for n in needs),
        "questions": len(rows["none"]),
        "weights": list(WEIGHTS),
        "gate": GATE,
        "recall_k": RECALL_K,
        "store_seconds": round(stored_s, 1),
        "recalled_above_gate": gate,
        "examples": {
            kind: {nid: texts[kind][nid] for nid in list(texts[kind])[:3]} for kind in ANSWERS
        },
        "summary": summary,
        "mixes": mix_rows,
        "decision": decide(summary, mix_rows),
    }
    write_result("memory_conversation_injection", payload, started)
    return payload


def _print(payload: dict[str, Any], out: Callable[[str], None] = print) -> None:
    base = payload["summary"]["none"]["all"]
    out(f"none: nDCG@10 {base['ndcg']:.4f}  R@10 {base['r10']:.4f}")
    for name, cells in payload["summary"].items():
        if name == "none":
            continue
        c = cells["all"]
        out(
            f"{name:42s} nDCG {c['ndcg']:.4f} ({c['delta_ndcg'][0]:+.4f})  "
            f"R@10 {c['r10']:.4f} ({c['delta_r10'][0]:+.4f})"
        )
    out(f"recalled above gate: {payload['recalled_above_gate']}")


if __name__ == "__main__":
    _print(main())

"""Does memory fix queries that use a word the corpus lacks?  ``python -m bench.memory.alias_bench``

Data: ``bench.datasets.load("aliases")`` -- the Linux man-pages corpus (Debian
``manpages``/``manpages-dev`` 6.03, 5,235 passages) and 123 queries: man page NAME
descriptions with one word replaced by a word the corpus never uses, nor any inflection of
it (``grab`` for get, ``purge`` for remove, ``rundown`` for overview, British spellings,
...). Relevant = the page's DESCRIPTION passages. The index is built once from the cached
vectors of ``bench/.cache/vectors`` (``bench._common.build_collection``); queries are
embedded with the real packaged model.

Protocol, per mode, each with a fresh ``InMemoryStore`` (the ``memory_store=`` backend):

1. **without memory**: recall@10 of the agent's own graph (read_memory, dense + BM25
   search, fusion) for every query, as a user with no memories.
2. **teaching**: user ``learner`` asks the first query of each alias as a full turn
   (answer, grade, memory write); the writes are drained.
3. **after learning**: recall@10 of every query again, as ``learner``: the teaching
   questions asked again (*same question*), and the queries never asked before that use a
   learned alias (*other questions*, also measured with ``memory_relevance_threshold``
   0.5 instead of the default 0.7).

Metrics at 10: recall (share of the relevant passages retrieved), nDCG and MRR (rank of
the first relevant passage), and per group how many queries recalled a memory and how
many ranked their first relevant passage higher or lower than without memory. Dense search
alone already finds most of these passages (the alias word is absent, not the meaning), so
recall@10 moves little; the ranks show what the learned word adds.

Modes: ``offline`` (no LLM: the evidence grader must find the mapping itself) and
``scripted-llm`` (a chat model whose grade names the dataset's mapping for the question --
what a good LLM grader would store). Evaluation passes stop the graph after ``fuse`` (the
answer and grade do not change what was retrieved) and record whether memory was recalled
and which terms went into the BM25 memory group. A stored fact counts as correct when it
maps the alias to a word the dataset pairs with it (up to inflection). Note: the agent's
BM25 stems words, so a few dataset aliases are not absent for it ("grab" matches
"grabbing"); the offline grader proposes nothing for those. Results:
``bench/results/memory_alias.json``; ``--limit N`` runs the first N queries (a smoke test).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import sys
import time
from collections import defaultdict
from collections.abc import Sequence
from typing import Any

os.environ.setdefault("MEM0_TELEMETRY", "False")

from langchain_core.language_models.fake_chat_models import FakeListChatModel
from langchain_core.runnables import Runnable, RunnableLambda
from langgraph.store.memory import InMemoryStore

from bench._common import (
    RESULTS,
    CachedEmbeddings,
    build_collection,
    git_revision,
    machine,
    ndcg_recall,
    open_agent,
    setup_logging,
)
from retrievalagent.embeddings import MiniLMEmbeddings
from retrievalagent.types import Grade

COLLECTION = "memory-aliases"
DEFAULT_RELEVANCE = 0.7
LOW_RELEVANCE = 0.5
_QUESTION = re.compile(r"^Question: (.*?)\n\nPassages:", re.DOTALL)


class KnowsTheAliases(FakeListChatModel):
    """A chat model stand-in whose grade names the dataset's mapping for the question's alias
    (what a good LLM grader would store); its answers are a fixed sentence."""

    responses: list[str] = ["The passages answer it [1]."]  # noqa: RUF012 - pydantic field
    pairs: dict[str, tuple[str, str]] = {}  # noqa: RUF012 - question -> (alias, canonical)

    def with_structured_output(self, schema: Any, **kwargs: Any) -> Runnable[Any, Any]:
        def grade(messages: Any) -> Grade:
            found = _QUESTION.search(str(messages[-1].content))
            pair = self.pairs.get(found.group(1).strip().lower()) if found else None
            return Grade(
                sufficient=True,
                confidence=0.9,
                memory_worth_storing=pair is not None,
                memory_confidence=0.95 if pair else 0.0,
                memory_fact=f'"{pair[0]}" is called "{pair[1]}" in these documents' if pair else "",
            )

        return RunnableLambda(grade)


def _retrieved(agent: Any, query: str, user: str) -> tuple[list[str], dict[str, Any]]:
    """Sources of the graph's own retrieval for ``query`` (stopped after ``fuse``), and what
    memory did in it."""
    info: dict[str, Any] = {"recalled": False, "memory_terms": "", "best_score": None}
    for event in agent.stream(query, config={"configurable": {"user_id": user}}):
        if event["type"] != "node":
            continue
        update = event["update"]
        for trace in update.get("trace") or []:
            if trace.get("node") == "read_memory":
                info["recalled"] = bool(trace.get("n_kept"))
                info["best_score"] = trace.get("best_score")
            elif trace.get("node") == "lexical_search":
                info["memory_terms"] = trace.get("memory_terms", "")
        if event["node"] == "fuse":
            return [s["source"] for s in update["sources"]], info
    raise RuntimeError("the graph ended before fuse")


def _recall(agent: Any, queries: Sequence[dict[str, Any]], user: str) -> list[dict[str, Any]]:
    rows = []
    for q in queries:
        ranked, info = _retrieved(agent, q["query"], user)
        ndcg, recall = ndcg_recall(ranked, q["relevant"], k=10)
        first = next((i for i, pid in enumerate(ranked[:10]) if pid in q["relevant"]), None)
        rr = 0.0 if first is None else 1.0 / (first + 1)
        rows.append({"id": q["id"], "recall": recall, "ndcg": ndcg, "mrr": rr, **info})
    return rows


def _mean(values: Sequence[float]) -> float:
    return round(statistics.fmean(values), 4) if values else float("nan")


def _metrics(rows: dict[str, Any], group: Sequence[dict[str, Any]]) -> dict[str, float]:
    return {m: _mean([rows[q["id"]][m] for q in group]) for m in ("recall", "ndcg", "mrr")}


def _by_alias(queries: Sequence[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    """Queries grouped by alias, in dataset order (the first of each group teaches)."""
    out: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for q in queries:
        out[q["alias"]].append(q)
    return out


def _same_word(a: str, b: str) -> bool:
    """One word, up to its inflection ("keyring" / "keyrings", "initialize" /
    "initialization"): a long common prefix."""
    common = next(
        (i for i, (x, y) in enumerate(zip(a, b, strict=False)) if x != y), min(len(a), len(b))
    )
    return a == b or (common >= 4 and common >= min(len(a), len(b)) - 2)


def _fact_ok(fact: str, alias: str, canonicals: set[str]) -> bool:
    """The fact maps ``alias`` to a corpus word the dataset pairs with it (any of them:
    "purge" is paired with both "remove" and "delete")."""
    parts = fact.split('"')
    if len(parts) < 4 or parts[1].lower() != alias.lower():
        return False
    said = re.findall(r"[a-z]+", parts[3].lower())
    wanted = {w for c in canonicals for w in c.lower().split()}
    return any(_same_word(s, w) for s in said for w in wanted)


def _canonicals(queries: Sequence[dict[str, Any]]) -> dict[str, set[str]]:
    out: dict[str, set[str]] = defaultdict(set)
    for q in queries:
        out[q["alias"]].add(q["canonical"])
    return out


def _teach(
    agent: Any, queries: Sequence[dict[str, Any]], user: str, canonicals: dict[str, set[str]]
) -> list[dict[str, Any]]:
    out = []
    for q in queries:
        state = agent.invoke(q["query"], config={"configurable": {"user_id": user}})
        grade = state.grade
        out.append(
            {
                "id": q["id"],
                "alias": q["alias"],
                "stored": state.memory_fact,
                "proposed": grade.get("memory_fact", ""),
                "memory_confidence": round(float(grade.get("memory_confidence", 0.0)), 3),
                "correct": _fact_ok(state.memory_fact, q["alias"], canonicals[q["alias"]])
                if state.memory_fact
                else None,
            }
        )
    return out


def run_mode(
    mode: str,
    queries: list[dict[str, Any]],
    embeddings: Any,
    before: list[dict[str, Any]] | None,
) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    model = (
        None
        if mode == "offline"
        else KnowsTheAliases(
            pairs={q["query"].lower(): (q["alias"], q["canonical"]) for q in queries}
        )
    )
    store = InMemoryStore()  # memories outlive the agents below: the store is passed in

    def agent(**settings: Any) -> Any:
        return open_agent(
            COLLECTION, embeddings=embeddings, model=model, memory_store=store, top_k=10, **settings
        )

    by_alias = _by_alias(queries)
    taught = [group[0] for group in by_alias.values()]
    others = [q for group in by_alias.values() for q in group[1:]]
    rag = agent()
    try:
        if before is None:
            before = _recall(rag, queries, user="nobody")
        started = time.perf_counter()
        teaching = _teach(rag, taught, user="learner", canonicals=_canonicals(queries))
        drain = rag.drain_background()
        teach_seconds = time.perf_counter() - started
        after = _recall(rag, queries, user="learner")
    finally:
        rag.close()
    low = agent(memory_relevance_threshold=LOW_RELEVANCE)
    try:
        after_low = _recall(low, others, user="learner")
    finally:
        low.close()
    was = {row["id"]: row for row in before}
    now = {row["id"]: row for row in after}
    low_now = {row["id"]: row for row in after_low}
    stored = [t for t in teaching if t["stored"]]

    def metrics(rows: dict[str, Any], group: list[dict[str, Any]]) -> dict[str, float]:
        return {m: _mean([rows[q["id"]][m] for q in group]) for m in ("recall", "ndcg", "mrr")}

    def changed(group: list[dict[str, Any]], rows: dict[str, Any]) -> dict[str, int]:
        return {
            "recalled": sum(rows[q["id"]]["recalled"] for q in group),
            "ranked_higher": sum(rows[q["id"]]["mrr"] > was[q["id"]]["mrr"] for q in group),
            "ranked_lower": sum(rows[q["id"]]["mrr"] < was[q["id"]]["mrr"] for q in group),
        }

    result = {
        "recall@10_without_memory": metrics(was, queries)["recall"],
        "recall@10_after_learning": metrics(now, queries)["recall"],
        "same_question": {
            "what": "the teaching questions asked again",
            "n": len(taught),
            "before@10": metrics(was, taught),
            "after@10": metrics(now, taught),
            **changed(taught, now),
        },
        "other_questions_same_alias": {
            "what": "questions never asked before that use a learned alias",
            "n": len(others),
            "before@10": metrics(was, others),
            f"after@10_relevance_{DEFAULT_RELEVANCE}": metrics(now, others),
            f"at_{DEFAULT_RELEVANCE}": changed(others, now),
            f"after@10_relevance_{LOW_RELEVANCE}": metrics(low_now, others),
            f"at_{LOW_RELEVANCE}": changed(others, low_now),
            "best_memory_score_median": round(
                statistics.median(now[q["id"]]["best_score"] or 0.0 for q in others), 3
            )
            if others
            else None,
        },
        "teaching": {
            "turns": len(taught),
            "facts_stored": len(stored),
            "facts_correct": sum(bool(t["correct"]) for t in stored),
            "seconds": round(teach_seconds, 1),
            "drain": dict(drain),
        },
        "stored_facts": sorted(t["stored"] for t in stored if t["correct"]),
        "wrong_facts": sorted(t["stored"] for t in stored if not t["correct"]),
    }
    return result, before


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--modes", nargs="+", default=["offline", "scripted-llm"])
    parser.add_argument("--limit", type=int, default=0, help="first N queries only (smoke)")
    args = parser.parse_args(argv)
    setup_logging()
    started = time.perf_counter()
    from bench.datasets import load

    corpus, queries = load("aliases")
    if args.limit:
        queries = queries[: args.limit]
    build = build_collection(COLLECTION, corpus, CachedEmbeddings())
    embeddings = MiniLMEmbeddings().load()
    modes: dict[str, Any] = {}
    before = None
    for mode in args.modes:
        modes[mode], before = run_mode(mode, queries, embeddings, before)
    # The ceiling of what learning the word can do: each query in the corpus's own wording.
    rag = open_agent(COLLECTION, embeddings=embeddings, top_k=10)
    try:
        worded = _recall(rag, [{**q, "query": q["base_query"]} for q in queries], user="nobody")
    finally:
        rag.close()
    firsts = {qs[0]["id"] for qs in _by_alias(queries).values()}
    corpus_wording = {
        "what": "every query with the corpus's word instead of the alias, no memory",
        "same_question@10": _metrics(
            {r["id"]: r for r in worded}, [q for q in queries if q["id"] in firsts]
        ),
        "other_questions@10": _metrics(
            {r["id"]: r for r in worded}, [q for q in queries if q["id"] not in firsts]
        ),
    }
    payload = {
        "benchmark": "memory_alias",
        "command": "python -m bench.memory.alias_bench "
        + " ".join(sys.argv[1:] if argv is None else argv),
        "git": git_revision(),
        "machine": machine(),
        "corpus": f"bench.datasets aliases: Linux man-pages 6.03 ({build['passages']} passages)",
        "queries": len(queries),
        "aliases": len({q["alias"] for q in queries}),
        "protocol": "see bench/memory/alias_bench.py docstring",
        "memory": "InMemoryStore (memory_store=), default thresholds unless named",
        "modes": modes,
        "corpus_wording": corpus_wording,
    }
    payload["run_seconds"] = round(time.perf_counter() - started, 1)
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "memory_alias.json").write_text(json.dumps(payload, indent=2) + "\n")
    return payload


if __name__ == "__main__":
    print(json.dumps(main(), indent=2))

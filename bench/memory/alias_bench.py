"""Does memory fix queries that use a word the corpus lacks?  ``python -m bench.memory.alias_bench``

Corpus: the documentation of the PyPI sdist ``click`` 8.5.1 (its passages from
``bench.datasets.load("pydocs")``). Queries: for each hand-written alias pair below (a
word users type, absent from the corpus, and the word click's docs use), windows of 8
words around the canonical word in real passages, with that word replaced by the alias.
Relevant = the passage the window came from. Pairs whose alias occurs anywhere in the
corpus are dropped.

Protocol, per mode: recall@10 of the agent's fused search for every query with no memory;
then one *teaching* turn per alias (its first query, through the full graph: answer, grade,
memory write, drain); then recall@10 again for all queries, split into the teaching queries
and the held-out ones. Modes: ``offline`` (no LLM: the evidence grader must find the
mapping itself) and ``scripted-llm`` (a chat model whose grade names the right mapping,
i.e. what a good LLM grader would do). Memory: ``InMemoryStore``. Results:
``bench/results/memory_alias.json``.
"""

from __future__ import annotations

import json
import os
import random
import re
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

os.environ.setdefault("MEM0_TELEMETRY", "False")

from langchain_core.documents import Document
from langgraph.store.memory import InMemoryStore

from retrievalagent import init_agent
from retrievalagent.embeddings import MiniLMEmbeddings

ROOT = Path(__file__).resolve().parents[2]
RESULT = ROOT / "bench" / "results" / "memory_alias.json"
PACKAGE = "click"
PER_ALIAS = 2  # queries per alias: 1 teaching + held-out
# (alias a user types, word the docs use): written for this benchmark, not from a thesaurus.
PAIRS = [
    ("flagpole", "option"),
    ("subcmd", "subcommand"),
    ("cmdline", "command"),
    ("toggle", "flag"),
    ("initialise", "initialize"),
    ("colour", "color"),
    ("autocomplete", "completion"),
    ("stdout", "output"),
    ("quitting", "exit"),
    ("verb", "command"),
    ("positional", "argument"),
    ("catalogue", "list"),
    ("behaviour", "behavior"),
    ("customise", "customize"),
    ("prog", "program"),
    ("ttys", "terminal"),
    ("envvar", "environment"),
    ("cfgfile", "config"),
    ("helptext", "help"),
    ("typecast", "conversion"),
    ("dialog", "prompt"),
    ("progressbar", "progress"),
    ("callback-fn", "callback"),
    ("pager", "paging"),
]
WORD = re.compile(r"[A-Za-z][A-Za-z'-]*")


def _corpus() -> list[dict[str, Any]]:
    from bench.datasets import load

    corpus, _ = load("pydocs")
    return [p for p in corpus if p["id"].startswith(f"{PACKAGE}:")]


def _queries(corpus: list[dict[str, Any]], vocab: set[str]) -> list[dict[str, Any]]:
    rng = random.Random(3)
    queries = []
    for alias, canonical in PAIRS:
        if alias in vocab or ("-" in alias and alias.replace("-", " ") in vocab):
            continue
        found = []
        for p in corpus:
            words = WORD.findall(p["text"])
            spots = [i for i, w in enumerate(words) if w.lower() == canonical]
            if spots:
                i = rng.choice(spots)
                window = words[max(0, i - 4) : i + 4]
                text = " ".join(alias if w.lower() == canonical else w for w in window)
                found.append({"query": text, "relevant": p["id"], "alias": alias,
                              "canonical": canonical})  # fmt: skip
        rng.shuffle(found)
        queries.extend(found[:PER_ALIAS])
    return queries


class KnowsTheAliases:
    """A chat model stand-in whose grade names the right mapping (a good LLM grader)."""

    def __init__(self, pairs: dict[str, str]) -> None:
        from tests.fakes import ScriptedChatModel

        def grade(messages: Any) -> dict[str, Any]:
            text = str(messages[-1].content).split("Passages:", 1)[0].lower()
            alias = next((a for a in pairs if re.search(rf"\b{re.escape(a)}\b", text)), None)
            return {"sufficient": True, "confidence": 0.9, "memory_worth_storing": bool(alias),
                    "memory_confidence": 0.95 if alias else 0.0,
                    "memory_fact": f'"{alias}" is called "{pairs[alias]}" in these documents'
                    if alias else ""}  # fmt: skip

        self.model = ScriptedChatModel(replies=["(answer)"], grades=[grade])


def _recall(agent: Any, queries: list[dict[str, Any]], user: str) -> list[float]:
    """recall@10 of the agent's own graph (memory recall + fused search) per query."""
    out = []
    for q in queries:
        state = agent.invoke(q["query"], config={"configurable": {"user_id": user}})
        ids = [s["metadata"].get("passage_id") for s in state.sources]
        out.append(1.0 if q["relevant"] in ids[:10] else 0.0)
    return out


def run_mode(mode: str, corpus: list[dict[str, Any]], queries: list[dict[str, Any]],
             embeddings: Any, data: Path) -> dict[str, Any]:  # fmt: skip
    model = (
        KnowsTheAliases({q["alias"]: q["canonical"] for q in queries}).model
        if mode != "offline"
        else None
    )
    agent = init_agent(f"alias-{mode}", backend_url=":memory:", data_dir=data, embeddings=embeddings,
                       model=model, memory_store=InMemoryStore(), top_k=10,
                       memory_storage_threshold=0.85)  # fmt: skip
    agent.add_documents(
        [
            Document(p["text"], metadata={"passage_id": p["id"], "source": p["source"]})
            for p in corpus
        ],
        progress=False,
    )
    before = _recall(agent, queries, user="fresh")
    by_alias: dict[str, list[int]] = defaultdict(list)
    for i, q in enumerate(queries):
        by_alias[q["alias"]].append(i)
    taught, facts = [], []
    for idx in by_alias.values():
        state = agent.invoke(
            queries[idx[0]]["query"], config={"configurable": {"user_id": "learner"}}
        )
        taught.append(idx[0])
        if state.memory_fact:
            facts.append(state.memory_fact)
    drain = agent.drain_background()
    # evaluation turns only read the learned memory (nothing new is stored meanwhile)
    agent._nodes.s = agent.settings.replace(memory_storage_threshold=1.0)
    after = _recall(agent, queries, user="learner")
    agent.close()
    held = [i for i in range(len(queries)) if i not in taught]

    def mean(values: list[float], idx: list[int]) -> float:
        return round(sum(values[i] for i in idx) / max(1, len(idx)), 4)

    return {
        "recall@10_without_memory": mean(before, list(range(len(queries)))),
        "recall@10_after_learning": mean(after, list(range(len(queries)))),
        "teaching_queries": {
            "n": len(taught),
            "before": mean(before, taught),
            "after": mean(after, taught),
        },
        "held_out_queries": {
            "n": len(held),
            "before": mean(before, held),
            "after": mean(after, held),
        },
        "facts_stored": len(facts),
        "facts_correct": len(
            {
                f
                for f in facts
                if any(f.startswith(f'"{q["alias"]}" is called "{q["canonical"]}') for q in queries)
            }
        ),
        "facts": facts,
        "drain": dict(drain),
    }


def main() -> dict[str, Any]:
    started = time.perf_counter()
    corpus = _corpus()
    vocab = {w.lower() for p in corpus for w in WORD.findall(p["text"])}
    queries = _queries(corpus, vocab)
    data = Path(os.environ.get("TMPDIR", "/tmp")) / "retrievalagent-bench-alias"
    embeddings = MiniLMEmbeddings().load()
    result: dict[str, Any] = {
        "corpus": f"PyPI sdist {PACKAGE} docs via bench.datasets pydocs ({len(corpus)} passages)",
        "aliases": sorted({q["alias"] for q in queries}),
        "queries": len(queries),
        "modes": {},
    }
    for mode in ("offline", "scripted-llm"):
        result["modes"][mode] = run_mode(mode, corpus, queries, embeddings, data)
    result["seconds"] = round(time.perf_counter() - started, 1)
    RESULT.parent.mkdir(parents=True, exist_ok=True)
    RESULT.write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result, indent=2))
    return result


if __name__ == "__main__":
    main()

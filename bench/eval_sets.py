"""``retrievalagent eval --tune`` on every set, with the LLM reranker through a scripted model.

    python -m bench.eval_sets                          # sample, manpages, aliases
    python -m bench.eval_sets --sets sample,manpages

Each set is evaluated the way a user would run ``retrievalagent eval``:

* ``sample``: the bundled sample docs, no labels (a set derived from their headings);
* ``manpages``, ``aliases`` (and ``glossary``): the bench datasets written out as BEIR
  folders (``<cache>/beir/<name>``); ``aliases`` queries the manpages corpus, so both
  share one collection and the corpus is embedded once.

The reranker is ``reranker="llm"`` through langchain-openai and the project's local
OpenAI-compatible server (``tests/servers``), whose scripted "model" orders the passages
by how many of the question's words each contains (ties keep the fused order). The
numbers show the stage working end to end, not what a real LLM would gain.

Then the cross-set check behind the shipped fusion default: each set's best setting on
dev is applied (as its ``RAG_*`` variables would) and scored on every set's queries.
Results: ``bench/results/eval_sets.json``.
"""

from __future__ import annotations

import argparse
import json
import logging
import re
import time
from pathlib import Path
from typing import Any

from bench._common import setup_logging, write_result

log = logging.getLogger("bench.eval_sets")

SETS = ("sample", "manpages", "aliases")
_WORD = re.compile(r"[a-z0-9]{3,}")
_STOP = frozenset(
    ["the", "and", "for", "with", "what", "how", "does", "which", "that", "this", "from", "into"]
)


def _words(text: str) -> set[str]:
    return {w for w in _WORD.findall(text.lower()) if w not in _STOP}


def scripted_rerank(request: Any) -> Any:
    """The scripted model: a listwise ranking by question-word overlap, or a fixed answer."""
    if "You rank search results" not in request.system_prompt:
        if request.json_schema is not None:
            return {"sufficient": True, "confidence": 0.9, "memory_worth_storing": False,
                    "memory_confidence": 0.0, "memory_fact": ""}  # fmt: skip
        return "See [1]."
    body = request.last_user_message
    question = body.split("\n", 1)[0].removeprefix("Question: ")
    wanted = _words(question)
    passages = re.split(r"\n\n(?=\[\d+\])", body.split("Passages:\n\n", 1)[1])
    scored = []
    for block in passages:
        number = int(block[1 : block.index("]")])
        scored.append((-len(wanted & _words(block)), number))
    return {"order": [n for _, n in sorted(scored)]}


def beir_folder(name: str, root: Path) -> Path:
    """The bench set ``name`` written as a BEIR folder (once)."""
    from bench.datasets import load

    folder = root / "beir" / name
    if (folder / "qrels" / "test.tsv").exists():
        return folder
    corpus, queries = load(name)
    (folder / "qrels").mkdir(parents=True, exist_ok=True)
    with (folder / "corpus.jsonl").open("w") as fh:
        for p in corpus:
            fh.write(json.dumps({"_id": p["id"], "title": p.get("title", ""), "text": p["text"]}))
            fh.write("\n")
    with (folder / "queries.jsonl").open("w") as fh:
        for q in queries:
            fh.write(json.dumps({"_id": q["id"], "text": q["query"]}) + "\n")
    with (folder / "qrels" / "test.tsv").open("w") as fh:
        fh.write("query-id\tcorpus-id\tscore\n")
        for q in queries:
            fh.writelines(f"{q['id']}\t{doc}\t1\n" for doc in q["relevant"])
    return folder


def source_of(name: str, root: Path, cached: Any = None) -> dict[str, Any]:
    """``evaluate`` arguments for set ``name`` (``cached``: the bench vector cache, with the
    benchmarks' one-chunk-per-passage size, instead of the real model and default chunks)."""
    if name == "sample":
        from retrievalagent import sample_docs_path

        return {"docs": sample_docs_path(), "collection": "eval-sample-derived"}
    from bench.quality import corpus_of

    args = {"beir": beir_folder(name, root), "collection": f"eval-{corpus_of(name)}"}
    if cached is not None:
        from bench._common import BENCH_CHUNK_SIZE

        args.update(embeddings=cached, chunk_size=BENCH_CHUNK_SIZE)
        args["collection"] += "-bench"
    return args


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sets", default=",".join(SETS))
    parser.add_argument("--no-rerank", action="store_true")
    parser.add_argument(
        "--cached-vectors",
        action="store_true",
        help="BEIR sets: passage vectors from the bench cache, one chunk per passage",
    )
    args = parser.parse_args(argv)
    setup_logging()
    from langchain_openai import ChatOpenAI

    from bench.datasets.sources import cache_dir
    from retrievalagent.eval import Setting, evaluate
    from tests.servers.openai_compat import OpenAICompatServer

    started = time.perf_counter()
    root = cache_dir()
    data_dir = root / "eval-data"
    sets = [s.strip() for s in args.sets.split(",") if s.strip()]
    cached = None
    if args.cached_vectors:
        from bench._common import CachedEmbeddings

        cached = CachedEmbeddings()
    results: dict[str, Any] = {}
    with OpenAICompatServer(responder=scripted_rerank) as server:
        model = ChatOpenAI(model="scripted-reranker", base_url=server.base_url, api_key="sk-x")
        for name in sets:
            t0 = time.perf_counter()
            report = evaluate(
                **source_of(name, root, cached),
                tune=True,
                reranker=None if args.no_rerank else "llm",
                model=model,
                data_dir=data_dir,
                progress=False,
                on_stage=lambda m, n=name: log.info("%s: %s", n, m),
            )
            results[name] = {**report.to_dict(), "wall_s": round(time.perf_counter() - t0, 1)}
            log.info("%s: %s", name, json.dumps(report.runs))
        # each set's best setting on dev (before the noise rule), applied through its
        # variables, on every set's queries
        tuned = {n: results[n]["tuned"] for n in sets}
        cross: dict[str, dict[str, Any]] = {}
        for src, t in tuned.items():
            env = t["best_on_dev_env"]
            setting = Setting(
                env["RAG_FUSION"],
                float(env.get("RAG_DENSE_WEIGHT", 0.5)),
                int(env["RAG_FETCH_K"]),
                int(env.get("RAG_RRF_K", 60)),
            )
            cross[src] = {"setting": setting.label(), "ndcg@10": {}}
            for name in sets:
                report = evaluate(
                    **source_of(name, root, cached),
                    data_dir=data_dir,
                    progress=False,
                    fusion=setting.fusion,
                    dense_weight=setting.dense_weight,
                    fetch_k=setting.fetch_k,
                    rrf_k=setting.rrf_k,
                )
                cross[src]["ndcg@10"][name] = report.run("hybrid")["ndcg@10"]
    write_result(
        "eval_sets",
        {
            "sets": results,
            "cross_set": cross,
            "vectors": "bench cache, chunk_size 4000" if cached else "packaged model, defaults",
            "reranker": "llm via langchain-openai + tests/servers OpenAI-compatible server; "
            "scripted model orders passages by question-word overlap",
        },
        started,
    )
    for name in sets:
        print(f"\n{name}")
        for row in results[name]["runs"]:
            print(
                f"  {row['run']:<14} {row['split']:<5} {row['queries']:>4}  "
                + "  ".join(
                    f"{m} {row[m]:.3f}" for m in ("ndcg@10", "recall@10", "recall@100", "mrr@10")
                )
            )
        print(f"  tuned: {results[name]['tuned']['setting']}  timings: {results[name]['timings']}")
    for src, row in cross.items():
        print(f"tuned on {src}: {row['setting']} -> {row['ndcg@10']}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

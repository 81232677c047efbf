"""The "fact given" ceiling of the alias sets: plain BM25 when the fact is simply handed over.

    python -m bench.datasets.ceiling                    # aliases and glossary, printed table
    python -m bench.datasets.ceiling --json out.json    # also the numbers as JSON

For every alias query (its teaching phrasing and each other phrasing) recall@10 and
nDCG@10 of BM25 over

* ``plain``: the question as asked (the alias is absent from the corpus);
* ``+ fact``: the question followed by the fact ``"<alias>" is called "<canonical>" in
  these documents`` (what a memory that recalled the fact could add to the query);
* ``alias -> canonical``: the question with the alias replaced by the canonical term.

Control questions (no taught alias) are scored plain, and with the fact of a seeded
random taught alias appended, which is what a false recall would do to them.

BM25 is the project's own: ``retrievalagent.retrieval.LexicalEncoder`` (Qdrant's BM25
tokenizer: English stop words, Snowball stemmer; k1 = 1.2, b = 0.75, its fixed average
length) over ``# title`` + text as the benchmark indexes a passage, with Qdrant's IDF
(``ln(1 + (N - n + 0.5) / (n + 0.5))``) applied in process. ``ceiling(name)`` returns the
numbers for the lead's benchmarks; ``fact_text`` is the fact's wording.
"""

from __future__ import annotations

import argparse
import json
import math
import random
import re
import sys
import time
from collections import defaultdict
from collections.abc import Iterable
from pathlib import Path

import numpy as np

if __package__ in (None, ""):  # run as a script: make ``bench.datasets`` importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
    __package__ = "bench.datasets"

from bench.datasets import load, load_controls
from bench.datasets.baseline import _metrics

SETS = ("aliases", "glossary")
SEED = 20261122


def fact_text(alias: str, canonical: str) -> str:
    """The fact as a memory states it (the wording the issue's ceiling uses)."""
    return f'"{alias}" is called "{canonical}" in these documents'


def replace_alias(text: str, alias: str, canonical: str) -> str:
    """``text`` with the alias (whole word, any case) written as the canonical term."""
    words = [re.escape(w) for w in alias.split()]
    rx = re.compile(r"(?<![\w-])" + r"[\s-]+".join(words) + r"(?![\w-])", re.I)
    out = rx.sub(canonical, text)
    assert out != text, f"{alias!r} not in {text!r}"
    return out


class ProjectBM25:
    """BM25 with the project's tokenizer and term weights, scored in process."""

    def __init__(self, corpus: list[dict]) -> None:
        from retrievalagent.index import LexicalEncoder

        self.encoder = LexicalEncoder()
        self.ids = [p["id"] for p in corpus]
        postings: dict[int, tuple[list[int], list[float]]] = defaultdict(lambda: ([], []))
        for row, p in enumerate(corpus):
            title = " ".join(str(p.get("title") or "").split())
            vec = self.encoder.encode_document(f"# {title}\n\n{p['text']}" if title else p["text"])
            for term, weight in zip(vec.indices, vec.values, strict=True):
                postings[term][0].append(row)
                postings[term][1].append(weight)
        n = len(corpus)
        self.postings = {
            t: (
                np.array(rows),
                np.array(ws) * math.log(1 + (n - len(rows) + 0.5) / (len(rows) + 0.5)),
            )
            for t, (rows, ws) in postings.items()
        }

    def has_term(self, word: str) -> bool:
        """Whether any term the word maps to occurs in the corpus."""
        return any(t in self.postings for t in self.encoder.term_ids(word))

    def top(self, query: str, k: int = 10) -> list[str]:
        scores = np.zeros(len(self.ids))
        for term, qw in self.encoder.query_terms(query).items():
            if term in self.postings:
                rows, ws = self.postings[term]
                scores[rows] += qw * ws
        best = np.argsort(-scores, kind="stable")[:k]
        return [self.ids[i] for i in best if scores[i] > 0]


def _score(bm25: ProjectBM25, pairs: Iterable[tuple[str, list[str]]]) -> dict:
    r_sum = n_sum = 0.0
    count = 0
    for text, relevant in pairs:
        r, n = _metrics(bm25.top(text), set(relevant))
        r_sum += r
        n_sum += n
        count += 1
    return {"n": count, "recall@10": round(r_sum / count, 3), "ndcg@10": round(n_sum / count, 3)}


def ceiling(name: str) -> dict:
    """Recall@10 / nDCG@10 of the set's questions: plain, + fact, alias -> canonical."""
    corpus, queries = load(name)
    controls = load_controls(name)
    started = time.perf_counter()
    bm25 = ProjectBM25(corpus)
    index_seconds = time.perf_counter() - started

    def variants(rows: list[tuple[str, dict]]) -> dict:
        return {
            "plain": _score(bm25, ((t, q["relevant"]) for t, q in rows)),
            "+ fact": _score(
                bm25,
                ((f"{t} {fact_text(q['alias'], q['canonical'])}", q["relevant"]) for t, q in rows),
            ),
            "alias -> canonical": _score(
                bm25,
                ((replace_alias(t, q["alias"], q["canonical"]), q["relevant"]) for t, q in rows),
            ),
        }

    teaching = [(q["query"], q) for q in queries]
    other = [(t, q) for q in queries for t in q["phrasings"]]
    rng = random.Random(SEED)
    wrong = {c["id"]: rng.choice(queries) for c in controls}
    control_rows = [(t, c) for c in controls for t in [c["query"], *c["phrasings"]]]
    out = {
        "set": name,
        "passages": len(corpus),
        "aliases": len({q["alias"].lower() for q in queries}),
        "teaching phrasing": variants(teaching),
        "other phrasings": variants(other),
        "controls": {
            "plain": _score(bm25, ((t, c["relevant"]) for t, c in control_rows)),
            "+ unrelated fact": _score(
                bm25,
                (
                    (
                        f"{t} {fact_text(wrong[c['id']]['alias'], wrong[c['id']]['canonical'])}",
                        c["relevant"],
                    )
                    for t, c in control_rows
                ),
            ),
        },
        # the dataset promises the alias is absent; check it under the project's stemmer
        "aliases found by the project tokenizer": sorted(
            {
                q["alias"]
                for q in queries
                if any(bm25.has_term(w) for w in bm25.encoder.words(q["alias"]))
            }
        ),
        "index_seconds": round(index_seconds, 1),
    }
    return out


def table(results: list[dict]) -> str:
    """The ceiling numbers as a Markdown table."""
    lines = [
        "| set | questions | n | plain R@10 / nDCG@10 | + fact | alias -> canonical |",
        "|---|---|---:|---|---|---|",
    ]
    for res in results:
        for group in ("teaching phrasing", "other phrasings"):
            g = res[group]
            cells = [f"{g[v]['recall@10']:.3f} / {g[v]['ndcg@10']:.3f}" for v in g]
            lines.append(
                f"| {res['set']} | {group} | {g['plain']['n']} | " + " | ".join(cells) + " |"
            )
        c = res["controls"]
        lines.append(
            f"| {res['set']} | controls (no alias; + fact = an unrelated taught fact) | "
            f"{c['plain']['n']} | {c['plain']['recall@10']:.3f} / {c['plain']['ndcg@10']:.3f} | "
            f"{c['+ unrelated fact']['recall@10']:.3f} / {c['+ unrelated fact']['ndcg@10']:.3f} | - |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("sets", nargs="*", help=f"sets to score (default: {' '.join(SETS)})")
    ap.add_argument("--json", type=Path, help="also write the numbers to this file")
    args = ap.parse_args(argv)
    unknown = [s for s in args.sets if s not in SETS]
    if unknown:
        ap.error(f"unknown set {unknown[0]!r}; choose from {', '.join(SETS)}")
    results = [ceiling(name) for name in args.sets or SETS]
    print(table(results))
    for res in results:
        leaked = res["aliases found by the project tokenizer"]
        print(
            f"{res['set']}: {res['passages']} passages, {res['aliases']} aliases; "
            f"aliases the project's tokenizer finds in the corpus: {leaked or 'none'}"
        )
    if args.json:
        args.json.write_text(json.dumps(results, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())

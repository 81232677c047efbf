"""Nested corpora of 1k, 10k and 100k chunks cut from the ``scale`` set, and their queries.

The passages are ordered by the SHA-1 of their id and the first ones taken until the
chunks reach the size, so every size is a random-looking sample and each smaller corpus is
inside the larger ones (their vectors are shared in the cache).

The stored vectors of these indexes are MiniLM embeddings of each chunk's first
``VECTOR_TOKENS`` tokens: a quarter of the full model's cost, which turns a four-hour
precompute on the shared 2-core machine into one hour. Brute-force dense search costs the
same whatever the vector values, so timings, memory and cold start are unaffected; the
quality numbers come from the evaluation sets, embedded in full. Every *timed* embedding
(queries, ingestion) uses the full model.
"""

from __future__ import annotations

import hashlib
import logging
from functools import lru_cache
from typing import Any

from bench._common import CachedEmbeddings, build_collection

log = logging.getLogger("bench.scale")

SIZES = {"1k": 1_000, "10k": 10_000, "100k": 100_000}
VECTOR_TOKENS = 64


def scale_embeddings() -> CachedEmbeddings:
    return CachedEmbeddings(max_tokens=VECTOR_TOKENS)


def parse_sizes(spec: str) -> list[str]:
    sizes = [s.strip().lower() for s in spec.split(",") if s.strip()]
    bad = [s for s in sizes if s not in SIZES]
    if bad:
        raise SystemExit(f"unknown size(s) {bad}; choose from {', '.join(SIZES)}")
    return sizes


@lru_cache(maxsize=1)
def _scale() -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    from bench.datasets import load

    corpus, queries = load("scale")
    corpus = sorted(corpus, key=lambda p: hashlib.sha1(p["id"].encode()).hexdigest())
    return corpus, queries


def passages(size: str) -> list[dict[str, Any]]:
    """The first passages (in id-hash order) that make ``size`` chunks."""
    return _prefix(SIZES[size])


@lru_cache(maxsize=4)
def _prefix(n_chunks: int) -> list[dict[str, Any]]:
    from bench._common import passage_chunk_lists

    corpus, _ = _scale()
    total = 0
    for i, chunks in enumerate(passage_chunk_lists(corpus)):
        total += len(chunks)
        if total >= n_chunks:
            return corpus[: i + 1]
    log.warning("the scale set makes %d chunks, fewer than %d", total, n_chunks)
    return corpus


def queries(n: int = 200) -> list[str]:
    """Query texts for latency runs: the scale set's own, else the evaluation sets'."""
    from bench.datasets import load, path
    from bench.datasets.passages import read_jsonl

    # Only the queries file: loading the 100k-passage corpus would inflate the RSS measured
    # by the process that calls this.
    qfile = path("scale") / "queries.jsonl"
    qs = read_jsonl(qfile) if qfile.exists() else _scale()[1]
    texts = [q["query"] for q in qs]
    if len(texts) < n:
        for name in ("manpages", "pydocs"):
            texts += [q["query"] for q in load(name)[1]]
    texts = sorted(dict.fromkeys(texts), key=lambda t: hashlib.sha1(t.encode()).hexdigest())
    return texts[:n]


def collection(size: str) -> str:
    return f"scale-{size}"


def ensure(size: str, embeddings: CachedEmbeddings | None = None) -> dict[str, Any]:
    """Build (once) the ``scale-<size>`` collection from cached vectors."""
    return build_collection(collection(size), passages(size), embeddings or scale_embeddings())


def embed_ahead(size: str = "100k") -> None:
    """Fill the vector cache for a scale corpus, shortest texts first (least padding)."""
    from bench._common import passage_chunks

    cached = scale_embeddings()
    texts = [c.indexed_text for c in passage_chunks(passages(size))]
    todo = sorted({t for t in texts if t not in cached}, key=len)
    log.info("%d chunk texts, %d not cached yet", len(texts), len(todo))
    step = 8192
    for start in range(0, len(todo), step):
        cached.embed_array(todo[start : start + step])
        log.info("cached %d/%d", min(start + step, len(todo)), len(todo))


if __name__ == "__main__":
    from bench._common import setup_logging

    setup_logging()
    embed_ahead()

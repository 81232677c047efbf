"""Nested corpora of 1k, 10k and 100k chunks cut from the ``scale`` set, and their queries.

The passages are ordered by the SHA-1 of their id and the first N taken, so every size is
a random-looking sample and each smaller corpus is inside the larger ones (their vectors
are shared in the cache). Each passage is one chunk (``BENCH_CHUNK_SIZE``).
"""

from __future__ import annotations

import hashlib
import logging
from functools import lru_cache
from typing import Any

from bench._common import CachedEmbeddings, build_collection

log = logging.getLogger("bench.scale")

SIZES = {"1k": 1_000, "10k": 10_000, "100k": 100_000}


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
    corpus, _ = _scale()
    n = SIZES[size]
    if len(corpus) < n:
        log.warning("the scale set has %d passages, fewer than %d", len(corpus), n)
    return corpus[:n]


def queries(n: int = 200) -> list[str]:
    """Query texts for latency runs: the scale set's own, else the evaluation sets'."""
    from bench.datasets import load

    _, qs = _scale()
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
    return build_collection(collection(size), passages(size), embeddings or CachedEmbeddings())


def embed_ahead(limit: int | None = None) -> None:
    """Fill the vector cache for the scale corpus, shortest texts first (least padding)."""
    from bench._common import passage_chunks

    corpus, _ = _scale()
    cached = CachedEmbeddings()
    texts = [c.indexed_text for c in passage_chunks(corpus[:limit] if limit else corpus)]
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

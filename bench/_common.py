"""Shared plumbing of the benchmarks: machine facts, statistics, results, cached vectors, indexes.

Vectors of passages are computed once with the packaged MiniLM model and kept in
``bench/.cache/vectors`` (keyed by the SHA-1 of the exact text embedded), so rebuilding an
index for a benchmark costs BM25 encoding and upserts, not an hour of embedding. Benchmarks
that time embedding itself (ingestion, query latency, cold start) use the real model.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import platform
import resource
import shutil
import subprocess
import sys
import time
from collections.abc import Iterable, Sequence
from datetime import datetime, timezone
from importlib import metadata
from pathlib import Path
from typing import Any

import numpy as np
from langchain_core.documents import Document
from langchain_core.embeddings import Embeddings

BENCH = Path(__file__).resolve().parent
REPO = BENCH.parent
RESULTS = BENCH / "results"
CACHE = Path(os.environ.get("BENCH_CACHE_DIR", BENCH / ".cache"))  # as bench/datasets
VECTORS = CACHE / "vectors"
AGENTS = CACHE / "agents"
# Big enough that every evaluation passage stays one chunk (the longest is ~3,000 characters).
BENCH_CHUNK_SIZE = 4000
# Bumped when the library changes how it lays out an index, so cached indexes get rebuilt.
INDEX_FORMAT = "edge: exact dense, memory-mapped keyword indexes, optimized after ingest"

log = logging.getLogger("bench")

PACKAGES = (
    "retrievalagent",
    "qdrant-edge-py",
    "qdrant-client",
    "onnxruntime",
    "tokenizers",
    "numpy",
    "langchain-core",
    "langchain-classic",
    "langchain-community",
    "langgraph",
    "rank-bm25",
    "mem0ai",
    "matplotlib",
)


def setup_logging() -> None:
    logging.basicConfig(
        level=logging.INFO, format="%(asctime)s %(name)s: %(message)s", datefmt="%H:%M:%S"
    )


# ------------------------------------------------------------------------- machine facts
def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def _ram_gb() -> float | None:
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                return round(int(line.split()[1]) / 1024 / 1024, 1)
    except OSError:
        pass
    return None


def _version(name: str) -> str | None:
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return None


def machine() -> dict[str, Any]:
    """What the numbers were measured on."""
    try:
        usable = len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - not Linux
        usable = os.cpu_count()
    return {
        "cpu": _cpu_model(),
        "cores": os.cpu_count(),
        "usable_cores": usable,
        "ram_gb": _ram_gb(),
        "os": f"{platform.system()} {platform.release()}",
        "python": platform.python_version(),
        "packages": {name: _version(name) for name in PACKAGES},
        "load_avg_at_start": list(os.getloadavg()) if hasattr(os, "getloadavg") else None,
    }


def git_revision() -> str | None:
    try:
        out = subprocess.run(
            ["git", "-C", str(REPO), "rev-parse", "--short", "HEAD"],
            capture_output=True,
            text=True,
            check=True,
        )
        dirty = subprocess.run(
            ["git", "-C", str(REPO), "status", "--porcelain", "retrievalagent"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
        return out.stdout.strip() + ("+dirty" if dirty else "")
    except (OSError, subprocess.CalledProcessError):
        return None


# --------------------------------------------------------------------------- statistics
def summary(samples: Sequence[float]) -> dict[str, float]:
    """p50/p95/mean/min/max of timings (any unit), rounded for JSON."""
    if not samples:
        return {"n": 0}
    arr = np.asarray(samples, dtype=np.float64)
    return {
        "n": int(arr.size),
        "p50": round(float(np.percentile(arr, 50)), 3),
        "p95": round(float(np.percentile(arr, 95)), 3),
        "mean": round(float(arr.mean()), 3),
        "min": round(float(arr.min()), 3),
        "max": round(float(arr.max()), 3),
    }


def median(values: Iterable[float]) -> float:
    return float(np.median(np.asarray(list(values), dtype=np.float64)))


def _proc_status_mb(field: str) -> float | None:
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith(field + ":"):
                return round(int(line.split()[1]) / 1024, 1)
    except OSError:
        pass
    return None


def peak_rss_mb() -> float:
    """Peak resident set size of this process so far (MiB).

    Linux's ``VmHWM`` belongs to this program's own memory map. ``getrusage``'s
    ``ru_maxrss`` is not usable for a worker process: Linux carries the parent's peak
    across fork and exec, so every worker would report at least its parent's peak.
    """
    hwm = _proc_status_mb("VmHWM")
    if hwm is not None:
        return hwm
    kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return round(kib / 1024 if sys.platform != "darwin" else kib / 1024 / 1024, 1)


def current_rss_mb() -> float:
    rss = _proc_status_mb("VmRSS")
    return float("nan") if rss is None else rss


# ------------------------------------------------------------------------------ results
def write_result(name: str, payload: dict[str, Any], started: float | None = None) -> Path:
    """Write ``bench/results/<name>.json`` with the machine facts and run time added."""
    RESULTS.mkdir(parents=True, exist_ok=True)
    record = {
        "benchmark": name,
        "created": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "command": "python -m " + " ".join([f"bench.{name}", *sys.argv[1:]]),
        "git": git_revision(),
        "machine": machine(),
        **({"run_seconds": round(time.perf_counter() - started, 1)} if started else {}),
        **payload,
    }
    path = RESULTS / f"{name}.json"
    path.write_text(json.dumps(record, indent=2, ensure_ascii=False) + "\n")
    log.info("wrote %s", path.relative_to(REPO))
    return path


def read_result(name: str) -> dict[str, Any] | None:
    path = RESULTS / f"{name}.json"
    return json.loads(path.read_text()) if path.exists() else None


# ------------------------------------------------------------------------ cached vectors
def text_key(text: str) -> str:
    return hashlib.sha1(text.encode("utf-8", "surrogatepass")).hexdigest()


class CachedEmbeddings(Embeddings):
    """The packaged MiniLM model behind a persistent vector cache.

    Misses are embedded with the real model (in the order given, length-sorted inside
    ``embed_array``) and appended to the cache as a new shard, so an interrupted build
    resumes where it stopped. Only for building benchmark indexes: never for timing.
    """

    dimension = 384
    model_name = "all-MiniLM-L6-v2-int8-onnx"

    def __init__(self, max_tokens: int = 256, shard_rows: int = 2048) -> None:
        from retrievalagent.embeddings import MiniLMEmbeddings

        self.model = MiniLMEmbeddings(max_tokens=max_tokens)
        self.max_tokens = max_tokens
        name = "minilm-int8" if max_tokens == 256 else f"minilm-int8-t{max_tokens}"
        self.folder = VECTORS / name
        self.shard_rows = shard_rows
        self._rows: dict[str, tuple[int, int]] = {}
        self._shards: list[np.ndarray] = []
        self.hits = self.misses = 0
        self._load()

    def _load(self) -> None:
        self.folder.mkdir(parents=True, exist_ok=True)
        for keys_file in sorted(self.folder.glob("shard-*.keys")):
            vec_file = keys_file.with_suffix(".npy")
            if not vec_file.exists():
                continue
            keys = keys_file.read_text().split()
            vectors = np.load(vec_file, mmap_mode="r")
            if len(keys) != len(vectors):
                log.warning("ignoring damaged vector shard %s", keys_file.name)
                continue
            shard = len(self._shards)
            self._shards.append(vectors)
            for row, key in enumerate(keys):
                self._rows[key] = (shard, row)

    def _save(self, keys: list[str], vectors: np.ndarray) -> None:
        n = len(list(self.folder.glob("shard-*.npy")))
        stem = self.folder / f"shard-{n:05d}-{os.getpid()}"
        np.save(stem.with_suffix(".npy"), vectors.astype(np.float32))
        stem.with_suffix(".keys").write_text("\n".join(keys) + "\n")
        shard = len(self._shards)
        self._shards.append(vectors)
        for row, key in enumerate(keys):
            self._rows[key] = (shard, row)

    def __contains__(self, text: str) -> bool:
        return text_key(text) in self._rows

    def embed_array(self, texts: Sequence[str]) -> np.ndarray:
        keys = [text_key(t) for t in texts]
        missing: dict[str, str] = {}
        for key, text in zip(keys, texts, strict=True):
            if key not in self._rows and key not in missing:
                missing[key] = text
        self.hits += len(texts) - len(missing)
        self.misses += len(missing)
        if missing:
            todo = list(missing.items())
            started = time.perf_counter()
            for start in range(0, len(todo), self.shard_rows):
                part = todo[start : start + self.shard_rows]
                self._save([k for k, _ in part], self.model.embed_array([t for _, t in part]))
                done = start + len(part)
                rate = done / (time.perf_counter() - started)
                if len(todo) > self.shard_rows:
                    log.info("embedded %d/%d new texts (%.1f/s)", done, len(todo), rate)
        out = np.empty((len(texts), self.dimension), dtype=np.float32)
        for i, key in enumerate(keys):
            shard, row = self._rows[key]
            out[i] = self._shards[shard][row]
        return out

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        return self.embed_array(texts).tolist()

    def embed_query(self, text: str) -> list[float]:
        return self.embed_array([text])[0].tolist()


# ------------------------------------------------------------------------------ passages
def passage_document(passage: dict[str, Any]) -> Document:
    """A dataset passage as the Document a user would add: its title as a heading.

    The chunk it becomes is embedded and BM25-encoded as ``title + "\\n" + text`` (the
    heading path, then the passage), and its ``source`` is the passage id.
    """
    title = " ".join(str(passage.get("title") or "").split())
    body = f"# {title}\n\n{passage['text']}" if title else passage["text"]
    return Document(page_content=body, metadata={"source": passage["id"]})


def passage_chunk_lists(
    passages: Sequence[dict[str, Any]], chunk_size: int = BENCH_CHUNK_SIZE
) -> list[list[Any]]:
    """The chunks the ingestion pipeline makes of each passage (to embed them ahead)."""
    from retrievalagent.config import Settings
    from retrievalagent.ingest import expand_inputs
    from retrievalagent.ingest._chunking import chunk_sections

    overlap = Settings.load(env={}).chunk_overlap
    docs = expand_inputs([passage_document(p) for p in passages])
    return [chunk_sections(doc.sections(), chunk_size, overlap) for doc in docs]


def passage_chunks(passages: Sequence[dict[str, Any]], chunk_size: int = BENCH_CHUNK_SIZE) -> list:
    return [c for chunks in passage_chunk_lists(passages, chunk_size) for c in chunks]


def open_agent(collection: str, *, embeddings: Embeddings | None = None, **kwargs: Any) -> Any:
    """An agent over a benchmark collection under ``bench/.cache/agents``."""
    from retrievalagent import init_agent

    kwargs.setdefault("chunk_size", BENCH_CHUNK_SIZE)
    return init_agent(collection, data_dir=AGENTS, embeddings=embeddings, **kwargs)


def build_collection(
    collection: str,
    passages: Sequence[dict[str, Any]],
    embeddings: CachedEmbeddings,
    *,
    batch: int = 20000,
) -> dict[str, Any]:
    """Index ``passages`` into ``collection`` through ``add_documents`` (idempotent).

    A marker file records a finished build, so a second call only opens the index.
    """
    marker = AGENTS / collection / "built.json"
    digest = hashlib.sha1(
        "\n".join([INDEX_FORMAT, *(p["id"] + "\x00" + p["text"] for p in passages)]).encode()
    ).hexdigest()
    if marker.exists():
        info = json.loads(marker.read_text())
        if info.get("digest") == digest:
            return info
    if (AGENTS / collection).exists():  # the dataset changed: start over (vectors are cached)
        log.info("%s: the passages changed, rebuilding the index", collection)
        shutil.rmtree(AGENTS / collection)
    started = time.perf_counter()
    agent = open_agent(collection, embeddings=embeddings)
    try:
        for start in range(0, len(passages), batch):
            part = passages[start : start + batch]
            agent.add_documents([passage_document(p) for p in part], progress=False)
            log.info("%s: indexed %d/%d passages", collection, start + len(part), len(passages))
        chunks = agent.count()
    finally:
        agent.close()
    info = {
        "collection": collection,
        "passages": len(passages),
        "chunks": chunks,
        "digest": digest,
        "build_seconds": round(time.perf_counter() - started, 1),
    }
    marker.write_text(json.dumps(info, indent=2) + "\n")
    return info


# ------------------------------------------------------------------------------- metrics
def ndcg_recall(ranked: Sequence[str], relevant: Iterable[str], k: int = 10) -> tuple[float, float]:
    """nDCG@k and recall@k with binary relevance; ``ranked`` is de-duplicated first."""
    rel = set(relevant)
    seen: list[str] = []
    for pid in ranked:
        if pid not in seen:
            seen.append(pid)
        if len(seen) == k:
            break
    gains = [1.0 if pid in rel else 0.0 for pid in seen]
    dcg = sum(g / np.log2(i + 2) for i, g in enumerate(gains))
    idcg = sum(1.0 / np.log2(i + 2) for i in range(min(len(rel), k)))
    return (float(dcg / idcg) if idcg else 0.0), (sum(gains) / len(rel) if rel else 0.0)

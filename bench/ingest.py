"""Ingestion speed against the raw embedder, and re-ingestion of unchanged files.

    python -m bench.ingest                    # 10k chunks (~12 min on 2 cores)
    python -m bench.ingest --chunks 2000      # a quicker look

Input: Markdown files written from the evaluation corpora (one file per man page or
documentation file, its passages under its title), ingested with the library defaults
(chunk size, overlap, batch size, the packaged MiniLM model, the embedded engine).

The files are cut into blocks of about 2k chunks. For each block, in alternating order,
the benchmark times (a) ``MiniLMEmbeddings.embed_array`` on exactly the chunk texts the
pipeline will embed (what the model can do at best: one call, length-sorted batches) and
(b) ``agent.add_documents`` of the block's files (reading, chunking, embedding, BM25,
upserts). Interleaving keeps the machine's noise out of the ratio. Then the whole folder
is added again, unchanged, three times.
"""

from __future__ import annotations

import argparse
import logging
import shutil
import tempfile
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

from bench._common import median, peak_rss_mb, setup_logging, write_result

log = logging.getLogger("bench.ingest")


def write_files(folder: Path) -> list[Path]:
    """One Markdown file per original source of the manpages and pydocs passages."""
    from bench.datasets import load

    files: list[Path] = []
    for name in ("manpages", "pydocs"):
        corpus, _ = load(name)
        groups: dict[str, list[dict[str, Any]]] = defaultdict(list)
        for p in corpus:
            groups[p["source"]].append(p)
        for i, (_, rows) in enumerate(groups.items()):
            title = " ".join(str(rows[0].get("title") or "").split()) or f"{name} {i}"
            body = f"# {title}\n\n" + "\n\n".join(r["text"] for r in rows) + "\n"
            path = folder / name / f"{i:05d}.md"
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(body, encoding="utf-8")
            files.append(path)
    return files


def chunk_texts(files: list[Path]) -> list[list[str]]:
    """The texts the pipeline embeds for each file (library defaults)."""
    from retrievalagent.config import Settings
    from retrievalagent.ingest import expand_inputs
    from retrievalagent.ingest._chunking import chunk_sections

    cfg = Settings.load(env={})
    out = []
    for doc in expand_inputs(list(files)):
        chunks = chunk_sections(doc.sections(), cfg.chunk_size, cfg.chunk_overlap)
        out.append([c.indexed_text for c in chunks])
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--chunks", type=int, default=10_000)
    parser.add_argument("--block", type=int, default=2_000, help="chunks per timed block")
    parser.add_argument("--reingest", type=int, default=3)
    args = parser.parse_args(argv)
    setup_logging()
    started = time.perf_counter()

    from retrievalagent import init_agent
    from retrievalagent.embeddings import MiniLMEmbeddings

    work = Path(tempfile.mkdtemp(prefix="ra-bench-ingest-"))
    try:
        every = write_files(work / "files")
        texts = chunk_texts(every)
        files, per_file, total = [], [], 0
        for path, t in zip(every, texts, strict=True):
            if total >= args.chunks:
                break
            files.append(path)
            per_file.append(t)
            total += len(t)
        blocks: list[tuple[list[Path], list[str]]] = [([], [])]
        for path, t in zip(files, per_file, strict=True):
            if len(blocks[-1][1]) >= args.block:
                blocks.append(([], []))
            blocks[-1][0].append(path)
            blocks[-1][1].extend(t)
        log.info("%d files, %d chunks, %d blocks", len(files), total, len(blocks))

        raw = MiniLMEmbeddings().load()
        agent = init_agent("ingest-bench", data_dir=work / "data")
        agent.embeddings.load()
        raw.embed_array(["warm up the model", "and its session"])
        agent.embeddings.embed_documents(["warm up the model", "and its session"])

        rows = []
        for i, (block_files, block_texts) in enumerate(blocks):
            timings = {}
            for step in ("raw", "ingest") if i % 2 == 0 else ("ingest", "raw"):
                t = time.perf_counter()
                if step == "raw":
                    raw.embed_array(block_texts)
                else:
                    report = agent.add_documents(block_files, progress=False)
                    assert report.added_chunks == len(block_texts), (report, len(block_texts))
                timings[step] = time.perf_counter() - t
            rows.append(
                {
                    "chunks": len(block_texts),
                    "files": len(block_files),
                    "raw_s": round(timings["raw"], 3),
                    "ingest_s": round(timings["ingest"], 3),
                    "ratio": round(timings["raw"] / timings["ingest"], 4),
                }
            )
            log.info("block %d: %s", i, rows[-1])
        raw_s = sum(r["raw_s"] for r in rows)
        ingest_s = sum(r["ingest_s"] for r in rows)
        assert agent.count() == total

        again = []
        for _ in range(args.reingest):
            t = time.perf_counter()
            report = agent.add_documents(files, progress=False)
            again.append(time.perf_counter() - t)
            assert report.added_chunks == 0 and report.unchanged_sources == len(files), report
        assert agent.count() == total
        agent.close()

        results = {
            "chunks": total,
            "files": len(files),
            "blocks": rows,
            "raw_embed": {"seconds": round(raw_s, 2), "chunks_per_s": round(total / raw_s, 2)},
            "ingest": {"seconds": round(ingest_s, 2), "chunks_per_s": round(total / ingest_s, 2)},
            "reingest_seconds": [round(s, 3) for s in again],
            "peak_rss_mb": peak_rss_mb(),
        }
        ratio = raw_s / ingest_s
        speedup = ingest_s / median(again)
        results["targets"] = {
            "ingest_at_embedder_speed": {
                "ratio": round(ratio, 4),
                "median_block_ratio": round(median(r["ratio"] for r in rows), 4),
                "target": 0.8,
                "pass": ratio >= 0.8,
            },
            "reingest_speedup": {
                "first_s": round(ingest_s, 2),
                "reingest_median_s": round(median(again), 3),
                "speedup": round(speedup, 1),
                "target": 20,
                "pass": speedup >= 20,
            },
        }
    finally:
        shutil.rmtree(work, ignore_errors=True)
    write_result("ingest", results, started)
    print(results["targets"])
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

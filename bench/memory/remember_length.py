"""``remember`` throughput by conversation length.  ``python -m bench.memory.remember_length``

Issue 21 asks ``remember`` for at least 0.7 x the raw embedder's throughput on the texts it
stores, measured against one ``embed_documents`` call for all of them.
``conversation_scale`` measures that on conversations of 8 to 12 messages (about 6.8
exchanges each), one ``remember`` call per conversation. A call embeds only its own
conversation, so a short one spreads the model's fixed cost per ONNX run (as much as some
20 tokens of work) over a few texts. Here the same measurement is repeated at several
conversation lengths, to show where that cost stops mattering.

For each length (``--lengths``, messages per conversation), conversations of exactly that
many messages are recombined from the set's sentences as ``conversation_scale`` makes them.
They are remembered by an agent whose index of the user is loaded (the user already holds
``--seed-memories`` memories). ``conversation_scale._throughput`` then times ``--batches``
batches of about ``--batch-texts`` texts each. Per batch it times ``remember`` (one call per
conversation), ``remember_many`` of copies of the same conversations, and the raw MiniLM
``embed_documents`` of the same texts, both in one call and once per conversation. The order
of the four rotates per batch, and medians are reported.

Results: ``bench/results/memory_remember_length.json``.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import shutil
import sys
import tempfile
import time
from collections.abc import Sequence
from datetime import timedelta
from pathlib import Path
from typing import Any

from bench._common import setup_logging, write_result
from bench.memory.conversation_scale import (
    NOW,
    REMEMBER_TARGET,
    STORES,
    USER,
    Bench,
    _throughput,
    conversations,
    said_texts,
)
from bench.memory.write_latency import IngestMemo
from retrievalagent.embeddings import MiniLMEmbeddings

LENGTHS = (10, 20, 40, 80)


def _batches(length: int, batches: int, texts: int) -> list[list[dict[str, Any]]]:
    """``batches`` batches of conversations of ``length`` messages, about ``texts`` stored
    texts each, said a day before ``NOW`` (new memories)."""
    convs = conversations(batches * texts, prefix=f"len{length}-", messages=(length, length))
    for c in convs:
        c["at"] = (NOW - timedelta(days=1)).isoformat(timespec="seconds")
    out: list[list[dict[str, Any]]] = [[]]
    count = 0
    for c in convs:
        if count >= texts and len(out) < batches:
            out.append([])
            count = 0
        out[-1].append(c)
        count += len(said_texts(c))
    return out


def measure(backend: str, raw: MiniLMEmbeddings, args: argparse.Namespace) -> dict[str, Any]:
    data = Path(tempfile.mkdtemp(prefix=f"rememberlen-{backend}-"))
    bench = Bench(backend, IngestMemo(raw), data)
    rows: dict[str, Any] = {}
    with contextlib.ExitStack() as stack:
        stack.callback(shutil.rmtree, data, ignore_errors=True)
        stack.callback(bench.close)
        bench.open(stack)
        agent = bench.agent(f"{backend}-length")
        bench.remember_all(agent, conversations(args.seed_memories, prefix="seed-"))
        bench.recall(agent, "what did I say about the backups?")  # the index is loaded
        for length in args.lengths:
            batches = _batches(length, args.batches, args.batch_texts)
            result = _throughput(bench, agent, raw, batches)
            result["messages"] = length
            result["exchanges_per_conversation"] = round(
                sum(len(said_texts(c)) for b in batches for c in b) / sum(len(b) for b in batches),
                1,
            )
            result["target_met"] = result["ratio"] >= REMEMBER_TARGET
            rows[str(length)] = result
            print(
                f"{backend} {length} messages: remember {result['ratio']:.2f}x the raw "
                f"embedder in one call ({result['ratio_per_conversation']:.2f}x once per "
                f"conversation), remember_many {result['ratio_many']:.2f}x",
                flush=True,
            )
    return rows


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--backends", nargs="+", default=list(STORES), choices=list(STORES))
    parser.add_argument("--lengths", nargs="+", type=int, default=list(LENGTHS))
    parser.add_argument("--batches", type=int, default=5)
    parser.add_argument("--batch-texts", type=int, default=600)
    parser.add_argument("--seed-memories", type=int, default=1000)
    args = parser.parse_args(argv)
    setup_logging()
    started = time.perf_counter()
    raw = MiniLMEmbeddings().load()
    raw.embed_query("warm up")
    payload = {
        "command": "python -m bench.memory.remember_length "
        + " ".join(sys.argv[1:] if argv is None else argv),
        "user": USER,
        "protocol": "see bench/memory/remember_length.py docstring",
        "target": f">= {REMEMBER_TARGET} x raw embed_documents throughput (one call)",
        "seed_memories": args.seed_memories,
        "backends": {name: measure(name, raw, args) for name in args.backends},
    }
    write_result("memory_remember_length", payload, started)
    return payload


if __name__ == "__main__":
    print(json.dumps(main()["backends"], indent=2))

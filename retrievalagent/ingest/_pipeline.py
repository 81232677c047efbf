"""Idempotent ingestion: chunk, embed in batches, upsert, then retire replaced chunks.

A source whose content hash is already indexed (and nothing else is stored for it) is
skipped. A changed source gets its new chunks written *before* its old ones are deleted,
so an interrupted ingest can leave a duplicate but never loses a document; the next run
sees the mixed state and finishes the replacement.
"""

from __future__ import annotations

import sys
import time
import uuid
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from langchain_core.embeddings import Embeddings

from retrievalagent.ingest._chunking import Chunk, chunk_sections
from retrievalagent.ingest._loaders import SourceDoc
from retrievalagent.retrieval._index import VectorIndex
from retrievalagent.retrieval._lexical import LexicalEncoder
from retrievalagent.retrieval._types import Condition

__all__ = ["IngestReport", "Ingestor"]

_NAMESPACE = uuid.UUID("6f3b1c52-9a0e-4f7e-9d55-1f6a0c2b7e41")
_WINDOW = 512  # chunks embedded and upserted together


@dataclass
class IngestReport:
    """What one ``add_documents`` call did."""

    sources: int = 0
    added_chunks: int = 0
    unchanged_sources: int = 0
    new_sources: int = 0
    replaced_sources: int = 0
    removed_chunks: int = 0
    empty_sources: list[str] = field(default_factory=list)
    seconds: float = 0.0

    def __str__(self) -> str:
        return (
            f"{self.sources} source(s): {self.new_sources} new, {self.replaced_sources} changed, "
            f"{self.unchanged_sources} unchanged; {self.added_chunks} chunk(s) added, "
            f"{self.removed_chunks} removed in {self.seconds:.1f}s"
        )


def chunk_id(source: str, doc_hash: str, position: int) -> str:
    return str(uuid.uuid5(_NAMESPACE, f"{source}\x00{doc_hash}\x00{position}"))


@dataclass
class _Pending:
    id: str
    chunk: Chunk
    doc: SourceDoc
    doc_hash: str


class Ingestor:
    """Writes source documents into ``index``."""

    def __init__(
        self,
        index: VectorIndex,
        embeddings: Embeddings,
        encoder: LexicalEncoder,
        chunk_size: int,
        chunk_overlap: int,
    ) -> None:
        self.index = index
        self.embeddings = embeddings
        self.encoder = encoder
        self.chunk_size = chunk_size
        self.chunk_overlap = chunk_overlap

    @property
    def chunking(self) -> str:
        return f"v1:{self.chunk_size}:{self.chunk_overlap}"

    def _plan(
        self, docs: Sequence[SourceDoc], report: IngestReport
    ) -> tuple[list[_Pending], dict[str, str]]:
        pending: list[_Pending] = []
        replace: dict[str, str] = {}  # source -> hash to keep
        for doc in docs:
            doc_hash = doc.content_hash(self.chunking)
            stored = self.index.source_hashes(doc.source)
            if stored and set(stored) == {doc_hash}:
                report.unchanged_sources += 1
                continue
            chunks = chunk_sections(doc.sections(), self.chunk_size, self.chunk_overlap)
            if not chunks:
                report.empty_sources.append(doc.source)
            if stored:
                report.replaced_sources += 1
                replace[doc.source] = doc_hash
            else:
                report.new_sources += 1
            present = stored.get(doc_hash, 0) == len(chunks)
            if present:  # a finished write whose old chunks were never removed
                continue
            pending.extend(
                _Pending(chunk_id(doc.source, doc_hash, c.position), c, doc, doc_hash)
                for c in chunks
            )
        return pending, replace

    def _payload(self, item: _Pending) -> dict[str, Any]:
        payload: dict[str, Any] = {
            "text": item.chunk.text,
            "source": item.doc.source,
            "position": item.chunk.position,
            "headings": item.chunk.headings,
            "doc_hash": item.doc_hash,
            "metadata": item.doc.metadata,
        }
        if item.doc.title:
            payload["title"] = item.doc.title
        return payload

    def _windows(self, pending: list[_Pending]) -> Iterator[list[_Pending]]:
        for start in range(0, len(pending), _WINDOW):
            yield pending[start : start + _WINDOW]

    def ingest(self, docs: Sequence[SourceDoc], progress: bool | None = None) -> IngestReport:
        started = time.perf_counter()
        report = IngestReport(sources=len(docs))
        pending, replace = self._plan(docs, report)
        show = sys.stderr.isatty() if progress is None else progress
        bar = None
        if show and pending:
            from tqdm import tqdm

            bar = tqdm(total=len(pending), unit="chunk", desc="Indexing", leave=False)
        try:
            for window in self._windows(pending):
                texts = [p.chunk.indexed_text for p in window]
                dense = self.embeddings.embed_documents(texts)
                sparse = [self.encoder.encode_document(t) for t in texts]
                self.index.upsert(
                    [p.id for p in window], dense, sparse, [self._payload(p) for p in window]
                )
                report.added_chunks += len(window)
                if bar is not None:
                    bar.update(len(window))
        finally:
            if bar is not None:
                bar.close()
        for source, keep in replace.items():
            report.removed_chunks += self.index.delete(
                [Condition("source", "match", source)], keep_doc_hash=keep
            )
        optimize = getattr(self.index, "optimize", None)  # the embedded index compacts
        if optimize is not None and (report.added_chunks or report.removed_chunks):
            optimize()
        report.seconds = time.perf_counter() - started
        return report

"""Crash-consistent ingestion: chunk, embed in batches, stage, then commit per source.

A source's new chunks are written *staged* (hidden from every search, count and listing)
and made visible by one commit once all of them are in; the commit deletes the source's
other versions first. Killed at any moment, a source is therefore fully old, fully new or
absent -- never partial or doubled -- and the next run sees what is missing: a visible
version is always complete, so "unchanged" is just "the visible version has this hash",
and staged chunks left by a cut run are reused instead of embedded again. (The chunk
count is checked too, which repairs files left partial by versions before staging.)

Re-ingesting a folder mirrors it: sources under that folder that are no longer in it are
removed after the rest is committed (``keep_missing=True`` keeps them).
"""

from __future__ import annotations

import sys
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from langchain_core.embeddings import Embeddings

from retrievalagent.errors import EmbeddingModelError, VectorIndexError
from retrievalagent.index import STAGED, STAGED_MARK, Condition, LexicalEncoder, VectorIndex
from retrievalagent.ingest._chunking import Chunk, chunk_sections
from retrievalagent.ingest._loaders import SourceDoc

__all__ = ["IngestInterrupted", "IngestReport", "Ingestor"]

_NAMESPACE = uuid.UUID("6f3b1c52-9a0e-4f7e-9d55-1f6a0c2b7e41")


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
    #: Sources removed because their file is no longer in a re-ingested folder.
    removed_sources: list[str] = field(default_factory=list)
    #: Sources that are as the call wants them: their new version committed, or
    #: unchanged, or emptied (all of them when the call returns).
    finished_sources: list[str] = field(default_factory=list)
    seconds: float = 0.0

    def __str__(self) -> str:
        gone = f", {len(self.removed_sources)} removed" if self.removed_sources else ""
        empty = f", {len(self.empty_sources)} empty" if self.empty_sources else ""
        return (
            f"{self.sources} source(s): {self.new_sources} new, {self.replaced_sources} changed, "
            f"{self.unchanged_sources} unchanged{empty}{gone}; {self.added_chunks} chunk(s) "
            f"added, {self.removed_chunks} removed in {self.seconds:.1f}s"
        )


class IngestInterrupted(KeyboardInterrupt):
    """Ctrl-C during an ingest; ``report`` says which sources were finished.

    Every other source is as it was before the run (or absent, if it was being replaced
    when the run was cut); running the same ingest again finishes the rest.
    """

    def __init__(self, report: IngestReport) -> None:
        done = f"{len(report.finished_sources)} of {report.sources} source(s) finished"
        if not report.sources:  # cut while the inputs were read: nothing was written
            done = "no source finished (the inputs were still being read)"
        super().__init__(f"interrupted: {done}; run the same ingest again to finish the rest")
        self.report = report


def chunk_id(source: str, doc_hash: str, position: int) -> str:
    return str(uuid.uuid5(_NAMESPACE, f"{source}\x00{doc_hash}\x00{position}"))


@dataclass
class _Pending:
    id: str
    chunk: Chunk
    doc: SourceDoc
    doc_hash: str


@dataclass
class _Plan:
    pending: list[_Pending] = field(default_factory=list)  # chunks to embed and stage
    waiting: dict[str, int] = field(default_factory=dict)  # source -> chunks still to write
    hashes: dict[str, str] = field(default_factory=dict)  # source -> version to commit


class Ingestor:
    """Writes source documents into ``index``."""

    def __init__(
        self,
        index: VectorIndex,
        embeddings: Embeddings,
        encoder: LexicalEncoder,
        chunk_size: int,
        chunk_overlap: int,
        window: int = 512,
        dimension: int | None = None,
    ) -> None:
        self.window = window  # chunks embedded and upserted together
        self.dimension = dimension  # of the index's vectors, when known
        self.index = index
        self.embeddings = embeddings
        self.encoder = encoder
        self.chunk_size = chunk_size
        self.chunk_overlap = chunk_overlap

    @property
    def chunking(self) -> str:
        return f"v1:{self.chunk_size}:{self.chunk_overlap}"

    def _plan(self, docs: Sequence[SourceDoc], report: IngestReport) -> _Plan:
        plan = _Plan()
        for doc in docs:
            doc_hash = doc.content_hash(self.chunking)
            visible = self.index.source_hashes(doc.source)
            staged = self.index.source_hashes(doc.source, staged=True)
            chunks = chunk_sections(doc.sections(), self.chunk_size, self.chunk_overlap)
            # A committed version is complete, but an index written before commits existed
            # may hold part of a file under its current hash: the count tells them apart.
            if visible.get(doc_hash) == len(chunks) and chunks:
                report.unchanged_sources += 1
                if len(visible) > 1 or staged:  # leftovers of a cut run: drop them
                    plan.hashes[doc.source] = doc_hash
                    plan.waiting[doc.source] = 0
                else:
                    report.finished_sources.append(doc.source)
                continue
            if not chunks:  # nothing to index: an empty file replaces what was there
                report.empty_sources.append(doc.source)
                if visible or staged:
                    report.removed_chunks += self.index.delete(
                        [Condition("source", "match", doc.source)]
                    )
                report.finished_sources.append(doc.source)
                continue
            if visible:
                report.replaced_sources += 1
            else:
                report.new_sources += 1
            items = [
                _Pending(chunk_id(doc.source, doc_hash, c.position), c, doc, doc_hash)
                for c in chunks
            ]
            if staged.get(doc_hash):  # a cut run staged some of them: write only the rest
                done = self.index.retrieve([p.id for p in items])
                items = [p for p in items if p.id not in done]
            plan.pending.extend(items)
            plan.hashes[doc.source] = doc_hash
            plan.waiting[doc.source] = len(items)
        return plan

    def _payload(self, item: _Pending) -> dict[str, Any]:
        payload: dict[str, Any] = {
            "text": item.chunk.text,
            "source": item.doc.source,
            "position": item.chunk.position,
            "headings": item.chunk.headings,
            "doc_hash": item.doc_hash,
            "metadata": item.doc.metadata,
            STAGED: STAGED_MARK,
        }
        if item.doc.title:
            payload["title"] = item.doc.title
        return payload

    def _windows(self, pending: list[_Pending]) -> Iterator[list[_Pending]]:
        for start in range(0, len(pending), self.window):
            yield pending[start : start + self.window]

    def _commit(self, source: str, plan: _Plan, report: IngestReport) -> None:
        report.removed_chunks += self.index.commit(source, plan.hashes[source])
        report.finished_sources.append(source)

    def ingest(
        self,
        docs: Sequence[SourceDoc],
        progress: bool | None = None,
        mirror: Sequence[str] = (),
        unread: Sequence[str] = (),
    ) -> IngestReport:
        """Index ``docs``; ``mirror`` lists folder prefixes (``/abs/dir/``) whose sources
        not among ``docs`` are removed afterwards, except the ``unread`` ones (files there
        that could not be read now)."""
        started = time.perf_counter()
        report = IngestReport(sources=len(docs))
        try:
            self._run(docs, report, progress, mirror, unread)
        except KeyboardInterrupt:
            report.seconds = time.perf_counter() - started
            raise IngestInterrupted(report) from None
        report.seconds = time.perf_counter() - started
        return report

    def _run(
        self,
        docs: Sequence[SourceDoc],
        report: IngestReport,
        progress: bool | None,
        mirror: Sequence[str],
        unread: Sequence[str],
    ) -> None:
        plan = self._plan(docs, report)
        for source, left in list(plan.waiting.items()):
            if not left:
                self._commit(source, plan, report)
        show = sys.stderr.isatty() if progress is None else progress
        with _progress_bar(len(plan.pending) if show else 0) as advance:
            for window in self._windows(plan.pending):
                self._write(window, plan, report)
                advance(len(window))
        if mirror:
            self._prune(docs, mirror, unread, report)
        optimize = getattr(self.index, "optimize", None)  # the embedded index compacts
        if optimize is not None and (report.added_chunks or report.removed_chunks):
            optimize()

    def _check_vectors(self, dense: Sequence[Sequence[float]], wanted: int) -> None:
        """Refuse vectors the index cannot hold before anything is written (the engine's
        own complaint is a bare exception deep inside the upsert)."""
        sizes = {len(v) for v in dense}
        if len(dense) != wanted or len(sizes) > 1:
            raise EmbeddingModelError(
                f"the embeddings returned {len(dense)} vector(s) of sizes {sorted(sizes)} "
                f"for {wanted} chunk(s)"
            )
        if self.dimension is not None and sizes and sizes != {self.dimension}:
            raise VectorIndexError(
                f"the embeddings give {sizes.pop()}-d vectors but the index holds "
                f"{self.dimension}-d ones; use the embeddings it was built with or a new "
                "collection"
            )

    def _write(self, window: list[_Pending], plan: _Plan, report: IngestReport) -> None:
        """Embed and stage one window of chunks; commit each source whose last chunk it holds."""
        texts = [p.chunk.indexed_text for p in window]
        dense = self.embeddings.embed_documents(texts)
        self._check_vectors(dense, len(texts))
        sparse = [self.encoder.encode_document(t) for t in texts]
        self.index.upsert([p.id for p in window], dense, sparse, [self._payload(p) for p in window])
        report.added_chunks += len(window)
        for item in window:
            plan.waiting[item.doc.source] -= 1
            if plan.waiting[item.doc.source] == 0:
                self._commit(item.doc.source, plan, report)

    def _prune(
        self,
        docs: Sequence[SourceDoc],
        mirror: Sequence[str],
        unread: Sequence[str],
        report: IngestReport,
    ) -> None:
        present = {doc.source for doc in docs} | set(unread)
        visible = self.index.sources()
        for source in sorted({*visible, *self.index.sources(staged=True)}):
            if source not in present and source.startswith(tuple(mirror)):
                report.removed_chunks += self.index.delete([Condition("source", "match", source)])
                if source in visible:
                    report.removed_sources.append(source)


@contextmanager
def _progress_bar(total: int) -> Iterator[Callable[[int], object]]:
    """A chunk progress bar on stderr while the block runs (none for ``total`` 0); yields
    the function that advances it."""
    if not total:
        yield lambda n: None
        return
    from tqdm import tqdm

    bar = tqdm(total=total, unit="chunk", desc="Indexing", leave=False)
    try:
        yield bar.update
    finally:
        bar.close()

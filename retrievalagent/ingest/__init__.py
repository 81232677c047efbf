"""Ingestion: reading inputs, heading-aware chunking, and crash-consistent indexing.

``RetrievalAgent.add_documents`` runs an ``Ingestor``; the readers and the chunker are also
what evaluation derives test sets from.
"""

from retrievalagent.ingest._chunking import Chunk, Section, chunk_sections, split_sections
from retrievalagent.ingest._loaders import (
    SourceDoc,
    check_paths_exist,
    expand_inputs,
    read_inputs,
    source_key,
)
from retrievalagent.ingest._pipeline import IngestInterrupted, Ingestor, IngestReport

__all__ = [
    "Chunk",
    "IngestInterrupted",
    "IngestReport",
    "Ingestor",
    "Section",
    "SourceDoc",
    "check_paths_exist",
    "chunk_sections",
    "expand_inputs",
    "read_inputs",
    "source_key",
    "split_sections",
]

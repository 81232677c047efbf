"""Ingestion: reading inputs, heading-aware chunking, and crash-consistent indexing."""

from retrievalagent.ingest._chunking import Chunk, Section, chunk_sections, split_sections
from retrievalagent.ingest._loaders import (
    SUFFIXES,
    SourceDoc,
    check_paths_exist,
    expand_inputs,
    read_inputs,
    source_key,
)
from retrievalagent.ingest._pipeline import IngestInterrupted, Ingestor, IngestReport

__all__ = [
    "SUFFIXES",
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

"""Errors the library raises on purpose, so callers can catch them by kind."""

from __future__ import annotations

__all__ = [
    "ConfigError",
    "EmbeddingModelError",
    "IndexLockedError",
    "IngestError",
    "RetrievalAgentError",
    "VectorIndexError",
]


class RetrievalAgentError(Exception):
    """Base of every error raised by retrievalagent."""


class ConfigError(RetrievalAgentError, ValueError):
    """An argument or environment variable has a value the agent cannot use."""


class IngestError(RetrievalAgentError, ValueError):
    """An input given to ``add_documents`` cannot be read."""


class EmbeddingModelError(RetrievalAgentError, RuntimeError):
    """The packaged embedding model is missing, damaged or inconsistent with an index."""


class VectorIndexError(RetrievalAgentError, RuntimeError):
    """The vector index is unusable (wrong dimension, corrupt, unreachable)."""


class IndexLockedError(VectorIndexError):
    """The embedded index is open in another process."""

"""Errors the library raises on purpose, so callers can catch them by kind.

Two kinds, as in pydantic-ai's ``UserError`` / ``AgentRunError``: a caller's mistake
(:class:`ConfigError`, :class:`IngestError`: fix the call or the input; both are also
``ValueError``) and a run that failed (:class:`ModelError`, :class:`VectorIndexError`,
:class:`EmbeddingModelError`: a service or a file let the call down; ``RuntimeError``).
Each message says what happened in one line; when the library cut the chained traceback
that would repeat it, the exception it came from is kept as ``original``.
"""

from __future__ import annotations

__all__ = [
    "ConfigError",
    "EmbeddingModelError",
    "IndexLockedError",
    "IngestError",
    "ModelError",
    "RetrievalAgentError",
    "VectorIndexError",
]


class RetrievalAgentError(Exception):
    """Base of every error raised by retrievalagent.

    ``original`` is the exception this one reports (for debugging), when it was raised
    ``from None`` so that the message alone is shown.
    """

    def __init__(self, *args: object, original: BaseException | None = None) -> None:
        super().__init__(*args)
        self.original = original


class ConfigError(RetrievalAgentError, ValueError):
    """An argument or environment variable has a value the agent cannot use."""


class IngestError(RetrievalAgentError, ValueError):
    """An input given to ``add_documents`` cannot be read."""


class EmbeddingModelError(RetrievalAgentError, RuntimeError):
    """The packaged embedding model is missing, damaged or inconsistent with an index."""


class ModelError(RetrievalAgentError, RuntimeError):
    """A chat-model call failed: a transient error (rate limit, timeout, connection, 5xx)
    that outlasted the retries, or an error retrying cannot fix (bad key, bad request).

    ``model`` names the model, ``role`` the call (answer, grade, rewrite), ``attempts`` how
    many were made; the original exception is ``original`` (and ``__cause__``).
    """

    def __init__(
        self,
        message: str,
        *,
        model: str,
        role: str,
        attempts: int,
        original: BaseException | None = None,
    ) -> None:
        super().__init__(message, original=original)
        self.model = model
        self.role = role
        self.attempts = attempts


class VectorIndexError(RetrievalAgentError, RuntimeError):
    """The vector index is unusable (wrong dimension, corrupt, unreachable)."""


class IndexLockedError(VectorIndexError):
    """The embedded index is open in another process."""

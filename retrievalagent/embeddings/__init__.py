"""Embedding models: the packaged offline default, and resolution of user choices.

Anything implementing LangChain's ``Embeddings`` can be passed to ``init_agent``; a
``"provider:model"`` string goes through LangChain's ``init_embeddings``.
"""

from __future__ import annotations

from typing import Any

from langchain_core.embeddings import Embeddings

from retrievalagent.embeddings._minilm import MiniLMEmbeddings
from retrievalagent.embeddings._spans import (
    Span,
    SpanEmbeddings,
    SpanVectors,
    aembed_with_spans,
    embed_with_spans,
)
from retrievalagent.errors import ConfigError

__all__ = [
    "MiniLMEmbeddings",
    "Span",
    "SpanEmbeddings",
    "SpanVectors",
    "aembed_with_spans",
    "embed_with_spans",
    "resolve_embeddings",
]


def resolve_embeddings(spec: Embeddings | str | None, *, batch_size: int = 8) -> Embeddings:
    """An ``Embeddings`` from an instance, a ``"provider:model"`` string, or ``None``."""
    if spec is None:
        return MiniLMEmbeddings(batch_size=batch_size)
    if isinstance(spec, Embeddings):
        return spec
    if isinstance(spec, str):
        if spec in ("minilm", "default", MiniLMEmbeddings.model_name):
            return MiniLMEmbeddings(batch_size=batch_size)
        if ":" not in spec:
            raise ConfigError(
                f"embeddings={spec!r} is invalid: expected an Embeddings instance, None, "
                "or a 'provider:model' string such as 'openai:text-embedding-3-small'"
            )
        from langchain.embeddings import init_embeddings

        kwargs: dict[str, Any] = {}
        if spec.split(":", 1)[0] in ("openai", "azure_openai"):
            # Chunks are far below the model's context, and the length check downloads a
            # tokenizer file at first use: skip it so OpenAI-compatible local servers work offline.
            kwargs["check_embedding_ctx_length"] = False
        try:
            return init_embeddings(spec, **kwargs)
        except Exception as exc:  # providers raise many kinds (missing key, bad name)
            raise ConfigError(
                f"embeddings={spec!r} could not be created: {exc}", original=exc
            ) from None
    raise ConfigError(
        f"embeddings must be an Embeddings instance, a 'provider:model' string or None, "
        f"not {type(spec).__name__}"
    )

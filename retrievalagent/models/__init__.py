"""Chat models: resolving the user's choice, and the answer / grade / rewrite roles.

``model=None`` selects the offline implementations (extractive answers, evidence grades);
anything else becomes a LangChain ``BaseChatModel``.
"""

from __future__ import annotations

import contextlib
from typing import Any

from langchain_core.language_models import BaseChatModel

from retrievalagent.errors import ConfigError
from retrievalagent.models._base import Answer, Answerer, AnswerRequest, Grader, Rewriter
from retrievalagent.models._facts import LLMFactExtractor
from retrievalagent.models._llm import (
    LLMAnswerer,
    LLMGrader,
    LLMInlineAnswerer,
    LLMRewriter,
    model_name,
)
from retrievalagent.models._offline import (
    EvidenceGrader,
    ExtractiveAnswerer,
    FeedbackRewriter,
)
from retrievalagent.models._prompts import SEARCH_FACTS_PREFIX, dated_line, memory_context
from retrievalagent.models._rerank import resolve_reranker
from retrievalagent.models._retry import RetryPolicy, is_transient
from retrievalagent.models._usage import Meter, metering, record, turn_usage

__all__ = [
    "SEARCH_FACTS_PREFIX",
    "Answer",
    "AnswerRequest",
    "Answerer",
    "EvidenceGrader",
    "ExtractiveAnswerer",
    "FeedbackRewriter",
    "Grader",
    "LLMAnswerer",
    "LLMFactExtractor",
    "LLMGrader",
    "LLMInlineAnswerer",
    "LLMRewriter",
    "Meter",
    "RetryPolicy",
    "Rewriter",
    "dated_line",
    "is_transient",
    "memory_context",
    "metering",
    "model_name",
    "record",
    "resolve_model",
    "resolve_reranker",
    "turn_usage",
]


def resolve_model(spec: BaseChatModel | str | None) -> BaseChatModel | None:
    """A chat model from an instance or an ``init_chat_model`` string; ``None`` = offline."""
    if spec is None or isinstance(spec, BaseChatModel):
        return spec
    if isinstance(spec, str):
        if spec.strip().lower() in ("", "none", "offline"):
            return None
        from langchain.chat_models import init_chat_model

        try:
            model = init_chat_model(spec)
            fields = type(model).model_fields
            # The agent's RetryPolicy (RAG_MODEL_RETRIES) is the one retry policy: the
            # client's own retries would multiply it. Streamed answers report their token
            # usage too (OpenAI-compatible clients leave that off for other base URLs).
            retries: dict[str, Any] = {"max_retries": 0} if "max_retries" in fields else {}
            usage: dict[str, Any] = {"stream_usage": True} if "stream_usage" in fields else {}
            for options in ({**retries, **usage}, retries):
                if options:
                    with contextlib.suppress(Exception):
                        chat: BaseChatModel = init_chat_model(spec, **options)
                        return chat
            return model
        except ImportError as exc:
            raise ConfigError(
                f"model={spec!r} needs a provider package that is not installed: {exc}",
                original=exc,
            ) from None
        except Exception as exc:  # providers raise many kinds (missing key, bad name)
            raise ConfigError(f"model={spec!r} could not be created: {exc}", original=exc) from None
    raise ConfigError(
        f"model must be a 'provider:model' string, a BaseChatModel or None, "
        f"not {type(spec).__name__}"
    )

"""Chat models: resolving the user's choice, and the answer / grade / rewrite roles.

``model=None`` selects the offline implementations (extractive answers, evidence grades);
anything else becomes a LangChain ``BaseChatModel``.
"""

from __future__ import annotations

import contextlib

from langchain_core.language_models import BaseChatModel

from retrievalagent.errors import ConfigError
from retrievalagent.models._base import Answer, Answerer, AnswerRequest, Grader, Rewriter
from retrievalagent.models._llm import LLMAnswerer, LLMGrader, LLMRewriter, model_name
from retrievalagent.models._offline import (
    GENERATED_BY as OFFLINE_GENERATED_BY,
)
from retrievalagent.models._offline import (
    EvidenceGrader,
    ExtractiveAnswerer,
    FeedbackRewriter,
    alias_fact,
)
from retrievalagent.models._prompts import PREFERENCES_PREFIX, SEARCH_HINTS_PREFIX
from retrievalagent.models._retry import RetryPolicy, is_transient

__all__ = [
    "OFFLINE_GENERATED_BY",
    "PREFERENCES_PREFIX",
    "SEARCH_HINTS_PREFIX",
    "Answer",
    "AnswerRequest",
    "Answerer",
    "EvidenceGrader",
    "ExtractiveAnswerer",
    "FeedbackRewriter",
    "Grader",
    "LLMAnswerer",
    "LLMGrader",
    "LLMRewriter",
    "RetryPolicy",
    "Rewriter",
    "alias_fact",
    "is_transient",
    "model_name",
    "resolve_model",
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
            if "max_retries" in type(model).model_fields:
                # The agent's RetryPolicy (RAG_MODEL_RETRIES) is the one retry policy: the
                # client's own retries would multiply it.
                with contextlib.suppress(Exception):
                    model = init_chat_model(spec, max_retries=0)
            return model
        except ImportError as exc:
            raise ConfigError(
                f"model={spec!r} needs a provider package that is not installed: {exc}"
            ) from exc
        except Exception as exc:  # providers raise many kinds (missing key, bad name)
            raise ConfigError(f"model={spec!r} could not be created: {exc}") from exc
    raise ConfigError(
        f"model must be a 'provider:model' string, a BaseChatModel or None, "
        f"not {type(spec).__name__}"
    )

"""A LangChain ``BaseRetriever`` over the agent's hybrid search, for use in other chains.

A returned ``Document`` keeps the caller's metadata as it was ingested: a user's own
``id``, ``score`` or ``headings`` key comes back untouched. The chunk id is
``Document.id``, and everything the library adds (score, ranks, headings, position,
source) sits under one reserved key, :data:`RESERVED_KEY` (``"retrievalagent"``). The
one addition at the top level follows LangChain's document loaders: a passage read from a
file gets ``metadata["source"]`` (its path) when the caller's metadata has no ``source``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, TypedDict

from langchain_core.callbacks import (
    AsyncCallbackManagerForRetrieverRun,
    CallbackManagerForRetrieverRun,
)
from langchain_core.documents import Document
from langchain_core.retrievers import BaseRetriever
from pydantic import ConfigDict, Field, model_validator

from retrievalagent._inputs import MAX_TOP_K, check_top_k, clean_question
from retrievalagent.retrieval._fusion import FusedHit
from retrievalagent.retrieval._searcher import HybridSearcher, to_source

if TYPE_CHECKING:
    from typing_extensions import Unpack

__all__ = ["RESERVED_KEY", "HybridRetriever", "to_document"]

#: The metadata key under which a returned ``Document`` carries the library's fields.
RESERVED_KEY = "retrievalagent"
#: Sources the library named itself (a ``Document`` or a string without a ``source``).
_GENERATED_SOURCES = ("document:", "text:")


class CallArgs(TypedDict, total=False):
    """What one ``invoke`` may set again: ``k`` (or ``top_k``) and ``filter``."""

    k: int | None
    top_k: int | None
    filter: Mapping[str, Any] | None


def _default_max_question_chars() -> int:
    """The agent's own default (``Settings.max_question_chars``), declared once there."""
    from retrievalagent.config import Settings

    return Settings().max_question_chars


def to_document(hit: FusedHit | Mapping[str, Any]) -> Document:
    """A passage (a fused hit or a ``to_source`` dict) as a LangChain ``Document``."""
    source = to_source(hit) if isinstance(hit, FusedHit) else dict(hit)
    metadata = dict(source.get("metadata") or {})
    where = str(source.get("source") or "")
    if "source" not in metadata and where and not where.startswith(_GENERATED_SOURCES):
        metadata["source"] = where  # a file: its path, as LangChain's loaders put it
    fields = {
        "chunk_id": source.get("id"),
        "source": where,
        "score": source.get("score"),
        "position": source.get("position"),
        "headings": list(source.get("headings") or []),
        "dense_rank": source.get("dense_rank"),
        "lexical_rank": source.get("lexical_rank"),
    }
    for key in ("fused_rank", "rerank_score", "also_in"):
        if key in source:
            fields[key] = source[key]
    metadata[RESERVED_KEY] = fields
    return Document(
        page_content=str(source.get("text") or ""), metadata=metadata, id=source.get("id")
    )


class HybridRetriever(BaseRetriever):
    """Fused dense + BM25 search as a LangChain retriever.

    ``k`` (or ``top_k``) and ``filter`` are set at construction and may be given again
    per call: ``retriever.invoke(question, k=1, filter={"lang": "en"})``.
    """

    model_config = ConfigDict(arbitrary_types_allowed=True)

    searcher: HybridSearcher
    top_k: int = Field(default=5, ge=1, le=MAX_TOP_K)
    filter: dict[str, Any] | None = None
    #: longer queries are refused, as by the agent's own search (``max_question_chars``)
    max_query_chars: int = Field(default_factory=lambda: _default_max_question_chars(), ge=1)

    @model_validator(mode="before")
    @classmethod
    def _k_is_top_k(cls, data: Any) -> Any:
        if isinstance(data, Mapping) and "k" in data:
            data = dict(data)
            k = data.pop("k")
            if data.get("top_k") is not None and data["top_k"] != k:
                raise ValueError(f"give k or top_k, not both (k={k!r}, top_k={data['top_k']!r})")
            data["top_k"] = k
        return data

    @property
    def k(self) -> int:
        """The number of documents a call returns (the same as ``top_k``)."""
        return self.top_k

    def _call_args(
        self,
        k: int | None = None,
        top_k: int | None = None,
        filter: Mapping[str, Any] | None = None,
    ) -> tuple[int, dict[str, Any] | None]:
        """The result count and filter of one call (``CallArgs``; an unknown one is a
        ``TypeError``), else those given at construction."""
        if k is not None and top_k is not None and k != top_k:
            raise ValueError(f"give k or top_k, not both (k={k!r}, top_k={top_k!r})")
        if k is not None:
            count = check_top_k(k, "k")
        elif top_k is not None:
            count = check_top_k(top_k, "top_k")
        else:
            count = self.top_k
        return count, dict(filter) if filter is not None else self.filter

    def _get_relevant_documents(
        self, query: str, *, run_manager: CallbackManagerForRetrieverRun, **call: Unpack[CallArgs]
    ) -> list[Document]:
        count, conditions = self._call_args(**call)
        query = clean_question(query, self.max_query_chars)  # as rag.search: no empty query
        hits, _ = self.searcher.search(query, count, conditions)
        return [to_document(h) for h in hits]

    async def _aget_relevant_documents(
        self,
        query: str,
        *,
        run_manager: AsyncCallbackManagerForRetrieverRun,
        **call: Unpack[CallArgs],
    ) -> list[Document]:
        count, conditions = self._call_args(**call)
        query = clean_question(query, self.max_query_chars)
        hits = await self.searcher.asearch(query, count, conditions)
        return [to_document(h) for h in hits]

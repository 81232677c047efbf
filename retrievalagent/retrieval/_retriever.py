"""A LangChain ``BaseRetriever`` over the agent's hybrid search, for use in other chains."""

from __future__ import annotations

from typing import Any

from langchain_core.callbacks import (
    AsyncCallbackManagerForRetrieverRun,
    CallbackManagerForRetrieverRun,
)
from langchain_core.documents import Document
from langchain_core.retrievers import BaseRetriever
from pydantic import ConfigDict

from retrievalagent.retrieval._fusion import FusedHit
from retrievalagent.retrieval._searcher import HybridSearcher, to_source

__all__ = ["HybridRetriever", "to_document"]


def to_document(hit: FusedHit) -> Document:
    """A passage as a LangChain ``Document``: its text, with the rest in the metadata."""
    source = to_source(hit)
    text = source.pop("text")
    metadata = {**source.pop("metadata"), **source}
    return Document(page_content=text, metadata=metadata, id=hit.id)


class HybridRetriever(BaseRetriever):
    """Fused dense + BM25 search; each ``Document`` carries id, source, score and ranks."""

    model_config = ConfigDict(arbitrary_types_allowed=True)

    searcher: HybridSearcher
    top_k: int = 5
    filter: dict[str, Any] | None = None

    def _get_relevant_documents(
        self, query: str, *, run_manager: CallbackManagerForRetrieverRun
    ) -> list[Document]:
        hits, _ = self.searcher.search(query, self.top_k, self.filter)
        return [to_document(h) for h in hits]

    async def _aget_relevant_documents(
        self, query: str, *, run_manager: AsyncCallbackManagerForRetrieverRun
    ) -> list[Document]:
        hits = await self.searcher.asearch(query, self.top_k, self.filter)
        return [to_document(h) for h in hits]

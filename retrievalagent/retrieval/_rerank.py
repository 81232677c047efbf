"""Reranking: a second opinion on the order of the first fused passages.

A ``Reranker`` reorders what fusion returned. This module has the Protocol and the one for
any LangChain ``BaseDocumentCompressor`` (FlashRank, a HuggingFace cross-encoder, Cohere,
...); the listwise rerank by the agent's own chat model is an LLM role and lives with the
others (``models``). The searcher fuses the two lists as usual, hands the first
``rerank_k`` passages to the reranker and keeps the first ``top_k`` of its order. Passages a
compressor leaves out of its answer keep their fused order after the ones it ranked, so
``top_k`` is still filled. A reranker that fails leaves the fused order in place; the
trace's ``rerank`` event then has an ``error``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

from langchain_core.documents import Document

from retrievalagent.retrieval._fusion import FusedHit

__all__ = ["CompressorReranker", "Reranker", "complete_ranking"]


class Reranker(Protocol):
    """Reorders passages for a query; returns them (or a subset) best first."""

    name: str

    def rerank(self, query: str, hits: Sequence[FusedHit]) -> list[FusedHit]: ...


def _document(hit: FusedHit) -> Document:
    payload = hit.payload
    metadata = {**dict(payload.get("metadata") or {}), "_rag_chunk_id": hit.id}
    return Document(page_content=str(payload.get("text", "")), metadata=metadata, id=hit.id)


def complete_ranking(ranked: list[FusedHit], hits: Sequence[FusedHit]) -> list[FusedHit]:
    """``ranked`` first, then every other hit in its fused order."""
    seen = {h.id for h in ranked}
    return [*ranked, *(h for h in hits if h.id not in seen)]


class CompressorReranker:
    """A LangChain ``BaseDocumentCompressor`` as the agent's reranker."""

    def __init__(self, compressor: Any) -> None:
        self.compressor = compressor
        self.name = type(compressor).__name__

    def rerank(self, query: str, hits: Sequence[FusedHit]) -> list[FusedHit]:
        by_id = {h.id: h for h in hits}
        by_text: dict[str, FusedHit] = {}
        for h in hits:
            by_text.setdefault(str(h.payload.get("text", "")), h)
        out: list[FusedHit] = []
        for doc in self.compressor.compress_documents([_document(h) for h in hits], query):
            meta = doc.metadata or {}
            hit = by_id.get(str(meta.get("_rag_chunk_id") or doc.id or "")) or by_text.get(
                doc.page_content
            )
            if hit is None or any(h.id == hit.id for h in out):
                continue
            score = meta.get("relevance_score")
            if isinstance(score, int | float):
                hit.extra["rerank_score"] = round(float(score), 6)
            out.append(hit)
        return complete_ranking(out, hits)

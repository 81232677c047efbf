"""Hybrid retrieval over the index: BM25 and dense lists, fusion, reranking, the searcher.

Built on ``retrievalagent.index`` (the engines, hits and the BM25 encoder). The searcher
runs the two searches of one query, fuses them and (with a reranker) reorders the head;
``HybridRetriever`` offers the same search as a LangChain retriever. One ``SearchPlan``
sizes a search and ``HybridSearcher.rank`` ranks its two lists, for ``search``, ``asearch``
and the graph alike.
"""

from retrievalagent.retrieval._fusion import FusedHit, Fuser, make_fuser
from retrievalagent.retrieval._rerank import CompressorReranker, Reranker, complete_ranking
from retrievalagent.retrieval._retriever import RESERVED_KEY, HybridRetriever, to_document
from retrievalagent.retrieval._searcher import (
    HybridSearcher,
    QueryEmbedder,
    Ranked,
    SearchPlan,
    to_source,
)

__all__ = [
    "RESERVED_KEY",
    "CompressorReranker",
    "FusedHit",
    "Fuser",
    "HybridRetriever",
    "HybridSearcher",
    "QueryEmbedder",
    "Ranked",
    "Reranker",
    "SearchPlan",
    "complete_ranking",
    "make_fuser",
    "to_document",
    "to_source",
]

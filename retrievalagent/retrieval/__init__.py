"""Hybrid retrieval: the index interface, its two Qdrant backends, BM25 encoding, fusion, reranking."""

from retrievalagent.retrieval._edge import EdgeIndex
from retrievalagent.retrieval._fusion import FusedHit, Fuser, make_fuser
from retrievalagent.retrieval._index import VectorIndex
from retrievalagent.retrieval._lexical import LexicalEncoder
from retrievalagent.retrieval._rerank import (
    CompressorReranker,
    LLMReranker,
    Reranker,
    resolve_reranker,
)
from retrievalagent.retrieval._retriever import RESERVED_KEY, HybridRetriever, to_document
from retrievalagent.retrieval._searcher import HybridSearcher, QueryEmbedder, to_source
from retrievalagent.retrieval._server import ServerIndex
from retrievalagent.retrieval._types import Condition, Hit, Sparse, parse_filter

__all__ = [
    "RESERVED_KEY",
    "CompressorReranker",
    "Condition",
    "EdgeIndex",
    "FusedHit",
    "Fuser",
    "Hit",
    "HybridRetriever",
    "HybridSearcher",
    "LLMReranker",
    "LexicalEncoder",
    "QueryEmbedder",
    "Reranker",
    "ServerIndex",
    "Sparse",
    "VectorIndex",
    "make_fuser",
    "parse_filter",
    "resolve_reranker",
    "to_document",
    "to_source",
]

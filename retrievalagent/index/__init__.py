"""The floor of the package: what is stored and searched, below retrieval, models, memory.

The vector index interface and its two Qdrant engines (the embedded one on disk, a server
through qdrant-client), the data passed between them and their callers (hits, sparse
vectors, filter conditions) and the BM25 encoder every part shares (documents, queries and
memory are tokenized alike). Nothing here knows about models, memory or the graph.
"""

from __future__ import annotations

from retrievalagent.index._base import STAGED, STAGED_MARK, VectorIndex
from retrievalagent.index._edge import EDGE_CONFIG, EdgeIndex, check_unlocked
from retrievalagent.index._lexical import MEMORY_META_WORDS, LexicalEncoder
from retrievalagent.index._remote import ServerIndex
from retrievalagent.index._types import Condition, Hit, Sparse, parse_filter

__all__ = [
    "EDGE_CONFIG",
    "MEMORY_META_WORDS",
    "STAGED",
    "STAGED_MARK",
    "Condition",
    "EdgeIndex",
    "Hit",
    "LexicalEncoder",
    "ServerIndex",
    "Sparse",
    "VectorIndex",
    "check_unlocked",
    "parse_filter",
]

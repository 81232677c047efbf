"""The one small interface every vector backend implements.

A collection holds one dense vector (``dense``, cosine) and one sparse BM25 vector
(``bm25``, with Qdrant's IDF modifier) per chunk, plus the chunk's payload. The embedded
engine (qdrant-edge) and a Qdrant server (qdrant-client) both sit behind this Protocol, so
nothing above it knows which one is in use.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any, Protocol, runtime_checkable

from retrievalagent.index._types import Condition, Hit, Sparse

__all__ = [
    "DENSE",
    "IS_STAGED",
    "SPARSE",
    "STAGED",
    "STAGED_MARK",
    "Conditions",
    "DenseBatch",
    "Embedding",
    "Payloads",
    "VectorIndex",
]

DENSE = "dense"
SPARSE = "bm25"
#: Payload flag of chunks written but not yet committed: searches, counts and listings
#: skip them, so a file's new version appears all at once (see ``ingest/_pipeline.py``).
STAGED = "staged"
STAGED_MARK = "yes"  # a keyword: the embedded engine does not match booleans
#: The condition that picks staged chunks (searches put it under ``must_not``).
IS_STAGED = Condition(STAGED, "match", STAGED_MARK)
#: Conditions a chunk must all meet (none: every chunk).
Conditions = Sequence[Condition]
#: One embedding (a dense vector).
Embedding = Sequence[float]
#: The dense vectors of a batch of chunks, one per chunk.
DenseBatch = Sequence[Embedding]
#: The payloads of a batch of chunks, one per chunk.
Payloads = Sequence[dict[str, Any]]


@runtime_checkable
class VectorIndex(Protocol):
    """Storage and search of chunks for one collection."""

    #: Where the index lives, for messages (a path, ``:memory:`` or a URL).
    location: str
    #: Whether searches should ask for ids and scores only (``with_payload=False``), the
    #: payloads of the few fused winners fetched after with :meth:`retrieve`: worth it
    #: where reading payloads costs more than the search (the embedded engine), not where
    #: the fetch is one more network round trip (a server).
    search_without_payloads: bool

    def ensure(self, dimension: int) -> None:
        """Create the collection for ``dimension``-d vectors, or check the existing one."""

    def upsert(
        self, ids: Sequence[str], dense: DenseBatch, sparse: Sequence[Sparse], payloads: Payloads
    ) -> None:
        """Insert or replace chunks (same id = replace); a payload with ``STAGED: STAGED_MARK``
        stays hidden until :meth:`commit`."""

    def dense_search(
        self, vector: Embedding, limit: int, conditions: Conditions = (), with_payload: bool = True
    ) -> list[Hit]:
        """Nearest chunks by cosine similarity, best first (without payloads: ids and
        scores only)."""

    def sparse_search(
        self, vector: Sparse, limit: int, conditions: Conditions = (), with_payload: bool = True
    ) -> list[Hit]:
        """Best BM25 matches (IDF applied by the engine), best first."""

    def retrieve(self, ids: Sequence[str]) -> dict[str, dict[str, Any]]:
        """Payloads of the chunks with these ids (missing ids are left out)."""

    def chunks(self, conditions: Conditions = ()) -> Iterator[tuple[str, dict[str, Any]]]:
        """Every visible chunk matching ``conditions``: its id and payload (in id order)."""

    def absent_terms(self, term_ids: Sequence[int]) -> set[int]:
        """The term ids that occur in no chunk at all."""

    def source_hashes(self, source: str, staged: bool = False) -> dict[str, int]:
        """The ``doc_hash`` values of ``source``'s visible chunks (or of its staged ones)
        and their chunk counts."""

    def commit(self, source: str, doc_hash: str) -> int:
        """Make ``source``'s staged ``doc_hash`` chunks visible, after deleting all its other
        chunks; returns how many were deleted."""

    def delete(self, conditions: Conditions, keep_doc_hash: str | None = None) -> int:
        """Delete chunks matching ``conditions`` (except those with ``keep_doc_hash``)."""

    def count(self, conditions: Conditions = ()) -> int:
        """Number of chunks matching ``conditions``."""

    def sources(self, staged: bool = False) -> dict[str, int]:
        """Every indexed source and its number of visible chunks (or of staged ones)."""

    def close(self) -> None:
        """Release files and connections."""

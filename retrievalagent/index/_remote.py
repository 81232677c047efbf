"""A collection on a Qdrant server or cluster, through qdrant-client.

Same layout as the embedded index (named ``dense`` vector, ``bm25`` sparse vector with the
IDF modifier, keyword indexes on ``source`` and ``doc_hash``), so an index built on a
laptop and one on a cluster answer the same way.
"""

from __future__ import annotations

import functools
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from qdrant_client import QdrantClient, models

from retrievalagent.errors import VectorIndexError
from retrievalagent.index._base import (
    DENSE,
    SPARSE,
    STAGED,
    Conditions,
    DenseBatch,
    Embedding,
    Payloads,
)
from retrievalagent.index._dialect import Dialect, hit, records
from retrievalagent.index._types import Condition, Hit, Sparse

__all__ = ["ServerIndex"]


def _models() -> Any:
    # qdrant-client takes ~1 s to import; only agents that talk to a server pay for it.
    from qdrant_client import models

    return models


@functools.cache
def _dialect() -> Dialect[models.Filter]:
    models = _models()
    return Dialect(
        models.Filter,
        models.FieldCondition,
        models.MatchValue,
        models.MatchAny,
        models.Range,
        models.PointStruct,
        models.SparseVector,
    )


def _live(conditions: Conditions = ()) -> models.Filter | None:
    """``conditions`` minus staged chunks (other processes may be staging at any time)."""
    return _dialect().visible(conditions)


def _is_local_mode(client: QdrantClient) -> bool:
    from qdrant_client.local.qdrant_local import QdrantLocal

    return isinstance(getattr(client, "_client", None), QdrantLocal)


class ServerIndex:
    """A collection named ``collection`` on the Qdrant reached by ``client``."""

    #: Payloads come with the search: fetching them after costs another round trip.
    search_without_payloads = False

    def __init__(self, client: QdrantClient, collection: str, location: str | None = None) -> None:
        self.client = client
        self.collection = collection
        self.location = location or f"qdrant collection {collection!r}"
        self._ready = False

    @classmethod
    def from_url(
        cls, url: str, collection: str, api_key: str | None = None, timeout: int = 30
    ) -> ServerIndex:
        from qdrant_client import QdrantClient

        client = QdrantClient(url=url, api_key=api_key, timeout=timeout)
        from retrievalagent._inputs import redact_url

        return cls(client, collection, location=f"{redact_url(url)} (collection {collection!r})")

    def exists(self) -> bool:
        """Whether the server has this collection (an unreachable server says so in one line)."""
        try:
            return bool(self.client.collection_exists(self.collection))
        except Exception as exc:
            raise VectorIndexError(
                f"cannot reach Qdrant at {self.location}: {exc}", original=exc
            ) from None

    def ensure(self, dimension: int) -> None:
        if self._ready:
            return
        models = _models()
        if self.exists():
            info = self.client.get_collection(self.collection)
            vectors = info.config.params.vectors
            size = vectors[DENSE].size if isinstance(vectors, dict) and DENSE in vectors else None
            if size != dimension:
                raise VectorIndexError(
                    f"collection {self.collection!r} at {self.location} has dense vector size "
                    f"{size}, but the embeddings give {dimension}-d vectors"
                )
        else:
            self.client.create_collection(
                self.collection,
                vectors_config={
                    DENSE: models.VectorParams(size=dimension, distance=models.Distance.COSINE)
                },
                sparse_vectors_config={
                    SPARSE: models.SparseVectorParams(modifier=models.Modifier.IDF)
                },
            )
            if not _is_local_mode(self.client):  # local mode ignores them, with a warning
                for name in ("source", "doc_hash"):
                    self.client.create_payload_index(
                        self.collection, name, field_schema=models.PayloadSchemaType.KEYWORD
                    )
                self.client.create_payload_index(
                    self.collection, STAGED, field_schema=models.PayloadSchemaType.KEYWORD
                )
        self._ready = True

    def close(self) -> None:
        self.client.close()

    def upsert(
        self, ids: Sequence[str], dense: DenseBatch, sparse: Sequence[Sparse], payloads: Payloads
    ) -> None:
        points = _dialect().points(ids, dense, sparse, payloads)
        self.client.upsert(self.collection, points=points, wait=True)

    def commit(self, source: str, doc_hash: str) -> int:
        source_is = Condition("source", "match", source)
        removed = self.delete([source_is], keep_doc_hash=doc_hash)
        models = _models()
        mine = _dialect().staged([source_is, Condition("doc_hash", "match", doc_hash)])
        self.client.delete_payload(
            self.collection, keys=[STAGED], points=models.FilterSelector(filter=mine), wait=True
        )
        return removed

    def delete(self, conditions: Conditions, keep_doc_hash: str | None = None) -> int:
        keep = [Condition("doc_hash", "match", keep_doc_hash)] if keep_doc_hash else []
        flt = _dialect().deleting(conditions, keep)
        models = _models()
        n = self.client.count(self.collection, count_filter=flt, exact=True).count
        if n:
            self.client.delete(
                self.collection, points_selector=models.FilterSelector(filter=flt), wait=True
            )
        return n

    def dense_search(
        self, vector: Embedding, limit: int, conditions: Conditions = (), with_payload: bool = True
    ) -> list[Hit]:
        response = self.client.query_points(
            self.collection,
            query=list(map(float, vector)),
            using=DENSE,
            query_filter=_live(conditions),
            limit=limit,
            with_payload=with_payload,
        )
        return [hit(p) for p in response.points]

    def sparse_search(
        self, vector: Sparse, limit: int, conditions: Conditions = (), with_payload: bool = True
    ) -> list[Hit]:
        if not vector:
            return []
        response = self.client.query_points(
            self.collection,
            query=_dialect().sparse(vector),
            using=SPARSE,
            query_filter=_live(conditions),
            limit=limit,
            with_payload=with_payload,
        )
        return [hit(p) for p in response.points]

    def retrieve(self, ids: Sequence[str]) -> dict[str, dict[str, Any]]:
        if not ids:
            return {}
        records = self.client.retrieve(self.collection, ids=list(ids), with_payload=True)
        return {str(r.id): dict(r.payload or {}) for r in records}

    def chunks(self, conditions: Conditions = ()) -> Iterator[tuple[str, dict[str, Any]]]:
        yield from records(
            lambda offset: self.client.scroll(
                self.collection,
                scroll_filter=_live(conditions),
                limit=1024,
                offset=offset,
                with_payload=True,
            )
        )

    def absent_terms(self, term_ids: Sequence[int]) -> set[int]:
        if not term_ids:
            return set()
        models = _models()
        requests = [
            models.QueryRequest(
                query=models.SparseVector(indices=[t], values=[1.0]),
                using=SPARSE,
                filter=_live(),
                limit=1,
                with_payload=False,
            )
            for t in term_ids
        ]
        results = self.client.query_batch_points(self.collection, requests=requests)
        return {t for t, res in zip(term_ids, results, strict=True) if not res.points}

    def source_hashes(self, source: str, staged: bool = False) -> dict[str, int]:
        source_is = [Condition("source", "match", source)]
        response = self.client.facet(
            self.collection,
            key="doc_hash",
            limit=64,
            exact=True,
            facet_filter=_dialect().staged(source_is) if staged else _live(source_is),
        )
        return {str(h.value): int(h.count) for h in response.hits if h.count}

    def count(self, conditions: Conditions = ()) -> int:
        return int(
            self.client.count(self.collection, count_filter=_live(conditions), exact=True).count
        )

    def sources(self, staged: bool = False) -> dict[str, int]:
        total = int(self.client.count(self.collection, exact=True).count)
        if not total:
            return {}
        response = self.client.facet(
            self.collection,
            key="source",
            limit=total,
            exact=True,
            facet_filter=_dialect().staged() if staged else _live(),
        )
        return {str(h.value): int(h.count) for h in response.hits if h.count}

"""A collection on a Qdrant server or cluster, through qdrant-client.

Same layout as the embedded index (named ``dense`` vector, ``bm25`` sparse vector with the
IDF modifier, keyword indexes on ``source`` and ``doc_hash``), so an index built on a
laptop and one on a cluster answer the same way.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from qdrant_client import QdrantClient

from retrievalagent.errors import VectorIndexError
from retrievalagent.retrieval._index import DENSE, IS_STAGED, SPARSE, STAGED
from retrievalagent.retrieval._types import Condition, Hit, Sparse

__all__ = ["ServerIndex"]


def _models() -> Any:
    # qdrant-client takes ~1 s to import; only agents that talk to a server pay for it.
    from qdrant_client import models

    return models


def _condition(c: Condition) -> Any:
    models = _models()
    if c.kind == "match":
        return models.FieldCondition(key=c.key, match=models.MatchValue(value=c.value))
    if c.kind == "any":
        return models.FieldCondition(key=c.key, match=models.MatchAny(any=c.value))
    return models.FieldCondition(key=c.key, range=models.Range(**c.value))


def _to_filter(conditions: Sequence[Condition], must_not: Sequence[Condition] = ()) -> Any:
    models = _models()
    if not conditions and not must_not:
        return None
    return models.Filter(
        must=[_condition(c) for c in conditions] or None,
        must_not=[_condition(c) for c in must_not] or None,
    )


def _live(conditions: Sequence[Condition] = ()) -> Any:
    """``conditions`` minus staged chunks (other processes may be staging at any time)."""
    return _to_filter(conditions, [IS_STAGED])


def _is_local_mode(client: QdrantClient) -> bool:
    from qdrant_client.local.qdrant_local import QdrantLocal

    return isinstance(getattr(client, "_client", None), QdrantLocal)


def _hit(point: Any) -> Hit:
    return Hit(id=str(point.id), score=float(point.score), payload=dict(point.payload or {}))


class ServerIndex:
    """A collection named ``collection`` on the Qdrant reached by ``client``."""

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

    def ensure(self, dimension: int) -> None:
        if self._ready:
            return
        models = _models()
        try:
            exists = self.client.collection_exists(self.collection)
        except Exception as exc:
            raise VectorIndexError(
                f"cannot reach Qdrant at {self.location}: {exc}", original=exc
            ) from None
        if exists:
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
        self,
        ids: Sequence[str],
        dense: Sequence[Sequence[float]],
        sparse: Sequence[Sparse],
        payloads: Sequence[dict[str, Any]],
    ) -> None:
        models = _models()
        points = [
            models.PointStruct(
                id=pid,
                vector={
                    DENSE: list(map(float, vec)),
                    SPARSE: models.SparseVector(indices=sp.indices, values=sp.values),
                },
                payload=payload,
            )
            for pid, vec, sp, payload in zip(ids, dense, sparse, payloads, strict=True)
        ]
        self.client.upsert(self.collection, points=points, wait=True)

    def commit(self, source: str, doc_hash: str) -> int:
        source_is = Condition("source", "match", source)
        removed = self.delete([source_is], keep_doc_hash=doc_hash)
        models = _models()
        mine = _to_filter([source_is, Condition("doc_hash", "match", doc_hash), IS_STAGED])
        self.client.delete_payload(
            self.collection, keys=[STAGED], points=models.FilterSelector(filter=mine), wait=True
        )
        return removed

    def delete(self, conditions: Sequence[Condition], keep_doc_hash: str | None = None) -> int:
        keep = [Condition("doc_hash", "match", keep_doc_hash)] if keep_doc_hash else []
        flt = _to_filter(conditions, keep)
        if flt is None:
            raise VectorIndexError("refusing to delete without conditions")
        models = _models()
        n = self.client.count(self.collection, count_filter=flt, exact=True).count
        if n:
            self.client.delete(
                self.collection, points_selector=models.FilterSelector(filter=flt), wait=True
            )
        return n

    def dense_search(
        self, vector: Sequence[float], limit: int, conditions: Sequence[Condition] = ()
    ) -> list[Hit]:
        response = self.client.query_points(
            self.collection,
            query=list(map(float, vector)),
            using=DENSE,
            query_filter=_live(conditions),
            limit=limit,
            with_payload=True,
        )
        return [_hit(p) for p in response.points]

    def sparse_search(
        self, vector: Sparse, limit: int, conditions: Sequence[Condition] = ()
    ) -> list[Hit]:
        if not vector:
            return []
        models = _models()
        response = self.client.query_points(
            self.collection,
            query=models.SparseVector(indices=vector.indices, values=vector.values),
            using=SPARSE,
            query_filter=_live(conditions),
            limit=limit,
            with_payload=True,
        )
        return [_hit(p) for p in response.points]

    def retrieve(self, ids: Sequence[str]) -> dict[str, dict[str, Any]]:
        if not ids:
            return {}
        records = self.client.retrieve(self.collection, ids=list(ids), with_payload=True)
        return {str(r.id): dict(r.payload or {}) for r in records}

    def chunks(self, conditions: Sequence[Condition] = ()) -> Iterator[tuple[str, dict[str, Any]]]:
        offset = None
        while True:
            records, offset = self.client.scroll(
                self.collection,
                scroll_filter=_live(conditions),
                limit=1024,
                offset=offset,
                with_payload=True,
            )
            yield from ((str(r.id), dict(r.payload or {})) for r in records)
            if offset is None:
                return

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
            facet_filter=_to_filter([*source_is, IS_STAGED]) if staged else _live(source_is),
        )
        return {str(h.value): int(h.count) for h in response.hits if h.count}

    def count(self, conditions: Sequence[Condition] = ()) -> int:
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
            facet_filter=_to_filter([IS_STAGED]) if staged else _live(),
        )
        return {str(h.value): int(h.count) for h in response.hits if h.count}

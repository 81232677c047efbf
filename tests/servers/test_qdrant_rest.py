"""Real qdrant-client (REST transport) against the Qdrant REST shim."""

from __future__ import annotations

import hashlib
import re
import uuid
import warnings
from collections import Counter
from collections.abc import Iterator

import httpx
import pytest
from qdrant_client import AsyncQdrantClient, QdrantClient
from qdrant_client import models as m
from qdrant_client.http.exceptions import UnexpectedResponse
from qdrant_client.qdrant_remote import QdrantRemote

from tests.servers.qdrant_rest import QdrantRestShim

DOCS = {
    1: ("guide.md", "Hybrid search fuses BM25 keyword scores with dense vector similarity"),
    2: ("guide.md", "Qdrant stores dense vectors and sparse vectors in one collection"),
    3: ("faq.md", "Reciprocal rank fusion merges two ranked lists by rank position"),
    4: ("faq.md", "LangGraph checkpointers persist conversation threads"),
    5: ("notes.md", "Bananas are a yellow fruit rich in potassium"),
}
VOCAB = sorted({w for _, text in DOCS.values() for w in re.findall(r"\w+", text.lower())})


def dense(text: str) -> list[float]:
    """A tiny deterministic 'embedding': bag of words over the corpus vocabulary, hashed to 8."""
    vec = [0.0] * 8
    for word in re.findall(r"\w+", text.lower()):
        vec[int(hashlib.md5(word.encode()).hexdigest(), 16) % 8] += 1.0
    return vec if any(vec) else [1.0] + [0.0] * 7


def bm25(text: str) -> m.SparseVector:
    """Term frequencies keyed by term id; Qdrant applies IDF (modifier=idf)."""
    counts = Counter(w for w in re.findall(r"\w+", text.lower()) if w in VOCAB)
    indices = sorted(VOCAB.index(w) for w in counts)
    return m.SparseVector(indices=indices, values=[float(counts[VOCAB[i]]) for i in indices])


def create_docs(client: QdrantClient, name: str = "docs") -> None:
    client.create_collection(
        name,
        vectors_config={"dense": m.VectorParams(size=8, distance=m.Distance.COSINE)},
        sparse_vectors_config={"bm25": m.SparseVectorParams(modifier=m.Modifier.IDF)},
    )
    client.upsert(
        name,
        points=[
            m.PointStruct(
                id=pid,
                vector={"dense": dense(text), "bm25": bm25(text)},
                payload={"source": source, "position": pid, "text": text},
            )
            for pid, (source, text) in DOCS.items()
        ],
        wait=True,
    )


@pytest.fixture
def client(qdrant_server: QdrantRestShim) -> Iterator[QdrantClient]:
    c = QdrantClient(url=qdrant_server.url, timeout=10)
    yield c
    c.close()


def test_root_version_passes_client_compatibility_check(qdrant_server: QdrantRestShim) -> None:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        # what QdrantClient(url=...) runs on a background thread at construction
        QdrantRemote._check_compatibility(qdrant_server.url, {}, None, 5)
    assert [str(w.message) for w in caught] == []
    info = QdrantClient(url=qdrant_server.url, check_compatibility=False).info()
    assert info.title == "qdrant - vector search engine"
    assert info.version == qdrant_server.version
    assert httpx.get(qdrant_server.url + "/healthz").text == "healthz check passed"


def test_collection_lifecycle(client: QdrantClient) -> None:
    assert client.collection_exists("docs") is False
    create_docs(client)
    assert client.collection_exists("docs") is True
    assert [c.name for c in client.get_collections().collections] == ["docs"]

    info = client.get_collection("docs")
    assert info.points_count == 5
    assert info.status == m.CollectionStatus.GREEN
    vectors = info.config.params.vectors
    assert vectors["dense"].size == 8 and vectors["dense"].distance == m.Distance.COSINE
    assert info.config.params.sparse_vectors["bm25"].modifier == m.Modifier.IDF

    client.create_payload_index("docs", "source", m.PayloadSchemaType.KEYWORD)
    assert client.get_collection("docs").payload_schema["source"].data_type == "keyword"

    with pytest.raises(UnexpectedResponse) as exc:
        client.create_collection("docs", vectors_config=m.VectorParams(size=8, distance="Cosine"))
    assert exc.value.status_code == 409

    assert client.delete_collection("docs") is True
    assert client.collection_exists("docs") is False
    with pytest.raises(UnexpectedResponse) as exc:
        client.get_collection("docs")
    assert exc.value.status_code == 404
    assert b"doesn't exist" in exc.value.content


def test_hybrid_query_prefetch_rrf(client: QdrantClient) -> None:
    create_docs(client)
    question = "how does hybrid search fuse bm25 and dense vectors"

    sparse_only = client.query_points("docs", query=bm25(question), using="bm25", limit=3)
    assert sparse_only.points[0].id == 1

    dense_only = client.query_points("docs", query=dense(question), using="dense", limit=5)
    assert len(dense_only.points) == 5
    scores = [p.score for p in dense_only.points]
    assert scores == sorted(scores, reverse=True) and -1.0 <= scores[-1] <= scores[0] <= 1.0

    fused = client.query_points(
        "docs",
        prefetch=[
            m.Prefetch(query=dense(question), using="dense", limit=5),
            m.Prefetch(query=bm25(question), using="bm25", limit=5),
        ],
        query=m.FusionQuery(fusion=m.Fusion.RRF),
        limit=3,
        with_payload=True,
    )
    assert fused.points[0].id == 1
    assert fused.points[0].payload == {"source": "guide.md", "position": 1, "text": DOCS[1][1]}
    assert len(fused.points) == 3
    assert fused.points[0].score > fused.points[-1].score

    # explicit RRF parameters and a payload filter applied to the prefetches
    only_faq = m.Filter(must=[m.FieldCondition(key="source", match=m.MatchValue(value="faq.md"))])
    fused_faq = client.query_points(
        "docs",
        prefetch=[
            m.Prefetch(query=dense(question), using="dense", limit=5, filter=only_faq),
            m.Prefetch(query=bm25(question), using="bm25", limit=5, filter=only_faq),
        ],
        query=m.RrfQuery(rrf=m.Rrf(k=60)),
        limit=5,
        with_payload=["source"],
    )
    assert {p.id for p in fused_faq.points} <= {3, 4}
    assert fused_faq.points[0].id == 3
    assert all(p.payload == {"source": "faq.md"} for p in fused_faq.points)

    batch = client.query_batch_points(
        "docs",
        requests=[
            m.QueryRequest(query=bm25("bananas potassium"), using="bm25", limit=1),
            m.QueryRequest(query=bm25("checkpointers threads"), using="bm25", limit=1),
        ],
    )
    assert [r.points[0].id for r in batch] == [5, 4]


def test_filters_scroll_count_retrieve_payload_and_delete(client: QdrantClient) -> None:
    create_docs(client)
    guide = m.Filter(must=[m.FieldCondition(key="source", match=m.MatchValue(value="guide.md"))])
    assert client.count("docs").count == 5
    assert client.count("docs", count_filter=guide).count == 2
    late = m.Filter(must=[m.FieldCondition(key="position", range=m.Range(gte=4))])
    assert client.count("docs", count_filter=late).count == 2

    # paging with offset covers every point exactly once
    seen, offset = [], None
    while True:
        page, offset = client.scroll("docs", limit=2, offset=offset, with_payload=False)
        seen += [p.id for p in page]
        assert all(p.payload is None for p in page)
        if offset is None:
            break
    assert seen == [1, 2, 3, 4, 5]

    records, _ = client.scroll("docs", scroll_filter=guide, with_vectors=True)
    assert [r.id for r in records] == [1, 2]
    assert set(records[0].vector) == {"dense", "bm25"}
    # cosine collections store normalised vectors, as the server does
    raw = dense(DOCS[1][1])
    norm = sum(x * x for x in raw) ** 0.5
    assert records[0].vector["dense"] == pytest.approx([x / norm for x in raw], rel=1e-5)

    client.set_payload("docs", payload={"reviewed": True}, points=[1, 3])
    client.overwrite_payload("docs", payload={"source": "new.md"}, points=[5])
    got = {r.id: r.payload for r in client.retrieve("docs", ids=[1, 3, 5])}
    assert got[1]["reviewed"] is True and got[3]["reviewed"] is True
    assert got[5] == {"source": "new.md"}
    client.delete_payload("docs", keys=["reviewed"], points=[3])
    assert "reviewed" not in client.retrieve("docs", ids=[3])[0].payload

    # delete by filter, then by ids
    result = client.delete("docs", points_selector=m.FilterSelector(filter=guide))
    assert result.status == m.UpdateStatus.COMPLETED
    assert client.count("docs").count == 3
    assert client.count("docs", count_filter=guide).count == 0
    client.delete("docs", points_selector=m.PointIdsList(points=[3]))
    assert sorted(r.id for r in client.scroll("docs")[0]) == [4, 5]


def test_mem0_style_unnamed_dense_plus_bm25(client: QdrantClient) -> None:
    # mem0 2.2: unnamed dense vector + "bm25" sparse, string UUID ids, keyword indexes,
    # query_points / query_batch_points / update_vectors / set_payload / retrieve
    client.create_collection(
        "mem0",
        vectors_config=m.VectorParams(size=4, distance=m.Distance.COSINE),
        sparse_vectors_config={"bm25": m.SparseVectorParams(modifier=m.Modifier.IDF)},
    )
    for field in ("user_id", "agent_id", "run_id", "actor_id"):
        client.create_payload_index("mem0", field, "keyword")
    ids = [str(uuid.uuid4()) for _ in range(3)]
    client.upsert(
        "mem0",
        points=[
            m.PointStruct(
                id=ids[i],
                vector={"": vec, "bm25": m.SparseVector(indices=[i], values=[1.0])},
                payload={"data": f"fact {i}", "user_id": user},
            )
            for i, (vec, user) in enumerate(
                [([1.0, 0, 0, 0], "alice"), ([0, 1.0, 0, 0], "alice"), ([0, 0, 1.0, 0], "bob")]
            )
        ],
    )
    alice = m.Filter(must=[m.FieldCondition(key="user_id", match=m.MatchValue(value="alice"))])
    hits = client.query_points("mem0", query=[0.9, 0.1, 0, 0], query_filter=alice, limit=5).points
    assert [h.id for h in hits] == [ids[0], ids[1]]
    assert hits[0].payload["data"] == "fact 0" and 0.9 < hits[0].score <= 1.0

    sparse = client.query_points(
        "mem0", query=m.SparseVector(indices=[2], values=[1.0]), using="bm25", limit=2
    )
    assert [p.id for p in sparse.points] == [ids[2]]

    batch = client.query_batch_points(
        "mem0", requests=[m.QueryRequest(query=[0, 0, 1.0, 0], limit=1, with_payload=True)]
    )
    assert batch[0].points[0].payload["user_id"] == "bob"

    client.update_vectors("mem0", points=[m.PointVectors(id=ids[2], vector=[1.0, 0, 0, 0])])
    client.set_payload("mem0", payload={"data": "fact 2 updated"}, points=[ids[2]])
    top = client.query_points("mem0", query=[1.0, 0, 0, 0], limit=2).points
    assert {p.id for p in top} == {ids[0], ids[2]}
    (rec,) = client.retrieve("mem0", ids=[ids[2]], with_payload=True)
    assert rec.payload == {"data": "fact 2 updated", "user_id": "bob"}
    assert client.count("mem0", count_filter=alice).count == 2


def test_errors_and_legacy_search_endpoint(qdrant_server: QdrantRestShim) -> None:
    client = QdrantClient(url=qdrant_server.url)
    with pytest.raises(UnexpectedResponse) as exc:
        client.query_points("missing", query=[1.0, 0.0], limit=1)
    assert exc.value.status_code == 404
    create_docs(client)
    with pytest.raises(UnexpectedResponse) as exc:
        client.query_points("docs", query=[1.0, 0.0], using="dense", limit=1)  # wrong size
    assert exc.value.status_code == 400

    # the pre-1.10 search API, as raw REST (qdrant-client 1.20 no longer has .search())
    resp = httpx.post(
        f"{qdrant_server.url}/collections/docs/points/search",
        json={
            "vector": {"name": "bm25", "vector": bm25("bananas").model_dump()},
            "limit": 1,
            "with_payload": True,
        },
    )
    assert resp.status_code == 200
    body = resp.json()
    assert body["status"] == "ok" and isinstance(body["time"], float)
    assert body["result"][0]["id"] == 5 and body["result"][0]["payload"]["source"] == "notes.md"
    client.close()


async def test_async_client(qdrant_server: QdrantRestShim) -> None:
    client = AsyncQdrantClient(url=qdrant_server.url)
    try:
        assert await client.collection_exists("docs") is False
        await client.create_collection(
            "docs",
            vectors_config={"dense": m.VectorParams(size=8, distance=m.Distance.COSINE)},
            sparse_vectors_config={"bm25": m.SparseVectorParams(modifier=m.Modifier.IDF)},
        )
        await client.upsert(
            "docs",
            points=[
                m.PointStruct(id=pid, vector={"dense": dense(t), "bm25": bm25(t)}, payload={})
                for pid, (_, t) in DOCS.items()
            ],
        )
        res = await client.query_points(
            "docs",
            prefetch=[
                m.Prefetch(query=dense("reciprocal rank fusion"), using="dense", limit=5),
                m.Prefetch(query=bm25("reciprocal rank fusion"), using="bm25", limit=5),
            ],
            query=m.FusionQuery(fusion=m.Fusion.RRF),
            limit=1,
        )
        assert res.points[0].id == 3
        assert (await client.count("docs")).count == 5
    finally:
        await client.close()


def test_reset_between_tests_gives_empty_server(qdrant_server: QdrantRestShim) -> None:
    client = QdrantClient(url=qdrant_server.url)
    assert client.get_collections().collections == []
    create_docs(client, "scratch")
    qdrant_server.reset()
    assert client.collection_exists("scratch") is False
    client.close()


def test_localhost_6333(qdrant_server_6333: QdrantRestShim) -> None:
    # the spec's examples literally use backend_url="http://localhost:6333"
    assert qdrant_server_6333.port == 6333
    client = QdrantClient(url="http://localhost:6333")
    create_docs(client)
    hit = client.query_points("docs", query=bm25("bananas"), using="bm25", limit=1).points[0]
    assert hit.id == 5
    # mem0 configures host/port rather than url
    assert QdrantClient(host="localhost", port=6333).collection_exists("docs")
    client.close()

"""Fusion methods, id-only searches with payloads fetched after fusion, and edge compaction."""

from __future__ import annotations

import json
import threading
import uuid
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from langchain_core.documents import Document

from retrievalagent.errors import EmbeddingModelError
from retrievalagent.index import EdgeIndex
from retrievalagent.index._types import Hit, Sparse
from retrievalagent.retrieval import make_fuser


def hits(*pairs: tuple[str, float]) -> list[Hit]:
    return [Hit(pid, score, {}) for pid, score in pairs]


DENSE = hits(("a", 0.71), ("b", 0.70), ("c", 0.40))
LEXICAL = hits(("c", 14.0), ("d", 9.0), ("b", 2.0))


def order(method: str, coverage: float = 1.0, **kw: Any) -> list[str]:
    return [h.id for h in make_fuser(method, **kw)(DENSE, LEXICAL, coverage)]


def test_convex_min_max_normalises_each_list_and_mixes_them() -> None:
    fused = make_fuser("convex", dense_weight=0.5)(DENSE, LEXICAL)
    scores = {h.id: round(h.score, 4) for h in fused}
    # a: dense best (1.0), absent from BM25 -> 0.5; c: dense worst (0), BM25 best (1) -> 0.5
    assert scores["a"] == 0.5 and scores["c"] == 0.5
    assert scores["b"] == round(0.5 * (0.30 / 0.31), 4)  # dense near the top, BM25 bottom
    # the tie goes to c, which leads BM25's next by 5/12, not a, ahead of b by 0.01/0.31
    assert [h.id for h in fused][:2] == ["c", "a"]


def test_convex_weights_at_the_extremes_follow_one_list() -> None:
    assert order("convex", dense_weight=1.0)[:3] == ["a", "b", "c"]
    assert order("convex", dense_weight=0.0)[:2] == ["c", "d"]


def test_one_empty_list_gives_the_other_all_the_weight() -> None:
    only_dense = make_fuser("convex", dense_weight=0.2)(DENSE, [])
    assert [h.id for h in only_dense] == ["a", "b", "c"]
    assert only_dense[0].extra == {"w_dense": 1.0, "w_lexical": 0.0}


def test_adaptive_lowers_bm25_weight_when_query_words_are_unknown() -> None:
    fuser = make_fuser("adaptive", dense_weight=0.5)
    assert fuser.uses_coverage and not make_fuser("convex").uses_coverage
    full = fuser(DENSE, LEXICAL, 1.0)
    half = fuser(DENSE, LEXICAL, 0.5)
    assert full[0].extra["w_lexical"] == 0.5
    assert half[0].extra["w_lexical"] == 0.125  # (1 - 0.5) * 0.5 ** 2
    assert [h.id for h in full] == order("convex", dense_weight=0.5)
    assert half[0].id == "a"


def test_rrf_ignores_scores_and_coverage() -> None:
    assert order("rrf") == order("rrf", coverage=0.1)
    assert order("rrf")[0] in {"b", "c"}  # in both lists


def _vectors(n: int, seed: int = 0) -> np.ndarray:
    v = np.random.default_rng(seed).standard_normal((n, 8)).astype(np.float32)
    return v / np.linalg.norm(v, axis=1, keepdims=True)


def _fill(index: EdgeIndex, n: int) -> list[str]:
    ids = [str(uuid.UUID(int=i + 1)) for i in range(n)]
    vecs = _vectors(n)
    sparse = [Sparse([i % 50, 50 + i % 7], [1.0, 0.5]) for i in range(n)]
    payloads = [
        {"text": f"passage {i}", "source": f"s{i // 10}", "doc_hash": "h"} for i in range(n)
    ]
    index.upsert(ids, vecs.tolist(), sparse, payloads)
    return ids


def test_edge_searches_can_skip_payloads_and_fetch_them_later(tmp_path: Path) -> None:
    index = EdgeIndex(tmp_path / "idx")
    index.ensure(8)
    try:
        _fill(index, 40)
        query = _vectors(1, seed=3)[0].tolist()
        full = index.dense_search(query, 5)
        bare = index.dense_search(query, 5, with_payload=False)
        assert [h.id for h in bare] == [h.id for h in full]
        assert all(h.payload == {} for h in bare) and all(h.payload for h in full)
        sparse = index.sparse_search(Sparse([3], [1.0]), 5, with_payload=False)
        assert sparse and all(h.payload == {} for h in sparse)
        assert index.retrieve([full[0].id])[full[0].id] == full[0].payload
    finally:
        index.close()


def test_new_edge_shards_search_exactly_and_optimize_keeps_results(tmp_path: Path) -> None:
    path = tmp_path / "idx"
    index = EdgeIndex(path)
    index.ensure(8)
    try:
        config = json.loads((path / "edge_config.json").read_text())
        assert config["hnsw_config"]["m"] == 0  # no graph: brute force, cheap to optimize
        _fill(index, 300)
        query = _vectors(1, seed=5)[0].tolist()
        vecs = _vectors(300)
        exact = np.argsort(-(vecs @ np.asarray(query)))[:10]
        before = [h.id for h in index.dense_search(query, 10)]
        assert before == [str(uuid.UUID(int=int(i) + 1)) for i in exact]
        index.optimize()
        assert [h.id for h in index.dense_search(query, 10)] == before
        assert index.count() == 300
    finally:
        index.close()
    reopened = EdgeIndex(path)
    reopened.ensure(8)
    try:
        assert [h.id for h in reopened.dense_search(query, 10)] == before
    finally:
        reopened.close()


def test_search_attaches_payloads_of_the_winners_and_skips_deleted_ones(make_agent) -> None:
    agent = make_agent("fusion-payloads")
    agent.add_documents(
        [
            "The harbour opens at dawn for the fishing boats.",
            "Bananas are yellow when ripe and green before.",
            "The lighthouse keeper logs every ship at night.",
        ]
    )
    searcher = agent.searcher
    hits_, timings = searcher.search("When does the harbour open?", top_k=2)
    assert hits_ and all(h.payload.get("text") for h in hits_)
    assert "payload_ms" in timings
    fused = searcher.fuse(
        searcher.dense_hits(searcher.embedder.embed("harbour")),
        searcher.lexical_hits("harbour"),
        top_k=3,
    )
    assert all(h.payload == {} for h in fused)  # the searches returned ids and scores only
    gone = agent.index.retrieve([fused[0].id])[fused[0].id]["source"]
    agent.delete_documents(gone)
    kept = searcher.with_payloads(fused, top_k=3)
    assert fused[0].id not in {h.id for h in kept} and len(kept) == len(fused) - 1
    assert all(h.payload["source"] != gone for h in kept)


def test_preload_loads_in_the_background_and_a_failure_surfaces_later(monkeypatch) -> None:
    from retrievalagent.embeddings import MiniLMEmbeddings

    model = MiniLMEmbeddings()
    model.preload()
    assert isinstance(model._preload, threading.Thread)
    model._preload.join(timeout=60)
    assert model._session is not None
    assert len(model.embed_query("ready")) == 384

    broken = MiniLMEmbeddings()

    def fail() -> Any:
        raise EmbeddingModelError("model file damaged")

    monkeypatch.setattr(broken, "_open", fail)
    broken.preload()
    broken._preload.join(timeout=60)
    with pytest.raises(EmbeddingModelError, match="damaged"):
        broken.embed_query("anything")


# -- ties, exact identifiers, query normalisation, LangChain-style retriever arguments ------


@pytest.mark.parametrize("method", ["convex", "adaptive", "rrf", "weighted_rrf"])
def test_equal_scores_come_out_in_one_order_whatever_order_the_engine_gave(method: str) -> None:
    # Two indexes of the same documents may return equal scores in different orders.
    dense = hits(("a", 0.9), ("b", 0.5))
    one = hits(("x", 4.0), ("y", 4.0), ("z", 4.0), ("w", 1.0))
    other = hits(("z", 4.0), ("x", 4.0), ("y", 4.0), ("w", 1.0))
    fuser = make_fuser(method, dense_weight=0.3)
    first, second = fuser(dense, one), fuser(dense, other)
    view = [(h.id, h.score, h.dense_rank, h.lexical_rank) for h in first]
    assert view == [(h.id, h.score, h.dense_rank, h.lexical_rank) for h in second]
    assert [h.id for h in first if h.id in "xyz"] == ["x", "y", "z"]


_CALLS = ("alpha", "bravo", "charlie", "delta", "echo", "foxtrot")
_STATIONS = ("golf", "hotel", "india", "juliet", "kilo", "lima")


@pytest.mark.parametrize(
    "texts",
    [
        # BM25 scores tie for all twelve (same terms, same length); dense scores differ
        [f"The pump station {w} reports pressure normal at dawn." for w in _CALLS + _STATIONS],
        # every score ties in both lists
        ["The pump station reports pressure normal at dawn."] * 12,
    ],
    ids=["bm25-ties", "all-ties"],
)
def test_a_tie_at_the_fetch_k_cut_gives_the_same_hits_whatever_the_build_order(
    make_agent, tmp_path: Path, texts: list[str]
) -> None:
    docs = [Document(t, metadata={"source": f"p{i:02d}.md"}) for i, t in enumerate(texts)]
    found = []
    for name, order in (("forward", docs), ("reverse", docs[::-1])):
        rag = make_agent(name, backend_url=None, data_dir=tmp_path / name, fusion="rrf", fetch_k=5)
        rag.add_documents(order)
        found.append([(h["source"], h["score"]) for h in rag.search("pump station pressure")])
    assert found[0] == found[1] and len(found[0]) == 5


def test_a_sole_bm25_hit_wins_its_tie_with_a_narrow_dense_top() -> None:
    # "c" is the only passage with the query's rare term; "a" tops the dense list by a hair.
    dense = hits(("a", 0.52), ("b", 0.51), ("d", 0.30))
    fused = make_fuser("convex", dense_weight=0.5)(dense, hits(("c", 7.5)))
    assert [(h.id, h.score) for h in fused[:2]] == [("c", 0.5), ("a", 0.5)]


def test_an_identifier_found_in_one_chunk_is_the_top_hit(make_agent) -> None:
    # fetch_k=3 of 10 passages: the ID's passage is outside the dense list, so its fused
    # score (sole BM25 hit: 0.5) ties with the dense top that has no BM25 match (0.5).
    agent = make_agent("fusion-exact-id", fetch_k=3, top_k=3)
    docs = [f"# INC-{n}\n\nIncident INC-{n} was closed." for n in (48210, 48211, 48214, 48219)]
    docs += [f"# Notes {i}\n\nThe garden needs water on day {i} of the week." for i in range(5)]
    docs.append(
        "# Kitchen\n\nThe kettle rota changed after INC-48213; the tea shelf moved upstairs "
        "and the biscuit tin now lives beside the sink, next to the plants."
    )
    agent.add_documents(docs)
    for query in ("INC-48213", "inc-48213"):
        found = agent.search(query, top_k=3)
        assert "INC-48213" in found[0]["text"], (query, found[:2])
        assert found[0]["dense_rank"] is None and found[0]["lexical_rank"] == 1


def test_a_fullwidth_query_finds_what_its_plain_form_finds(make_agent, sample_docs) -> None:
    agent = make_agent("fusion-nfkc")
    agent.add_documents(str(sample_docs))
    plain = agent.search("what is LF-409?", top_k=3)
    wide = agent.search("what is ＬＦ-４０９?", top_k=3)
    assert plain[0]["source"].endswith("error-codes.txt")
    assert [h["id"] for h in wide] == [h["id"] for h in plain]
    assert agent.as_retriever(k=1).invoke("ＬＦ-４０９")[0].id == plain[0]["id"]


def test_as_retriever_accepts_langchain_search_kwargs(make_agent) -> None:
    from retrievalagent import ConfigError

    agent = make_agent("fusion-search-kwargs")
    agent.add_documents(
        [
            Document(page_content=f"The zorblax widget, model {i}, rotates keys.", metadata=m)
            for i, m in enumerate([{"lang": "en"}, {"lang": "de"}, {"lang": "en"}])
        ]
    )
    assert len(agent.as_retriever(search_kwargs={"k": 2}).invoke("zorblax")) == 2
    only_de = agent.as_retriever(search_kwargs={"k": 3, "filter": {"lang": "de"}})
    assert [d.metadata["lang"] for d in only_de.invoke("zorblax")] == ["de"]
    assert agent.as_retriever(k=1, search_kwargs={"k": 1}).k == 1
    with pytest.raises(ConfigError, match=r"'fetch_k'.*'score_threshold'"):
        agent.as_retriever(search_kwargs={"score_threshold": 0.5, "fetch_k": 9})
    with pytest.raises(ConfigError, match="k given twice"):
        agent.as_retriever(k=1, search_kwargs={"k": 2})
    with pytest.raises(ConfigError, match="search_kwargs must be a dict"):
        agent.as_retriever(search_kwargs=[("k", 2)])  # type: ignore[arg-type]

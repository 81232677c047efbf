"""The Qdrant-server code path (qdrant-client), against local mode and over real HTTP.

No Qdrant server can run on the build machine, so the same ``ServerIndex`` is exercised
with qdrant-client's local mode (in process) and through the REST shim (HTTP to a
qdrant-client local mode behind it).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from qdrant_client import QdrantClient

from retrievalagent.errors import VectorIndexError
from retrievalagent.index import EdgeIndex, ServerIndex


@pytest.fixture(params=["local-mode", "http"])
def server_agent(request, make_agent, qdrant_server):
    if request.param == "local-mode":
        return lambda **kw: make_agent(qdrant_client=QdrantClient(location=":memory:"), **kw)
    return lambda **kw: make_agent(backend_url=qdrant_server.url, **kw)


def test_server_path_ingests_searches_filters_and_deletes(server_agent, sample_docs: Path) -> None:
    rag = server_agent()
    assert isinstance(rag.index, ServerIndex)
    files = [sample_docs / "faq.md", sample_docs / "guide" / "encryption.md"]
    first = rag.add_documents(files, metadata={"team": "docs"})
    assert first.added_chunks == rag.count() > 5
    assert rag.add_documents(files, metadata={"team": "docs"}).added_chunks == 0
    assert set(rag.sources()) == {f.resolve().as_posix() for f in files}
    state = rag.invoke("Which algorithm stretches the passphrase?")
    assert state.sources[0]["source"].endswith("guide/encryption.md")
    assert state.sources[0]["metadata"] == {"team": "docs"}
    only_faq = rag.search("passphrase", filter={"source": files[0].resolve().as_posix()})
    assert only_faq and all(s["source"].endswith("faq.md") for s in only_faq)
    removed = rag.delete_documents(files[0])
    assert removed > 0 and rag.count() == first.added_chunks - removed


def test_server_and_embedded_indexes_agree(server_agent, make_agent, sample_docs: Path) -> None:
    server, embedded = server_agent(), make_agent("edge")
    assert isinstance(embedded.index, EdgeIndex)
    for rag in (server, embedded):
        rag.add_documents(sample_docs / "reference")
    for question in ("What does error code LF-409 mean?", "Which flag deep-verifies the vault?"):
        a = [s["id"] for s in server.search(question)]
        b = [s["id"] for s in embedded.search(question)]
        assert a[:3] == b[:3]  # same ids (deterministic), same ranking at the top
    vocab = server.searcher.encoder
    ids = list(vocab.term_ids("vault")) + list(vocab.term_ids("zyzzyva"))
    assert (
        server.index.absent_terms(ids)
        == embedded.index.absent_terms(ids)
        == set(vocab.term_ids("zyzzyva"))
    )


def test_dimension_mismatch_on_server_is_refused(qdrant_server, make_agent) -> None:
    from langchain_core.embeddings import DeterministicFakeEmbedding

    make_agent("shared", backend_url=qdrant_server.url).add_documents("x y z")
    with pytest.raises(VectorIndexError, match="384"):
        make_agent(
            "shared", backend_url=qdrant_server.url, embeddings=DeterministicFakeEmbedding(size=8)
        )


def test_unreachable_server_is_a_clear_error(make_agent) -> None:
    with pytest.raises(VectorIndexError, match="cannot reach Qdrant"):
        make_agent(backend_url="http://127.0.0.1:9")

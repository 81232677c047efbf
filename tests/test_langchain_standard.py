"""LangChain's own standard suites, run against the real retriever and the packaged embedder.

The retriever searches a real embedded index holding the bundled sample docs; the
embedder is the packaged MiniLM model. Beside the suites: a caller's metadata survives a
round trip untouched, and ``k`` works at construction and per call.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from langchain_core.documents import Document
from langchain_tests.integration_tests import (
    EmbeddingsIntegrationTests,
    RetrieversIntegrationTests,
)
from langchain_tests.unit_tests import EmbeddingsUnitTests

from retrievalagent import init_agent
from retrievalagent.embeddings import MiniLMEmbeddings
from retrievalagent.retrieval import RESERVED_KEY, HybridRetriever

QUESTION = "Which algorithm stretches the passphrase?"
_shared: dict[str, Any] = {}


@pytest.fixture(scope="module", autouse=True)
def _indexed_sample_docs(
    minilm: Any, sample_docs: Path, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[None]:
    """One real index of the sample docs for the whole module (the suites build retrievers
    from plain constructor arguments, so the searcher is kept here)."""
    agent = init_agent(
        "standard",
        backend_url=":memory:",
        embeddings=minilm,
        data_dir=tmp_path_factory.mktemp("standard"),
    )
    agent.add_documents(sample_docs)
    agent.add_documents(
        [
            Document(
                "Error LF-409 means the vault is locked by another process.",
                metadata={
                    "id": "doc-42",
                    "score": "A+",
                    "position": "top",
                    "headings": "mine",
                    "source": "errors.md",
                },
            )
        ]
    )
    _shared["agent"] = agent
    yield
    agent.close()
    _shared.clear()


class TestHybridRetrieverStandard(RetrieversIntegrationTests):
    @property
    def retriever_constructor(self) -> type[HybridRetriever]:
        return HybridRetriever

    @property
    def retriever_constructor_params(self) -> dict[str, Any]:
        return {"searcher": _shared["agent"].searcher}

    @property
    def retriever_query_example(self) -> str:
        return QUESTION


class TestMiniLMEmbeddingsStandard(EmbeddingsIntegrationTests):
    @property
    def embeddings_class(self) -> type[MiniLMEmbeddings]:
        return MiniLMEmbeddings


class TestMiniLMEmbeddingsUnitStandard(EmbeddingsUnitTests):
    @property
    def embeddings_class(self) -> type[MiniLMEmbeddings]:
        return MiniLMEmbeddings


def test_the_callers_metadata_comes_back_unchanged() -> None:
    agent = _shared["agent"]
    doc = agent.as_retriever(k=1).invoke("what does LF-409 mean")[0]
    ours = doc.metadata.pop(RESERVED_KEY)
    assert doc.metadata == {
        "id": "doc-42",
        "score": "A+",
        "position": "top",
        "headings": "mine",
        "source": "errors.md",
    }
    assert doc.id == ours["chunk_id"] != "doc-42"  # the chunk id is Document.id
    assert ours["source"] == "errors.md" and isinstance(ours["score"], float)
    assert ours["dense_rank"] == 1 or ours["lexical_rank"] == 1
    # the agent's answer documents use the same shape
    result = agent.invoke("what does LF-409 mean")
    assert result.documents[0].metadata["id"] == "doc-42"
    assert result.documents[0].metadata[RESERVED_KEY]["chunk_id"] == result.sources[0]["id"]


def test_file_passages_name_their_file_as_langchain_loaders_do() -> None:
    doc = _shared["agent"].as_retriever().invoke(QUESTION)[0]
    assert doc.metadata["source"].endswith("guide/encryption.md")
    assert doc.metadata[RESERVED_KEY]["headings"]  # the section the passage is under
    assert set(doc.metadata) == {"source", RESERVED_KEY}


async def test_k_per_call_and_at_construction() -> None:
    agent = _shared["agent"]
    retriever = agent.as_retriever(top_k=4)
    assert len(retriever.invoke(QUESTION)) == 4
    assert len(retriever.invoke(QUESTION, k=1)) == 1
    assert len(retriever.invoke(QUESTION, top_k=2)) == 2
    assert len(await retriever.ainvoke(QUESTION, k=3)) == 3
    assert len(agent.as_retriever(k=2).invoke(QUESTION)) == 2
    assert retriever.invoke(QUESTION, k=1)[0].id == retriever.invoke(QUESTION)[0].id
    only_errors = retriever.invoke(QUESTION, filter={"source": "errors.md"})
    assert [d.metadata["source"] for d in only_errors] == ["errors.md"]
    with pytest.raises(TypeError):
        retriever.invoke(QUESTION, n=1)  # an unknown argument is an error, never dropped
    with pytest.raises(ValueError, match="k must be between 1 and"):  # a ConfigError
        retriever.invoke(QUESTION, k=0)

"""The reranking stage: the order a reranker gives is the order the user sees.

Real index and embedder; the rerankers are LangChain document compressors written here
(one reverses the fused order, one scores by a keyword, one fails) and the ``"llm"``
reranker through langchain-openai against the local OpenAI-compatible server.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from langchain_core.callbacks import Callbacks
from langchain_core.documents import BaseDocumentCompressor, Document

from retrievalagent.errors import ConfigError
from retrievalagent.retrieval import RESERVED_KEY
from tests.servers.openai_compat import ChatRequest

QUESTION = "How is the passphrase stretched into a key?"


class Reverse(BaseDocumentCompressor):
    """Returns the passages in the opposite order."""

    calls: int = 0

    def compress_documents(
        self, documents: Sequence[Document], query: str, callbacks: Callbacks | None = None
    ) -> Sequence[Document]:
        self.calls += 1
        return list(reversed(documents))


class Keyword(BaseDocumentCompressor):
    """Scores each passage by how often it says ``word``; keeps only those that say it."""

    word: str

    def compress_documents(
        self, documents: Sequence[Document], query: str, callbacks: Callbacks | None = None
    ) -> Sequence[Document]:
        scored = []
        for doc in documents:
            count = len(re.findall(self.word, doc.page_content, flags=re.I))
            if count:
                scored.append(
                    Document(doc.page_content, metadata={**doc.metadata, "relevance_score": count})
                )
        return sorted(scored, key=lambda d: -d.metadata["relevance_score"])


class Broken(BaseDocumentCompressor):
    def compress_documents(
        self, documents: Sequence[Document], query: str, callbacks: Callbacks | None = None
    ) -> Sequence[Document]:
        raise RuntimeError("reranking service unavailable")


class Doubled:
    """A reranker of the library's own protocol that returns the first hit twice (a bug)."""

    name = "doubled"

    def rerank(self, query: str, hits: Sequence[Any]) -> list[Any]:
        return [hits[0], hits[0], *hits[1:]]


@pytest.fixture
def agents(make_agent, sample_docs: Path):
    """Build agents that share one ingested corpus (each on its own in-memory index)."""

    def build(**kwargs: Any) -> Any:
        rag = make_agent(**kwargs)
        rag.add_documents(sample_docs)
        return rag

    return build


def _ids(sources: Sequence[dict[str, Any]]) -> list[str]:
    return [s["id"] for s in sources]


def test_a_compressor_decides_the_order_of_the_sources(agents) -> None:
    fused = agents().search(QUESTION, top_k=5)
    rag = agents(reranker=Reverse(), rerank_k=5, top_k=5)
    reranked = rag.search(QUESTION)
    assert _ids(reranked) == list(reversed(_ids(fused)))
    assert [s["fused_rank"] for s in reranked] == [5, 4, 3, 2, 1]

    result = rag.invoke(QUESTION)
    assert _ids(result.sources) == list(reversed(_ids(fused)))
    event = next(e for e in result.trace if e["node"] == "rerank")
    assert event["reranker"] == "Reverse" and event["candidates"] == 5 and event["moved"] == 4
    assert event["ms"] >= 0 and "error" not in event
    docs = rag.as_retriever().invoke(QUESTION, k=2)
    assert [d.id for d in docs] == list(reversed(_ids(fused)))[:2]
    assert docs[0].metadata[RESERVED_KEY]["fused_rank"] == 5


def test_rerank_k_passages_are_reordered_before_top_k_are_kept(agents) -> None:
    rag = agents(reranker=Keyword(word="passphrase"), rerank_k=20, top_k=3)
    sources = rag.search("How are keys derived and stored?")
    assert all("passphrase" in s["text"].lower() for s in sources)
    counts = [s["rerank_score"] for s in sources]
    assert counts == sorted(counts, reverse=True) and counts[0] >= 3
    assert counts == [s["text"].lower().count("passphrase") for s in sources]
    # what the compressor left out still fills top_k, in fused order, after what it ranked
    rag = agents(reranker=Keyword(word="passphrase"), rerank_k=20, top_k=20)
    sources = rag.search("How are keys derived and stored?")
    said = ["passphrase" in s["text"].lower() for s in sources]
    assert said == sorted(said, reverse=True) and not all(said) and len(sources) == 20


async def test_the_async_path_reranks_too(agents) -> None:
    fused = agents().search(QUESTION, top_k=4)
    rag = agents(reranker=Reverse(), rerank_k=4, top_k=4)
    assert _ids(await rag.asearch(QUESTION)) == list(reversed(_ids(fused)))
    result = await rag.ainvoke(QUESTION)
    assert _ids(result.sources) == list(reversed(_ids(fused)))


def test_a_failing_reranker_leaves_the_fused_order_and_says_so(agents) -> None:
    fused = agents().search(QUESTION, top_k=5)
    rag = agents(reranker=Broken(), rerank_k=10, top_k=5)
    assert _ids(rag.search(QUESTION)) == _ids(fused)
    result = rag.invoke(QUESTION)
    assert _ids(result.sources) == _ids(fused)
    assert result.answer  # the turn still answers
    event = next(e for e in result.trace if e["node"] == "rerank")
    assert event["error"] == "reranking service unavailable"
    assert event["error_type"] == "RuntimeError" and event["fallback"] == "fused_order"


def test_rerank_k_is_a_setting_with_an_env_var(agents, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RAG_RERANK_K", "3")
    fused = agents().search(QUESTION, top_k=5)
    rag = agents(reranker=Reverse(), top_k=5)
    assert rag.settings.rerank_k == 3
    assert _ids(rag.search(QUESTION)) == [*reversed(_ids(fused)[:3]), *_ids(fused)[3:]]
    monkeypatch.setenv("RAG_RERANK_K", "0")
    with pytest.raises(ConfigError, match="RAG_RERANK_K"):
        agents(reranker=Reverse())


def test_bad_rerankers_are_refused_with_a_clear_error(agents) -> None:
    with pytest.raises(ConfigError, match="needs a chat model"):
        agents(reranker="llm")
    with pytest.raises(ConfigError, match="'llm' or a LangChain"):
        agents(reranker="flashrank")
    with pytest.raises(ConfigError, match="BaseDocumentCompressor"):
        agents(reranker=42)


def _llm_server(order: list[int] | None) -> Any:
    """A model that reranks by the order given (or replies garbage) and answers briefly."""

    def respond(request: ChatRequest) -> Any:
        if "You rank search results" in request.system_prompt:
            if order is None:
                return {"ranking": "not numbers"}
            return {"order": order}
        if request.json_schema is not None:
            return {"sufficient": True, "confidence": 0.9, "memory_worth_storing": False,
                    "memory_confidence": 0.0, "memory_fact": ""}  # fmt: skip
        return "Argon2id stretches it [1]."

    return respond


def test_llm_reranker_through_an_openai_compatible_server(agents, openai_server) -> None:
    fused = agents().search(QUESTION, top_k=4)
    openai_server.responder = _llm_server([3, 1, 3, 9, 0])  # a repeat and two bad numbers
    rag = agents(model="openai:gpt-5.4", reranker="llm", rerank_k=4, top_k=4)
    result = rag.invoke(QUESTION)
    f = _ids(fused)
    assert _ids(result.sources) == [f[2], f[0], f[1], f[3]]  # then the rest in fused order
    event = next(e for e in result.trace if e["node"] == "rerank")
    assert event["reranker"] == "llm:gpt-5.4" and "error" not in event
    assert event["usage"]["calls"] == 1 and event["usage"]["role"] == "rerank"
    assert result.usage["rerank"]["calls"] == 1  # counted with the turn's other calls
    rerank_calls = [r for r in openai_server.chat_requests if "rank search" in r.system_prompt]
    assert len(rerank_calls) == 1
    body = rerank_calls[0].last_user_message
    assert QUESTION in body and "[4]" in body and "[5]" not in body  # rerank_k passages


def test_llm_reranker_reply_without_a_ranking_falls_back(agents, openai_server) -> None:
    fused = agents().search(QUESTION, top_k=4)
    openai_server.responder = _llm_server(None)
    rag = agents(model="openai:gpt-5.4", reranker="llm", rerank_k=4, top_k=4, model_retries=0)
    result = rag.invoke(QUESTION)
    assert _ids(result.sources) == _ids(fused)
    event = next(e for e in result.trace if e["node"] == "rerank")
    assert event["fallback"] == "fused_order" and event["error"]
    json.dumps(result.trace)  # the trace stays plain data


def test_a_failed_llm_rerank_call_is_counted_in_the_turns_usage(agents, openai_server) -> None:
    """A 500 (retried), then a 401: the rerank fails, the fused order stays, and the call's
    time is in ``result.usage`` with the turn's other calls (it used to be missing)."""
    from tests.servers.openai_compat import OpenAIError

    failures = [OpenAIError("upstream broke", status=500, type="server_error"),
                OpenAIError("bad key", status=401, type="invalid_api_key")]  # fmt: skip
    answer = _llm_server([1])

    def respond(request: ChatRequest) -> Any:
        if "You rank search results" in request.system_prompt and failures:
            raise failures.pop(0)
        return answer(request)

    openai_server.responder = respond
    fused = agents().search(QUESTION, top_k=4)
    rag = agents(
        model="openai:gpt-5.4", reranker="llm", rerank_k=4, top_k=4, model_retries=1,
        model_backoff=0.0,
    )  # fmt: skip
    result = rag.invoke(QUESTION)
    assert not failures  # both attempts reached the server
    assert _ids(result.sources) == _ids(fused)
    event = next(e for e in result.trace if e["node"] == "rerank")
    assert event["fallback"] == "fused_order" and event["error_type"] == "ModelError"
    assert event["usage"]["role"] == "rerank" and event["usage"]["calls"] == 1
    used = result.usage["rerank"]
    assert used["calls"] == 1 and used["ms"] > 0
    assert used["input_tokens"] == used["output_tokens"] == 0  # nothing was billed
    total = result.usage["total"]
    assert (
        total["calls"]
        == used["calls"] + result.usage["answer"]["calls"] + (result.usage["grade"]["calls"])
    )


def test_a_reranker_that_repeats_a_passage_never_fails_the_turn(agents) -> None:
    fused = agents().search(QUESTION, top_k=5)
    rag = agents(reranker=Doubled(), rerank_k=10, top_k=5)
    result = rag.invoke(QUESTION)
    assert result.answer
    ids = _ids(result.sources)
    assert len(ids) == len(set(ids)) == 5  # each passage once
    assert set(ids) == set(_ids(fused))

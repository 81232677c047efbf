"""The langchain-openai path over real HTTP, against a local OpenAI-compatible server."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.servers.openai_compat import ChatRequest


def _responder(request: ChatRequest):
    if request.json_schema is not None:  # the structured grade
        return {
            "sufficient": True,
            "confidence": 0.83,
            "memory_worth_storing": True,
            "memory_confidence": 0.91,
            "memory_fact": '"secret phrase" is called "passphrase" in these documents',
        }
    if "Passages:" in (request.system_prompt or ""):
        return "The passphrase is stretched with Argon2id using 64 MiB of memory [1]."
    return "fallback"


@pytest.fixture
def openai_agent(make_agent, openai_server, sample_docs: Path):
    openai_server.responder = _responder
    rag = make_agent(model="openai:gpt-5.4")
    rag.add_documents(sample_docs / "guide" / "encryption.md")
    return rag


def test_invoke_over_http_answers_and_grades_with_json_schema(openai_agent, openai_server) -> None:
    state = openai_agent.invoke("How is my secret phrase stretched?")
    assert state.answer.startswith("The passphrase is stretched with Argon2id")
    assert state.generated_by == "llm:gpt-5.4"
    grade = next(e for e in state.trace if e["node"] == "final_grade")
    assert grade["confidence"] == 0.83 and grade["memory_confidence"] == 0.91
    assert grade["memory_should_store"] is True  # 0.91 >= 0.85
    assert state.memory_fact.startswith('"secret phrase"')  # chosen, though nowhere to write
    assert (
        next(e for e in state.trace if e["node"] == "write_memory")["skipped"]
        == "no_memory_backend"
    )
    chats = openai_server.chat_requests
    assert len(chats) == 2
    assert chats[0].body["model"] == "gpt-5.4"
    assert chats[1].response_format["type"] == "json_schema"


def test_stream_receives_tokens_over_sse(openai_agent) -> None:
    events = list(openai_agent.stream("How is my secret phrase stretched?"))
    tokens = [e["text"] for e in events if e["type"] == "token"]
    assert len(tokens) > 2
    assert "".join(tokens) == events[-1]["result"].answer


async def test_ainvoke_over_http(openai_agent) -> None:
    state = await openai_agent.ainvoke("How is my secret phrase stretched?")
    assert "Argon2id" in state.answer


def test_openai_embeddings_by_string_and_instance(make_agent, openai_server, minilm) -> None:
    from langchain_openai import OpenAIEmbeddings

    openai_server.embed = minilm  # the server embeds with the real model
    by_string = make_agent("emb1", embeddings="openai:text-embedding-3-small")
    by_string.add_documents(["Lanternfish listens on port 7311.", "Bananas are yellow."])
    assert by_string.search("which port?", top_k=1)[0]["text"].startswith("Lanternfish")
    instance = OpenAIEmbeddings(model="text-embedding-3-small", check_embedding_ctx_length=False)
    by_instance = make_agent("emb2", embeddings=instance)
    by_instance.add_documents(["Lanternfish listens on port 7311."])
    assert by_instance.count() == 1
    assert openai_server.embedding_requests, "embeddings went over HTTP"

"""Real OpenAI clients (openai SDK, langchain-openai) against the local test server."""

from __future__ import annotations

import json
import math
from typing import Literal

import openai
import pytest
from langchain_core.messages import AIMessageChunk, HumanMessage, SystemMessage, ToolMessage
from langchain_core.tools import tool
from langchain_openai import ChatOpenAI, OpenAIEmbeddings
from pydantic import BaseModel, Field

from tests.servers.fixtures import OPENAI_TEST_API_KEY
from tests.servers.openai_compat import (
    ChatRequest,
    OpenAICompatServer,
    OpenAIError,
    Reply,
    ScriptedResponder,
    ToolCall,
    default_responder,
    hashed_bow_embed,
    minimal_instance,
)


def _llm(server: OpenAICompatServer, **kwargs) -> ChatOpenAI:
    return ChatOpenAI(
        model="gpt-5.4", base_url=server.base_url, api_key="sk-explicit", max_retries=0, **kwargs
    )


def _cos(a: list[float], b: list[float]) -> float:
    return sum(x * y for x, y in zip(a, b, strict=True)) / (
        math.sqrt(sum(x * x for x in a)) * math.sqrt(sum(y * y for y in b))
    )


class Grade(BaseModel):
    grounded: bool
    confidence: float = Field(ge=0.2, le=1.0)
    reasons: list[str]


class Citation(BaseModel):
    source: str = Field(min_length=3)
    position: int = Field(ge=1)


class CitedAnswer(BaseModel):
    answer: str
    verdict: Literal["supported", "unsupported"]
    citations: list[Citation] = Field(min_length=1)
    note: str | None = None


@tool
def get_weather(city: str, unit: Literal["c", "f"] = "c") -> str:
    """Return the weather for a city."""
    return f"sunny in {city}"


# -- chat -------------------------------------------------------------------------------


def test_invoke_default_echo_and_recording(openai_server: OpenAICompatServer) -> None:
    llm = _llm(openai_server)
    msg = llm.invoke([SystemMessage("You answer briefly."), HumanMessage("What is hybrid search?")])
    assert msg.content == "Echo: What is hybrid search?"
    assert msg.response_metadata["finish_reason"] == "stop"
    assert msg.usage_metadata is not None and msg.usage_metadata["total_tokens"] > 0

    (req,) = openai_server.chat_requests
    assert req.model == "gpt-5.4"
    assert req.system_prompt == "You answer briefly."
    assert req.last_user_message == "What is hybrid search?"
    assert [m["role"] for m in req.messages] == ["system", "user"]
    raw = openai_server.requests[-1]
    assert raw.method == "POST" and raw.path == "/v1/chat/completions"
    assert raw.headers["authorization"] == "Bearer sk-explicit"


def test_scripted_responder_queue_and_function(openai_server: OpenAICompatServer) -> None:
    openai_server.responder = ScriptedResponder(
        ["first answer", lambda req: f"you said {req.last_user_message!r}"]
    )
    llm = _llm(openai_server)
    assert llm.invoke("one").content == "first answer"
    assert llm.invoke("two").content == "you said 'two'"
    # the queue is empty: falls back to the default responder
    assert llm.invoke("three").content == "Echo: three"
    assert [r.last_user_message for r in openai_server.chat_requests] == ["one", "two", "three"]


async def test_ainvoke(openai_server: OpenAICompatServer) -> None:
    openai_server.responder = lambda req: req.last_user_message.upper()
    msg = await _llm(openai_server).ainvoke("async works")
    assert msg.content == "ASYNC WORKS"


def test_stream_arrives_in_several_chunks(openai_server: OpenAICompatServer) -> None:
    text = "Hybrid search fuses BM25 scores with dense vector similarity."
    openai_server.responder = lambda req: text
    chunks = list(_llm(openai_server, stream_usage=True).stream("explain"))
    contents = [c.content for c in chunks if c.content]
    assert len(contents) >= 5
    assert "".join(contents) == text
    full = chunks[0]
    for c in chunks[1:]:
        full = full + c
    assert full.content == text
    assert full.usage_metadata is not None and full.usage_metadata["output_tokens"] == 9
    body = openai_server.chat_requests[-1].body
    assert body["stream"] is True and body["stream_options"] == {"include_usage": True}


async def test_astream(openai_server: OpenAICompatServer) -> None:
    openai_server.responder = lambda req: "a b c d"
    pieces = [c.content async for c in _llm(openai_server).astream("x") if c.content]
    assert pieces == ["a", " b", " c", " d"]


def test_openai_sdk_stream_has_usage_chunk_and_done(openai_server: OpenAICompatServer) -> None:
    client = openai.OpenAI(base_url=openai_server.base_url, api_key="k", max_retries=0)
    stream = client.chat.completions.create(
        model="gpt-5.4",
        messages=[{"role": "user", "content": "hello there"}],
        stream=True,
        stream_options={"include_usage": True},
    )
    chunks = list(stream)
    assert chunks[-1].choices == [] and chunks[-1].usage.total_tokens > 0
    assert chunks[-2].choices[0].finish_reason == "stop"
    assert "".join(c.choices[0].delta.content or "" for c in chunks if c.choices) == (
        "Echo: hello there"
    )


# -- structured output ------------------------------------------------------------------


def test_structured_output_default_json_schema(openai_server: OpenAICompatServer) -> None:
    grader = _llm(openai_server).with_structured_output(Grade)
    grade = grader.invoke("Is the answer grounded?")
    assert isinstance(grade, Grade)
    assert grade == Grade(grounded=False, confidence=0.2, reasons=[])

    rf = openai_server.chat_requests[-1].response_format
    assert rf["type"] == "json_schema"
    assert rf["json_schema"]["name"] == "Grade"
    assert rf["json_schema"]["strict"] is True


def test_structured_output_nested_minimal_is_valid(openai_server: OpenAICompatServer) -> None:
    answer = _llm(openai_server).with_structured_output(CitedAnswer).invoke("cite it")
    assert isinstance(answer, CitedAnswer)
    assert answer.verdict == "supported"
    assert answer.citations == [Citation(source="xxx", position=1)]


def test_structured_output_scripted_values(openai_server: OpenAICompatServer) -> None:
    openai_server.responder = ScriptedResponder(
        [
            {"grounded": True, "confidence": 0.93, "reasons": ["cites [1]"]},
            Grade(grounded=False, confidence=0.4, reasons=["no source"]),
        ]
    )
    grader = _llm(openai_server).with_structured_output(Grade)
    assert grader.invoke("q1") == Grade(grounded=True, confidence=0.93, reasons=["cites [1]"])
    assert grader.invoke("q2").confidence == 0.4


def test_structured_output_include_raw_and_function_calling(
    openai_server: OpenAICompatServer,
) -> None:
    out = _llm(openai_server).with_structured_output(Grade, include_raw=True).invoke("q")
    assert out["parsing_error"] is None and out["parsed"].grounded is False
    assert json.loads(out["raw"].content) == {"grounded": False, "confidence": 0.2, "reasons": []}

    # method="function_calling" forces a tool: the default responder calls it
    fc = _llm(openai_server).with_structured_output(Grade, method="function_calling")
    assert fc.invoke("q") == Grade(grounded=False, confidence=0.2, reasons=[])
    assert openai_server.chat_requests[-1].forced_tool == "Grade"


def test_json_object_response_format_via_openai_sdk(openai_server: OpenAICompatServer) -> None:
    # mem0's OpenAI LLM asks for {"type": "json_object"}
    client = openai.OpenAI(base_url=openai_server.base_url, api_key="k", max_retries=0)
    resp = client.chat.completions.create(
        model="gpt-5-mini",
        messages=[{"role": "user", "content": "Extract facts as JSON"}],
        response_format={"type": "json_object"},
    )
    assert json.loads(resp.choices[0].message.content) == {"answer": "Echo: Extract facts as JSON"}

    openai_server.responder = lambda req: {"memory": [{"id": "0", "text": "Likes tea"}]}
    resp = client.chat.completions.create(
        model="gpt-5-mini",
        messages=[{"role": "user", "content": "I like tea"}],
        response_format={"type": "json_object"},
    )
    assert json.loads(resp.choices[0].message.content)["memory"][0]["text"] == "Likes tea"


# -- tools ------------------------------------------------------------------------------


def test_tool_calling_round_trip(openai_server: OpenAICompatServer) -> None:
    openai_server.responder = ScriptedResponder(
        [
            ToolCall("get_weather", {"city": "Paris", "unit": "c"}, id="call_1"),
            lambda req: f"The tool said: {req.messages[-1]['content']}",
        ]
    )
    llm = _llm(openai_server).bind_tools([get_weather])
    ai = llm.invoke("Weather in Paris?")
    assert ai.content == ""
    assert ai.response_metadata["finish_reason"] == "tool_calls"
    assert ai.tool_calls == [
        {
            "name": "get_weather",
            "args": {"city": "Paris", "unit": "c"},
            "id": "call_1",
            "type": "tool_call",
        }
    ]
    first = openai_server.chat_requests[-1]
    assert first.tools[0]["function"]["name"] == "get_weather"
    assert first.tools[0]["function"]["parameters"]["required"] == ["city"]

    result = get_weather.invoke(ai.tool_calls[0])
    assert isinstance(result, ToolMessage)
    final = llm.invoke([HumanMessage("Weather in Paris?"), ai, result])
    assert final.content == "The tool said: sunny in Paris"
    sent = openai_server.chat_requests[-1].messages
    assert sent[1]["tool_calls"][0]["id"] == "call_1"
    assert sent[2] == {"role": "tool", "content": "sunny in Paris", "tool_call_id": "call_1"}


def test_streamed_tool_calls_and_parallel_calls(openai_server: OpenAICompatServer) -> None:
    openai_server.responder = lambda req: Reply(
        content=None,
        tool_calls=[
            ToolCall("get_weather", {"city": "Oslo"}),
            ToolCall("get_weather", {"city": "Rome", "unit": "f"}),
        ],
    )
    llm = _llm(openai_server).bind_tools([get_weather], tool_choice="any")
    chunks = list(llm.stream("two cities"))
    assert len(chunks) > 3
    full: AIMessageChunk = chunks[0]
    for c in chunks[1:]:
        full = full + c
    assert [(tc["name"], tc["args"]) for tc in full.tool_calls] == [
        ("get_weather", {"city": "Oslo"}),
        ("get_weather", {"city": "Rome", "unit": "f"}),
    ]
    assert openai_server.chat_requests[-1].tool_choice == "required"


# -- init_chat_model / env --------------------------------------------------------------


def test_init_chat_model_reads_env(openai_server: OpenAICompatServer) -> None:
    from langchain.chat_models import init_chat_model

    model = init_chat_model("openai:gpt-5.4", max_retries=0)
    assert model.invoke("hello from init_chat_model").content == (
        "Echo: hello from init_chat_model"
    )
    # ChatOpenAI with no base_url / api_key also goes to the local server
    assert ChatOpenAI(model="gpt-5-mini").invoke("plain").content == "Echo: plain"
    reqs = openai_server.chat_requests
    assert [r.model for r in reqs] == ["gpt-5.4", "gpt-5-mini"]
    assert openai_server.requests[-1].headers["authorization"] == f"Bearer {OPENAI_TEST_API_KEY}"


def test_models_endpoint(openai_server: OpenAICompatServer) -> None:
    client = openai.OpenAI()  # from the env the fixture set
    ids = [m.id for m in client.models.list()]
    assert "gpt-5.4" in ids and "text-embedding-3-small" in ids
    assert client.models.retrieve("gpt-5.4").id == "gpt-5.4"
    with pytest.raises(openai.NotFoundError):
        client.models.retrieve("no-such-model")


# -- errors -----------------------------------------------------------------------------


def test_errors_reach_the_client(openai_server: OpenAICompatServer) -> None:
    llm = _llm(openai_server)

    def rate_limited(req: ChatRequest):
        raise OpenAIError("slow down", status=429, type="rate_limit_error")

    openai_server.responder = rate_limited
    with pytest.raises(openai.RateLimitError, match="slow down"):
        llm.invoke("x")

    openai_server.responder = lambda req: 1 / 0
    with pytest.raises(openai.BadRequestError, match="ZeroDivisionError"):
        llm.invoke("x")
    assert "ZeroDivisionError" in openai_server.errors[-1]

    client = openai.OpenAI(base_url=openai_server.base_url, api_key="k", max_retries=0)
    with pytest.raises(openai.NotFoundError, match="not implemented"):
        client.responses.create(model="gpt-5.4", input="hi")


def test_api_key_is_enforced_when_configured() -> None:
    with OpenAICompatServer(api_key="right") as server:
        good = openai.OpenAI(base_url=server.base_url, api_key="right", max_retries=0)
        assert good.embeddings.create(model="m", input="x").data[0].embedding
        bad = openai.OpenAI(base_url=server.base_url, api_key="wrong", max_retries=0)
        with pytest.raises(openai.AuthenticationError):
            bad.chat.completions.create(model="m", messages=[{"role": "user", "content": "x"}])


# -- embeddings -------------------------------------------------------------------------


def test_langchain_embeddings_dimensions(openai_server: OpenAICompatServer) -> None:
    emb = OpenAIEmbeddings(
        model="text-embedding-3-small",
        dimensions=256,
        check_embedding_ctx_length=False,
        base_url=openai_server.base_url,
        api_key="k",
        max_retries=0,
    )
    docs = emb.embed_documents(
        [
            "Qdrant stores dense vectors and sparse BM25 vectors",
            "Qdrant stores sparse BM25 vectors and dense vectors too",
            "Bananas are yellow fruit",
        ]
    )
    query = emb.embed_query("Where are BM25 sparse vectors stored? Qdrant")
    assert [len(v) for v in docs] == [256, 256, 256] and len(query) == 256
    assert all(abs(math.sqrt(sum(x * x for x in v)) - 1.0) < 1e-5 for v in [*docs, query])
    assert _cos(docs[0], docs[1]) > 0.8
    assert abs(_cos(docs[0], docs[2])) < 0.5
    assert _cos(query, docs[0]) > _cos(query, docs[2])
    # the SDK asked for base64 (its default) and decoded it transparently
    assert openai_server.embedding_requests[0].body["encoding_format"] == "base64"
    assert openai_server.embedding_requests[0].body["dimensions"] == 256


def test_embeddings_default_dimension_from_env(openai_server: OpenAICompatServer) -> None:
    emb = OpenAIEmbeddings(model="text-embedding-3-small", check_embedding_ctx_length=False)
    assert len(emb.embed_query("hello")) == 1536


def test_embeddings_float_base64_and_token_inputs(openai_server: OpenAICompatServer) -> None:
    client = openai.OpenAI(base_url=openai_server.base_url, api_key="k", max_retries=0)
    as_b64 = client.embeddings.create(model="m", input=["alpha beta", "gamma"], dimensions=32)
    as_float = client.embeddings.create(
        model="m", input=["alpha beta", "gamma"], dimensions=32, encoding_format="float"
    )
    expected = hashed_bow_embed(["alpha beta", "gamma"], 32)
    for got_b64, got_float, want in zip(as_b64.data, as_float.data, expected, strict=True):
        assert got_float.embedding == pytest.approx(want)
        assert got_b64.embedding == pytest.approx(want, abs=1e-6)  # float32 round trip
    assert [d.index for d in as_float.data] == [0, 1]

    single = client.embeddings.create(model="m", input="alpha beta", dimensions=32)
    assert single.data[0].embedding == pytest.approx(expected[0], abs=1e-6)
    tokens = client.embeddings.create(model="m", input=[[1, 2, 3], [4, 5]], dimensions=16)
    assert [len(d.embedding) for d in tokens.data] == [16, 16]
    one_token_list = client.embeddings.create(model="m", input=[7, 8], dimensions=16)
    assert len(one_token_list.data) == 1


def test_pluggable_embedder(openai_server: OpenAICompatServer) -> None:
    class FixedEmbeddings:  # anything with embed_documents, e.g. a LangChain Embeddings
        def embed_documents(self, texts):
            return [[float(len(t)), 1.0, 0.0] for t in texts]

    openai_server.embed = FixedEmbeddings()
    emb = OpenAIEmbeddings(model="m", check_embedding_ctx_length=False)
    assert emb.embed_documents(["abc", "hello"]) == [[3.0, 1.0, 0.0], [5.0, 1.0, 0.0]]

    openai_server.embed = lambda texts, dims: [[0.5] * dims for _ in texts]
    assert (
        OpenAIEmbeddings(model="m", dimensions=4, check_embedding_ctx_length=False).embed_query("q")
        == [0.5] * 4
    )


# -- pure helpers -----------------------------------------------------------------------


def test_minimal_instance_and_default_responder() -> None:
    schema = {
        "type": "object",
        "properties": {
            "a": {"type": "integer", "exclusiveMinimum": 3},
            "b": {"anyOf": [{"type": "null"}, {"$ref": "#/$defs/B"}]},
            "c": {"type": ["string", "null"], "format": "date-time"},
            "d": {"type": "array", "items": {"type": "number"}, "minItems": 2},
            "e": {"enum": ["x", "y"]},
            "f": {"type": "number", "maximum": -1},
            "opt": {"type": "string"},
        },
        "required": ["a", "b", "c", "d", "e", "f"],
        "$defs": {"B": {"type": "object", "properties": {"z": {"const": 7}}, "required": ["z"]}},
    }
    assert minimal_instance(schema) == {
        "a": 4,
        "b": {"z": 7},
        "c": "1970-01-01T00:00:00Z",
        "d": [0.0, 0.0],
        "e": "x",
        "f": -1.0,
    }
    req = ChatRequest(
        {"model": "m", "messages": [{"role": "user", "content": [{"type": "text", "text": "hi"}]}]}
    )
    assert default_responder(req) == "Echo: hi"


def test_first_token_delay_usage_and_times_are_logged(openai_server: OpenAICompatServer) -> None:
    openai_server.responder = lambda req: "one two three"
    openai_server.first_token_delay = 0.2
    chunks = list(_llm(openai_server, stream_usage=True).stream("count"))
    assert "".join(str(c.content) for c in chunks) == "one two three"
    plain = _llm(openai_server).invoke("count again")
    assert plain.content == "one two three"
    streamed, whole = openai_server.chat_records
    for record in (streamed, whole):
        assert record.first_token_at - record.received_at >= 0.2
        assert record.usage == {
            "prompt_tokens": 2 if record is streamed else 3,
            "completion_tokens": 3,
            "total_tokens": 5 if record is streamed else 6,
        }
    openai_server.reset()
    assert openai_server.first_token_delay == 0.0

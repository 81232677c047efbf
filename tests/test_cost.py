"""What a turn costs, over real HTTP: calls, tokens and times per role in the trace and in
``result.usage``; the grade prompt holds only the cited passages; inline grading makes one
call; no call whose result is unused (titles, a rewrite after the last attempt); under
``astream`` the answer's first token arrives before the grade is even asked for."""

from __future__ import annotations

import json
import time
import warnings
from typing import Any

import pytest
from langgraph.checkpoint.memory import InMemorySaver

from retrievalagent.persistence import question_title
from tests.servers.openai_compat import ChatRequest, Reply

pytestmark = pytest.mark.timeout(120)

DOCS = [
    "# Vault encryption\n\nThe vault encrypts every chunk with AES-256-GCM. The passphrase is "
    "stretched with Argon2id using 64 MiB of memory and three passes. "
    + "Key material never leaves the client machine. "
    * 20,
    "# Snapshots\n\nA snapshot of the vault is taken every six hours and kept for thirty days.",
    "# Recovery sheet\n\nThe recovery sheet holds the 24-word seed that restores a lost vault.",
    "# Error codes\n\nLF-409 means the vault is locked by another process.",
    "# Verify\n\nlantern verify --deep reads every chunk in the vault and checks its hash.",
]
QUESTION = "How is the vault passphrase stretched and what cipher encrypts chunks?"
GOOD = {
    "sufficient": True,
    "confidence": 0.9,
    "memory_worth_storing": False,
    "memory_confidence": 0.0,
    "memory_fact": "",
}
BAD = {**GOOD, "sufficient": False, "confidence": 0.1}


def role(request: ChatRequest) -> str:
    system = request.system_prompt
    if system.startswith("Name a conversation"):
        return "title"
    if system.startswith("A search over the user's documents"):
        return "rewrite"
    if request.json_schema is not None:
        return "inline" if "answer" in request.json_schema.get("properties", {}) else "grade"
    return "answer"


def roles(server: Any) -> list[str]:
    return [role(r) for r in server.chat_requests]


def cite(number_of: str = "Vault encryption") -> Any:
    """An answer citing the passage whose heading is ``number_of``, by its number."""

    def answer(request: ChatRequest) -> str:
        for line in request.system_prompt.splitlines():
            if line.startswith("[") and number_of in line:
                return f"Argon2id stretches it and AES-256-GCM encrypts chunks {line.split()[0]}."
        return "The passages do not say."

    return answer


def responder(answer: Any = None, grades: list[dict[str, Any]] | None = None) -> Any:
    script = list(grades or [GOOD])
    answer = cite() if answer is None else answer

    def respond(request: ChatRequest) -> Any:
        kind = role(request)
        if kind == "grade":
            return script.pop(0) if len(script) > 1 else script[0]
        if kind == "rewrite":
            return "vault key derivation"
        if kind == "title":
            return "Vault crypto"
        text = answer(request) if callable(answer) else answer
        return {"answer": text, **GOOD} if kind == "inline" else text

    return respond


@pytest.fixture
def agent(make_agent: Any, openai_server: Any) -> Any:
    def build(collection: str = "cost", **settings: Any) -> Any:
        rag = make_agent(collection, model="openai:gpt-5.4", **settings)
        rag.add_documents(DOCS)
        return rag

    return build


def usage_of(state: Any, node: str) -> list[dict[str, Any]]:
    return [e["usage"] for e in state.trace if e["node"] == node and "usage" in e]


def test_trace_and_result_show_calls_tokens_and_times_per_role(agent, openai_server) -> None:
    openai_server.responder = responder(grades=[BAD, GOOD])
    state = agent().invoke(QUESTION)
    assert roles(openai_server) == ["answer", "grade", "rewrite", "answer", "grade"]
    served = [r.usage for r in openai_server.chat_records]
    answers, grades = usage_of(state, "generate"), usage_of(state, "final_grade")
    [rewrite] = usage_of(state, "rewrite")
    for event, usage in zip([answers[0], grades[0], rewrite], served[:3], strict=True):
        assert event["calls"] == 1 and event["estimated"] is False and event["ms"] > 0
        assert event["input_tokens"] == usage["prompt_tokens"]  # as the provider reported
        assert event["output_tokens"] == usage["completion_tokens"]
    assert (answers[0]["role"], grades[0]["role"], rewrite["role"]) == (
        "answer",
        "grade",
        "rewrite",
    )
    totals = state.usage
    assert set(totals) == {"answer", "grade", "rewrite", "total"}
    assert totals["answer"]["calls"] == 2 and totals["grade"]["calls"] == 2
    assert totals["total"]["calls"] == len(served) == 5
    assert totals["total"]["input_tokens"] == sum(u["prompt_tokens"] for u in served)
    assert totals["total"]["output_tokens"] == sum(u["completion_tokens"] for u in served)
    assert totals["total"]["estimated"] is False


def test_streamed_answer_reports_usage_and_a_silent_provider_is_estimated(
    agent, openai_server
) -> None:
    openai_server.responder = responder()
    rag = agent()
    events = list(rag.stream(QUESTION))
    result = events[-1]["result"]
    answer_request = openai_server.chat_records[0]
    assert answer_request.body["stream"] is True
    assert answer_request.body["stream_options"] == {"include_usage": True}
    [answer] = usage_of(result, "generate")
    assert answer["input_tokens"] == answer_request.usage["prompt_tokens"]
    assert answer["estimated"] is False

    openai_server.reset()
    zero = {"prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0}

    def silent(request: ChatRequest) -> Any:  # a provider that reports no usage
        reply = responder()(request)
        text = reply if isinstance(reply, str) else json.dumps(reply)
        return Reply(content=text, usage=zero)

    openai_server.responder = silent
    state = rag.invoke(QUESTION)
    [answer] = usage_of(state, "generate")
    system = openai_server.chat_requests[0].system_prompt
    assert answer["estimated"] is True and state.usage["total"]["estimated"] is True
    # about 4 characters a token, from the prompt the agent sent
    assert abs(answer["input_tokens"] - (len(system) + len(QUESTION)) / 4) < 10


async def test_astream_streams_the_answer_only_and_warns_of_nothing(agent, openai_server) -> None:
    """Under astream the grade (a structured reply read once complete) is one whole
    response: streaming it bought nothing and, over the OpenAI client, logged a pydantic
    serializer warning in the user's console."""
    openai_server.responder = responder()
    rag = agent()
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # any warning fails the turn
        events = [event async for event in rag.astream(QUESTION)]
    result = events[-1]["result"]
    assert [e for e in result["trace"] if e.get("error")] == []
    assert any(e["type"] == "token" for e in events)
    streamed = {
        role(ChatRequest(r.body)): bool(r.body.get("stream")) for r in openai_server.chat_records
    }
    assert streamed == {"answer": True, "grade": False}
    [grade] = usage_of(result, "final_grade")
    assert grade["estimated"] is False and grade["input_tokens"] > 0


async def test_the_whole_reply_calls_still_reach_astream_events(agent, openai_server) -> None:
    """Keeping the grade out of the token stream must not hide it from LangChain's event
    stream (tracing, astream_events): only LangGraph's token handler is left out."""
    openai_server.responder = responder()
    rag = agent()
    payload, run = rag.graph_args(QUESTION)
    events = [
        e["event"]
        async for e in rag.graph.astream_events(payload, run, version="v2")
        if e["event"].startswith("on_chat_model")
    ]
    assert events.count("on_chat_model_start") == events.count("on_chat_model_end") == 2


def test_grade_prompt_holds_only_the_cited_passages_trimmed(agent, openai_server) -> None:
    openai_server.responder = responder(answer=cite("Vault encryption"))
    state = agent().invoke(QUESTION)
    answer_prompt = openai_server.chat_requests[0].system_prompt
    numbered = [ln for ln in answer_prompt.splitlines() if ln[:1] == "[" and "] " in ln]
    assert len(numbered) >= 3  # the answer saw several passages ...
    grade_prompt = "\n".join(openai_server.chat_requests[1].texts())
    cited = next(ln for ln in numbered if "Vault encryption" in ln)
    assert state.answer.endswith(cited.split()[0] + ".")
    assert cited in grade_prompt  # ... the grade sees the one it cites, numbered as cited
    for other in numbered:
        if other != cited:
            assert other not in grade_prompt
    body = grade_prompt.split(cited, 1)[1].split("\n\nAnswer:", 1)[0].strip()
    assert body.endswith("…") and len(body) <= 602  # trimmed to ~600 characters
    assert QUESTION in grade_prompt and state.answer in grade_prompt
    answer_chars = sum(len(t) for t in openai_server.chat_requests[0].texts())
    assert len(grade_prompt) < 0.5 * answer_chars


def test_an_answer_citing_nothing_is_graded_without_passages(agent, openai_server) -> None:
    openai_server.responder = responder(answer="I could not find that.", grades=[BAD])
    state = agent(max_retries=0).invoke(QUESTION)
    grade_prompt = "\n".join(openai_server.chat_requests[1].texts())
    assert "(the answer cites no passage)" in grade_prompt
    assert "Argon2id" not in grade_prompt
    assert state.events("final_grade")[0]["sufficient"] is False


@pytest.mark.parametrize("streamed", [False, True], ids=["invoke", "stream"])
def test_inline_grading_makes_one_call_per_sufficient_turn(
    agent, openai_server, streamed: bool
) -> None:
    openai_server.responder = responder()
    rag = agent(grading="inline")
    if streamed:
        events = list(rag.stream(QUESTION))
        state = events[-1]["result"]
        tokens = "".join(e["text"] for e in events if e["type"] == "token")
        assert tokens == state.answer  # the answer's words, never the JSON around them
    else:
        state = rag.invoke(QUESTION)
    assert roles(openai_server) == ["inline"]
    assert state.answer.startswith("Argon2id stretches it") and "{" not in state.answer
    [grade] = state.events("final_grade")
    assert grade["grading"] == "inline" and grade["sufficient"] is True
    assert grade["confidence"] == 0.9 and "usage" not in grade
    assert set(state.usage) == {"answer", "total"} and state.usage["total"]["calls"] == 1
    prompt = openai_server.chat_requests[0]
    assert next(iter(prompt.json_schema["properties"])) == "answer"  # answer, then grade
    assert {"sufficient", "memory_fact"} <= set(prompt.json_schema["properties"])


def test_inline_reply_that_does_not_parse_falls_back_to_answer_and_grade(
    agent, openai_server
) -> None:
    def respond(request: ChatRequest) -> Any:
        if role(request) == "inline":
            return "this is not JSON"
        return responder()(request)

    openai_server.responder = respond
    state = agent(grading="inline").invoke(QUESTION)
    assert roles(openai_server) == ["inline", "answer", "grade"]
    assert state.answer.startswith("Argon2id stretches it")
    [generate] = state.events("generate")
    assert generate["fallback"] == "separate" and generate["usage"]["calls"] == 2
    assert state.events("final_grade")[0]["sufficient"] is True


def test_titles_cost_no_call_unless_asked(agent, openai_server) -> None:
    openai_server.responder = responder()
    config = {"configurable": {"thread_id": "t-1"}}
    state = agent(checkpointer=InMemorySaver()).invoke(QUESTION, config=config)
    assert "title" not in roles(openai_server) and state.title == question_title(QUESTION)
    assert "usage" not in state.events("prepare")[0]

    openai_server.reset()
    openai_server.responder = responder()
    rag = agent("titled", checkpointer=InMemorySaver(), thread_title="llm")
    state = rag.invoke(QUESTION, config=config)
    assert roles(openai_server) == ["title", "answer", "grade"]
    assert state.title == "Vault crypto"
    assert state.events("prepare")[0]["usage"]["role"] == "title"
    assert state.usage["title"]["calls"] == 1


@pytest.mark.parametrize("max_retries", [0, 1, 2])
def test_no_rewrite_after_the_last_attempt(agent, openai_server, max_retries: int) -> None:
    openai_server.responder = responder(grades=[BAD])
    rewrites = iter(["vault key derivation", "argon2 memory cost"])

    def respond(request: ChatRequest) -> Any:
        if role(request) == "rewrite":
            return next(rewrites)
        return responder(grades=[BAD])(request)

    openai_server.responder = respond
    state = agent(max_retries=max_retries).invoke(QUESTION)
    expected = ["answer", "grade"] + ["rewrite", "answer", "grade"] * max_retries
    assert roles(openai_server) == expected
    assert state.usage["total"]["calls"] == len(expected)


async def test_astream_yields_the_first_token_before_the_grade_is_requested(
    agent, openai_server
) -> None:
    openai_server.responder = responder()
    openai_server.first_token_delay = 0.3
    rag = agent()
    await rag.ainvoke("warm up")  # first-call costs (connections, schema) out of the way
    seen = len(openai_server.chat_records)
    start, first = time.perf_counter(), None
    async for event in rag.astream(QUESTION):
        if event["type"] == "token" and first is None:
            first = time.perf_counter()
    answer, grade = openai_server.chat_records[seen:]
    assert role(ChatRequest(grade.body)) == "grade"
    assert first is not None and first < grade.received_at
    model_first_token = answer.first_token_at - answer.received_at
    assert model_first_token >= 0.3
    # nothing but retrieval (and the trip to the server) stands before the model's first token
    assert first - start < (answer.received_at - start) + model_first_token + 0.05

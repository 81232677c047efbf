"""Model faults over real HTTP: transient errors are retried with back-off a bounded number
of times, then a clear ``ModelError``; a grade that does not parse is graded conservatively.

The model is langchain-openai's ``ChatOpenAI`` talking to the local OpenAI-compatible
server (tests/servers/openai_compat.py), whose responder answers 429/5xx on demand; the
timeout and connection-reset cases use a slow responder and a socket that resets.
"""

from __future__ import annotations

import itertools
import socket
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from langgraph.checkpoint.memory import MemorySaver
from langgraph.store.memory import InMemoryStore

from retrievalagent import ModelError
from retrievalagent.models import RetryPolicy, is_transient
from tests.servers.openai_compat import ChatRequest, OpenAIError

DOCS = [
    "Lanternfish listens on port 7311 by default; change it with --port.",
    "The vault passphrase is stretched with Argon2id using 64 MiB of memory.",
]
QUESTION = "Which port does Lanternfish listen on?"
ANSWER = "Lanternfish listens on port 7311 [1]."
GOOD_GRADE = {
    "sufficient": True,
    "confidence": 0.9,
    "memory_worth_storing": True,
    "memory_confidence": 0.95,
    "memory_fact": '"listening port" is called "port" in these documents',
}
BACKOFF = 0.05


class Script:
    """A responder: the first ``fail`` calls of a kind get ``error``, then real replies."""

    def __init__(self, fail: int = 0, error: Callable[[], Exception] | None = None,
                 kind: str = "answer", grade: Any = GOOD_GRADE) -> None:  # fmt: skip
        self.fail, self.kind, self.grade = fail, kind, grade
        self.error = error or (lambda: OpenAIError("Rate limit reached", 429, "rate_limit_error"))
        self.calls: dict[str, list[float]] = {"answer": [], "grade": [], "rewrite": []}
        self._lock = threading.Lock()

    def __call__(self, request: ChatRequest) -> Any:
        kind = "grade" if request.json_schema is not None else "answer"
        if "search query" in request.system_prompt.lower():
            kind = "rewrite"
        with self._lock:
            self.calls[kind].append(time.monotonic())
            failing = kind == self.kind and len(self.calls[kind]) <= self.fail
        if failing:
            raise self.error()
        if kind == "grade":
            return self.grade
        if kind == "rewrite":
            return "lanternfish port number"
        return ANSWER


@pytest.fixture
def llm_agent(make_agent: Callable[..., Any], openai_server: Any) -> Callable[..., Any]:
    def build(script: Script, **kwargs: Any) -> Any:
        openai_server.responder = script
        kwargs.setdefault("model", "openai:gpt-5.4")
        kwargs.setdefault("model_backoff", BACKOFF)
        rag = make_agent("model-faults", **kwargs)
        rag.add_documents(DOCS, progress=False)
        return rag

    return build


def _gaps(times: list[float]) -> list[float]:
    return [b - a for a, b in itertools.pairwise(times)]


# -- transient errors --------------------------------------------------------------------------
@pytest.mark.parametrize("status", [429, 500, 503])
def test_transient_error_is_retried_then_the_answer_comes(
    llm_agent: Callable[..., Any], status: int
) -> None:
    script = Script(fail=2, error=lambda: OpenAIError(f"upstream {status}", status, "server_error"))
    rag = llm_agent(script, model_retries=3)
    state = rag.invoke(QUESTION)
    assert state.answer == ANSWER
    # exactly 3 HTTP requests: the client's own retries are off for a model built from a
    # string, so RAG_MODEL_RETRIES is the only retry policy (no 3 x 3 multiplication)
    assert len(script.calls["answer"]) == 3
    first, second = _gaps(script.calls["answer"])
    assert first >= 0.5 * BACKOFF and second >= BACKOFF  # 50-100% of 0.05, then of 0.1


async def test_async_path_retries_the_same_way(llm_agent: Callable[..., Any]) -> None:
    script = Script(fail=2)
    rag = llm_agent(script, model_retries=2)
    state = await rag.ainvoke(QUESTION)
    assert state.answer == ANSWER and len(script.calls["answer"]) == 3


@pytest.mark.parametrize("use_async", [False, True], ids=["invoke", "ainvoke"])
async def test_retries_are_bounded_then_a_clear_error(
    llm_agent: Callable[..., Any], use_async: bool
) -> None:
    script = Script(fail=100, error=lambda: OpenAIError("The server is overloaded", 503))
    store = InMemoryStore()
    rag = llm_agent(
        script,
        model_retries=3,
        memory_store=store,
        checkpointer=MemorySaver(),
        thread_title="question",
    )
    config = {"configurable": {"thread_id": "t-bounded", "user_id": "alice"}}
    start = time.monotonic()
    with pytest.raises(ModelError) as caught:
        await rag.ainvoke(QUESTION, config) if use_async else rag.invoke(QUESTION, config)
    elapsed = time.monotonic() - start
    err = caught.value
    assert "gpt-5.4" in str(err) and "answer" in str(err) and "after 4 attempt(s)" in str(err)
    assert "InternalServerError" in str(err) or "503" in str(err)
    assert (err.model, err.role, err.attempts) == ("gpt-5.4", "answer", 4)
    assert isinstance(err.__cause__, Exception) and err.original is err.__cause__
    assert len(script.calls["answer"]) == 4  # 1 + 3 retries, then stop
    gaps = _gaps(script.calls["answer"])
    assert gaps[0] >= 0.5 * BACKOFF and gaps[1] >= BACKOFF and gaps[2] >= 2 * BACKOFF
    assert elapsed < 5.0  # 0.05 + 0.1 + 0.2 at most, plus HTTP
    assert rag.drain_background(timeout=5) == {"landed": 0, "failed": 0, "pending": 0}
    assert store.search(("memories", "alice")) == []  # nothing written from a failed turn
    history = rag.get_history("t-bounded")
    assert not any(m.type == "ai" for m in history)  # no (silent, wrong) answer was kept


def test_non_transient_error_is_not_retried(llm_agent: Callable[..., Any]) -> None:
    script = Script(fail=100, error=lambda: OpenAIError("Incorrect API key provided", 401))
    rag = llm_agent(script, model_retries=3)
    with pytest.raises(ModelError, match=r"gpt-5\.4.*not retried") as caught:
        rag.invoke(QUESTION)
    assert caught.value.attempts == 1 and len(script.calls["answer"]) == 1
    assert "Incorrect API key" in str(caught.value.original)  # kept for debugging


def test_model_timeout_is_retried(make_agent: Callable[..., Any], openai_server: Any) -> None:
    from langchain_openai import ChatOpenAI

    calls: list[float] = []

    def slow_then_fast(request: ChatRequest) -> Any:
        calls.append(time.monotonic())
        if request.json_schema is not None:
            return GOOD_GRADE
        if len(calls) == 1:
            time.sleep(1.5)  # longer than the client's timeout
        return ANSWER

    openai_server.responder = slow_then_fast
    model = ChatOpenAI(model="gpt-5.4", timeout=0.5, max_retries=0)
    rag = make_agent("model-timeout", model=model, model_backoff=BACKOFF)
    rag.add_documents(DOCS, progress=False)
    state = rag.invoke(QUESTION)
    assert state.answer == ANSWER and len(calls) >= 3  # timed out, retried, then graded


class ResettingServer:
    """A TCP port that accepts connections and resets them at once (RST)."""

    def __init__(self) -> None:
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.port = self.sock.getsockname()[1]
        self.accepted = 0
        self._stop = False
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        while not self._stop:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            self.accepted += 1
            conn.recv(65536)
            conn.setsockopt(
                socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00"
            )
            conn.close()

    def close(self) -> None:
        self._stop = True
        self.sock.close()


@pytest.fixture
def resetting() -> Iterator[ResettingServer]:
    server = ResettingServer()
    yield server
    server.close()


def test_connection_reset_is_retried_then_a_clear_error(
    make_agent: Callable[..., Any], resetting: ResettingServer
) -> None:
    from langchain_openai import ChatOpenAI

    model = ChatOpenAI(
        model="gpt-5.4",
        base_url=f"http://127.0.0.1:{resetting.port}/v1",
        api_key="sk-reset-test",
        max_retries=0,
    )
    rag = make_agent("model-reset", model=model, model_retries=2, model_backoff=BACKOFF)
    rag.add_documents(DOCS, progress=False)
    with pytest.raises(ModelError, match=r"after 3 attempt\(s\).*ConnectionError") as caught:
        rag.invoke(QUESTION)
    assert caught.value.attempts == 3 and resetting.accepted == 3


# -- the grader -------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "bad",
    ["this is not JSON at all", {"sufficient": "maybe"}, {**GOOD_GRADE, "confidence": 7}],
    ids=["not-json", "wrong-type", "out-of-range"],
)
@pytest.mark.parametrize("use_async", [False, True], ids=["invoke", "ainvoke"])
async def test_unparsable_grade_is_conservative_and_traced(
    llm_agent: Callable[..., Any], bad: Any, use_async: bool
) -> None:
    store = InMemoryStore()
    rag = llm_agent(Script(grade=bad), memory_store=store, max_retries=0)
    config = {"configurable": {"user_id": "alice"}}
    state = await rag.ainvoke(QUESTION, config) if use_async else rag.invoke(QUESTION, config)
    assert state.answer == ANSWER  # the answer still comes back ...
    (grade,) = [e for e in state.trace if e["node"] == "final_grade"]
    assert grade["fallback"] == "conservative" and grade["error_type"]
    assert grade["sufficient"] is False and grade["confidence"] == 0.0  # ... marked unsure
    assert grade["memory_should_store"] is False and grade["memory_confidence"] == 0.0
    (write,) = [e for e in state.trace if e["node"] == "write_memory"]
    assert write["skipped"] == "not_worth_storing"
    assert rag.drain_background(timeout=5)["landed"] == 1  # the exchange, not a fact
    assert store.search(("memories", "alice")) == []
    assert len(store.search(("conversations", "alice"))) == 1


def test_grader_rate_limit_is_retried(llm_agent: Callable[..., Any]) -> None:
    script = Script(fail=1, kind="grade")
    rag = llm_agent(script, memory_store=InMemoryStore())
    state = rag.invoke(QUESTION, {"configurable": {"user_id": "alice"}})
    (grade,) = [e for e in state.trace if e["node"] == "final_grade"]
    assert "error" not in grade and grade["memory_should_store"] is True
    assert len(script.calls["grade"]) == 2


def test_grader_unreachable_fails_the_turn(llm_agent: Callable[..., Any]) -> None:
    """Decision: a grader that cannot be reached (after its retries) fails the turn with
    ModelError like the answer does; an ungraded answer is not passed off as graded."""
    script = Script(fail=100, kind="grade", error=lambda: OpenAIError("Bad gateway", 502))
    rag = llm_agent(script, model_retries=1, memory_store=InMemoryStore())
    with pytest.raises(ModelError) as caught:
        rag.invoke(QUESTION, {"configurable": {"user_id": "alice"}})
    assert caught.value.role == "grade" and caught.value.attempts == 2
    assert rag.drain_background(timeout=5)["landed"] == 0


def test_rewriter_unreachable_fails_the_turn(llm_agent: Callable[..., Any]) -> None:
    unsure = {**GOOD_GRADE, "sufficient": False, "confidence": 0.1, "memory_worth_storing": False}
    script = Script(
        fail=100, kind="rewrite", grade=unsure, error=lambda: OpenAIError("Rate limit", 429)
    )
    rag = llm_agent(script, model_retries=1, max_retries=1)
    with pytest.raises(ModelError) as caught:
        rag.invoke(QUESTION)
    assert caught.value.role == "rewrite" and len(script.calls["rewrite"]) == 2


# -- the policy itself ------------------------------------------------------------------------
def test_backoff_doubles_with_jitter_and_is_capped() -> None:
    policy = RetryPolicy(retries=5, backoff=0.5, max_backoff=3.0)
    for attempt, base in enumerate([0.5, 1.0, 2.0, 3.0, 3.0]):
        delays = [policy.delay(attempt) for _ in range(200)]
        assert all(0.5 * base <= d <= base for d in delays)
        assert max(delays) - min(delays) > 0.1 * base  # jittered, not a fixed value


def test_retry_after_header_is_honoured_up_to_the_cap() -> None:
    import httpx
    import openai

    request = httpx.Request("POST", "http://127.0.0.1/v1/chat/completions")
    response = httpx.Response(429, headers={"retry-after": "2"}, request=request)
    exc = openai.RateLimitError("slow down", response=response, body=None)
    assert RetryPolicy(backoff=0.01, max_backoff=5).delay(0, exc) == 2.0
    assert RetryPolicy(backoff=0.01, max_backoff=1).delay(0, exc) == 1.0


def test_what_counts_as_transient() -> None:
    import httpx
    import openai
    from pydantic import BaseModel, ValidationError

    request = httpx.Request("POST", "http://127.0.0.1/v1/chat/completions")

    def status(code: int) -> openai.APIStatusError:
        return openai.APIStatusError("x", response=httpx.Response(code, request=request), body=None)

    class M(BaseModel):
        x: int

    try:
        M(x="nope")  # type: ignore[arg-type]
    except ValidationError as exc:
        validation = exc
    transient = [status(429), status(500), status(503), status(408),
                 openai.APITimeoutError(request=request),
                 openai.APIConnectionError(request=request),
                 httpx.ConnectError("refused"), ConnectionResetError(), TimeoutError()]  # fmt: skip
    permanent = [status(400), status(401), status(404), validation, ValueError("bad json")]
    assert all(is_transient(e) for e in transient)
    assert not any(is_transient(e) for e in permanent)

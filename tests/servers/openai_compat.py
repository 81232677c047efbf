"""A local OpenAI-compatible HTTP server for tests.

It speaks enough of the OpenAI REST API for the real ``openai`` SDK, ``langchain-openai``
and mem0's OpenAI LLM/embedder to work against it over a real socket:

* ``POST /v1/chat/completions`` -- plain and streamed (SSE) replies, ``response_format``
  ``json_schema`` / ``json_object``, ``tools`` / ``tool_choice``, ``stream_options``.
* ``POST /v1/embeddings`` -- string / list / token-id inputs, ``float`` or ``base64``.
* ``GET /v1/models`` and ``GET /v1/models/{id}``.

Every chat reply reports ``usage`` (in the final stream chunk when ``stream_options``
include it); tokens are counted as words of the messages, so two prompts compare fairly.
``first_token_delay`` (seconds) holds back the first token of every chat reply, like a
hosted model's time to first token, and every request is logged with its usage and times
(``requests``, ``chat_requests``), so tests and benchmarks can count calls and prompt sizes.

What the "model" says comes from a *responder*: any callable taking a :class:`ChatRequest`
and returning a ``str`` (the content), a ``dict``/``list``/pydantic model (sent as JSON
text), a :class:`ToolCall` (or a list of them), a :class:`Reply`, or raising/returning an
:class:`OpenAIError`. Embeddings come from ``embed(texts, dimensions)`` or any object with
``embed_documents(texts)`` (a LangChain ``Embeddings``).

Usage::

    with OpenAICompatServer(responder=ScriptedResponder(["hello", {"ok": True}])) as srv:
        llm = ChatOpenAI(model="gpt-5.4", base_url=srv.base_url, api_key="sk-test")
"""

from __future__ import annotations

import asyncio
import base64
import collections
import hashlib
import itertools
import json
import math
import re
import threading
import time
import traceback
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from pydantic import BaseModel
from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from tests.servers._thread_server import ThreadedUvicorn

__all__ = [
    "DEFAULT_EMBEDDING_DIMENSIONS",
    "DEFAULT_MODELS",
    "ChatRequest",
    "OpenAICompatServer",
    "OpenAIError",
    "RecordedRequest",
    "Reply",
    "ScriptedResponder",
    "ToolCall",
    "default_responder",
    "echo_text",
    "hashed_bow_embed",
    "minimal_instance",
]

DEFAULT_EMBEDDING_DIMENSIONS = 1536
DEFAULT_MODELS = (
    "gpt-5.4",
    "gpt-5-mini",
    "gpt-4o-mini",
    "text-embedding-3-small",
    "text-embedding-3-large",
)


# --------------------------------------------------------------------------------------
# Replies
# --------------------------------------------------------------------------------------


@dataclass
class ToolCall:
    """A function call the assistant makes. ``arguments`` may be a dict or raw JSON text."""

    name: str
    arguments: dict[str, Any] | str = field(default_factory=dict)
    id: str | None = None

    def arguments_json(self) -> str:
        if isinstance(self.arguments, str):
            return self.arguments
        return json.dumps(self.arguments)


@dataclass
class Reply:
    """The full form of a reply: text and/or tool calls, optional finish reason / usage."""

    content: str | None = None
    tool_calls: list[ToolCall] = field(default_factory=list)
    finish_reason: str | None = None
    usage: dict[str, int] | None = None


class OpenAIError(Exception):
    """Raise (or return) from a responder to answer with an OpenAI-style error.

    Prefer 4xx codes in tests: the openai SDK retries 408/409/429/5xx (with back-off).
    """

    def __init__(
        self,
        message: str = "Bad request",
        status: int = 400,
        type: str = "invalid_request_error",
        code: str | None = None,
    ):
        super().__init__(message)
        self.message = message
        self.status = status
        self.type = type
        self.code = code

    def response(self) -> JSONResponse:
        return JSONResponse(
            {
                "error": {
                    "message": self.message,
                    "type": self.type,
                    "param": None,
                    "code": self.code,
                }
            },
            status_code=self.status,
        )


# --------------------------------------------------------------------------------------
# Requests
# --------------------------------------------------------------------------------------


@dataclass
class RecordedRequest:
    """One HTTP request the server received (``body`` is the parsed JSON, if any).

    Chat requests also carry what was answered: ``usage`` (as reported to the client),
    ``received_at`` and ``first_token_at`` (``time.perf_counter()`` when the request
    arrived and when the first token of its reply left), for counting and timing.
    """

    method: str
    path: str
    headers: dict[str, str]
    body: Any
    received_at: float = 0.0
    first_token_at: float | None = None
    usage: dict[str, int] | None = None


def _content_text(content: Any) -> str:
    """Text of a message ``content`` (a string or a list of content parts)."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = []
        for part in content:
            if isinstance(part, str):
                parts.append(part)
            elif isinstance(part, dict) and isinstance(part.get("text"), str):
                parts.append(part["text"])
        return "\n".join(parts)
    return str(content)


@dataclass
class ChatRequest:
    """A parsed ``/v1/chat/completions`` request, as handed to responders."""

    body: dict[str, Any]

    @property
    def model(self) -> str:
        return str(self.body.get("model", ""))

    @property
    def messages(self) -> list[dict[str, Any]]:
        return list(self.body.get("messages") or [])

    @property
    def response_format(self) -> dict[str, Any] | None:
        return self.body.get("response_format")

    @property
    def tools(self) -> list[dict[str, Any]]:
        return list(self.body.get("tools") or [])

    @property
    def tool_choice(self) -> Any:
        return self.body.get("tool_choice")

    @property
    def stream(self) -> bool:
        return bool(self.body.get("stream"))

    @property
    def json_schema(self) -> dict[str, Any] | None:
        """The JSON schema asked for with ``response_format={"type": "json_schema"}``."""
        rf = self.response_format
        if isinstance(rf, dict) and rf.get("type") == "json_schema":
            return (rf.get("json_schema") or {}).get("schema") or {}
        return None

    @property
    def wants_json(self) -> bool:
        rf = self.response_format
        return isinstance(rf, dict) and rf.get("type") in ("json_schema", "json_object")

    def texts(self, role: str | None = None) -> list[str]:
        return [
            _content_text(m.get("content"))
            for m in self.messages
            if role is None or m.get("role") == role
        ]

    @property
    def last_user_message(self) -> str:
        users = self.texts("user")
        return users[-1] if users else ""

    @property
    def system_prompt(self) -> str:
        return "\n".join(self.texts("system") + self.texts("developer"))

    def tool_schema(self, name: str) -> dict[str, Any] | None:
        for tool in self.tools:
            fn = tool.get("function") or {}
            if fn.get("name") == name:
                return fn.get("parameters") or {"type": "object", "properties": {}}
        return None

    @property
    def forced_tool(self) -> str | None:
        """Name of the tool the request forces (``tool_choice`` naming one, or required)."""
        choice = self.tool_choice
        if not self.tools or choice in (None, "auto", "none"):
            return None
        if isinstance(choice, dict):
            return (choice.get("function") or {}).get("name") or None
        if choice in ("required", "any"):
            return (self.tools[0].get("function") or {}).get("name")
        return None


Responder = Callable[[ChatRequest], Any]
EmbedFn = Callable[[list[str], int], Sequence[Sequence[float]]]


# --------------------------------------------------------------------------------------
# Default behaviour
# --------------------------------------------------------------------------------------

_FORMAT_EXAMPLES = {
    "date-time": "1970-01-01T00:00:00Z",
    "date": "1970-01-01",
    "time": "00:00:00",
    "uuid": "00000000-0000-0000-0000-000000000000",
    "email": "user@example.com",
    "uri": "https://example.com/",
    "url": "https://example.com/",
}


def _resolve_ref(ref: str, root: dict[str, Any]) -> dict[str, Any]:
    if not ref.startswith("#/"):
        raise ValueError(f"unsupported $ref {ref!r}")
    node: Any = root
    for part in ref[2:].split("/"):
        node = node[part.replace("~1", "/").replace("~0", "~")]
    return node


def _number_in_range(schema: dict[str, Any], integer: bool) -> float | int:
    lo = schema.get("minimum")
    hi = schema.get("maximum")
    xlo = schema.get("exclusiveMinimum")
    xhi = schema.get("exclusiveMaximum")
    step = 1 if integer else 0.5
    value: float = 0
    if lo is not None and value < lo:
        value = lo
    if xlo is not None and value <= xlo:
        value = xlo + step if integer else (xlo + (hi if hi is not None else xlo + 1)) / 2
    if hi is not None and value > hi:
        value = hi
    if xhi is not None and value >= xhi:
        value = xhi - step if integer else (xhi + (lo if lo is not None else xhi - 1)) / 2
    return math.ceil(value) if integer else float(value)


def minimal_instance(
    schema: dict[str, Any] | bool, root: dict[str, Any] | None = None, _depth: int = 0
) -> Any:
    """Build a small value that validates against a JSON schema (as pydantic emits them).

    Handles ``$ref``/``$defs``, ``anyOf``/``oneOf``/``allOf``, ``const``, ``enum``,
    ``default``, objects (required properties only), arrays (``minItems``), strings
    (``minLength``, common ``format`` values), numbers (bounds) and booleans.
    """
    if schema is True or schema is False or not schema:
        return None
    root = root if root is not None else schema  # type: ignore[assignment]
    assert isinstance(schema, dict)
    if "$ref" in schema:
        return minimal_instance(_resolve_ref(schema["$ref"], root), root, _depth + 1)
    if "const" in schema:
        return schema["const"]
    if schema.get("enum"):
        return schema["enum"][0]
    if "default" in schema:
        return schema["default"]
    for key in ("anyOf", "oneOf"):
        if schema.get(key):
            options = schema[key]
            non_null = [o for o in options if not (isinstance(o, dict) and o.get("type") == "null")]
            # deep in a recursive schema, prefer null to stop the recursion
            if _depth > 8 and len(non_null) < len(options):
                return None
            return minimal_instance(non_null[0] if non_null else options[0], root, _depth + 1)
    if schema.get("allOf"):
        merged: dict[str, Any] = {}
        for part in schema["allOf"]:
            part = _resolve_ref(part["$ref"], root) if "$ref" in part else part
            for k, v in part.items():
                if k in ("properties",) and k in merged:
                    merged[k] = {**merged[k], **v}
                elif k == "required" and k in merged:
                    merged[k] = [*merged[k], *v]
                else:
                    merged[k] = v
        rest = {k: v for k, v in schema.items() if k != "allOf"}
        return minimal_instance({**merged, **rest}, root, _depth + 1)

    typ = schema.get("type")
    if isinstance(typ, list):
        non_null = [t for t in typ if t != "null"]
        if not non_null:
            return None
        typ = non_null[0]
    if typ is None:
        if "properties" in schema or "required" in schema:
            typ = "object"
        elif "items" in schema:
            typ = "array"
        else:
            return None

    if typ == "object":
        props = schema.get("properties") or {}
        out: dict[str, Any] = {}
        for name in schema.get("required") or []:
            out[name] = minimal_instance(props.get(name, {}), root, _depth + 1)
        return out
    if typ == "array":
        n = int(schema.get("minItems") or 0)
        prefix = schema.get("prefixItems") or []
        items: list[Any] = [minimal_instance(p, root, _depth + 1) for p in prefix]
        item_schema = schema.get("items")
        while len(items) < n:
            items.append(minimal_instance(item_schema or {}, root, _depth + 1))
        return items
    if typ == "string":
        fmt = schema.get("format")
        if fmt in _FORMAT_EXAMPLES:
            return _FORMAT_EXAMPLES[fmt]
        return "x" * int(schema.get("minLength") or 0)
    if typ == "integer":
        return int(_number_in_range(schema, integer=True))
    if typ == "number":
        return float(_number_in_range(schema, integer=False))
    if typ == "boolean":
        return False
    return None


def echo_text(request: ChatRequest) -> str:
    """The default plain-text answer: deterministic, short, and quotes the question."""
    question = " ".join(request.last_user_message.split())
    if len(question) > 200:
        question = question[:197] + "..."
    return f"Echo: {question}"


def default_responder(request: ChatRequest) -> Any:
    """Minimal valid structured output / forced tool call; otherwise an echo of the question."""
    forced = request.forced_tool
    if forced:
        schema = request.tool_schema(forced) or {}
        return ToolCall(name=forced, arguments=minimal_instance(schema) or {})
    schema = request.json_schema
    if schema is not None:
        value = minimal_instance(schema)
        return value if value is not None else {}
    if request.wants_json:  # json_object
        return {"answer": echo_text(request)}
    return echo_text(request)


class ScriptedResponder:
    """Replies from a queue, in order; each item is a reply value or a callable(request).

    When the queue is empty it uses ``fallback`` (default: :func:`default_responder`), or
    raises an :class:`OpenAIError` if ``fallback=None``. Thread-safe.
    """

    def __init__(self, replies: Iterable[Any] = (), fallback: Responder | None = default_responder):
        self._queue: collections.deque[Any] = collections.deque(replies)
        self._lock = threading.Lock()
        self.fallback = fallback
        self.calls: list[ChatRequest] = []

    def push(self, *replies: Any) -> ScriptedResponder:
        with self._lock:
            self._queue.extend(replies)
        return self

    @property
    def remaining(self) -> int:
        return len(self._queue)

    def __call__(self, request: ChatRequest) -> Any:
        with self._lock:
            self.calls.append(request)
            item = self._queue.popleft() if self._queue else _EMPTY
        if item is _EMPTY:
            if self.fallback is None:
                raise OpenAIError("ScriptedResponder: no scripted reply left", status=400)
            return self.fallback(request)
        if callable(item) and not isinstance(item, (ToolCall, Reply, type)):
            return item(request)
        return item


_EMPTY = object()


_TOKEN_RE = re.compile(r"\w+", re.UNICODE)
# fmt: off
_STOPWORDS = frozenset({
    "a", "an", "and", "are", "as", "at", "be", "but", "by", "do", "does", "for", "from",
    "has", "have", "how", "i", "in", "is", "it", "its", "of", "on", "or", "that", "the",
    "this", "to", "was", "were", "what", "when", "where", "which", "who", "why", "will",
    "with", "you", "your",
})
# fmt: on


def _hash64(token: str) -> int:
    return int.from_bytes(hashlib.blake2b(token.encode("utf-8"), digest_size=8).digest(), "little")


def hashed_bow_embed(texts: list[str], dimensions: int) -> list[list[float]]:
    """Deterministic signed hashed bag-of-words vectors, L2-normalised.

    Lower-cased word tokens (stop words dropped unless nothing else is left) are hashed into
    ``dimensions`` buckets with a hash-derived sign, so texts sharing words get a high
    cosine similarity and unrelated texts get ~0.
    """
    out = []
    for text in texts:
        tokens = _TOKEN_RE.findall(text.lower())
        content = [t for t in tokens if t not in _STOPWORDS] or tokens or ["<empty>"]
        vec = np.zeros(dimensions, dtype=np.float64)
        for tok in content:
            h = _hash64(tok)
            vec[h % dimensions] += 1.0 if (h >> 63) & 1 else -1.0
        norm = float(np.linalg.norm(vec))
        if norm == 0.0:  # every token cancelled out: fall back to one fixed bucket
            vec[_hash64("<empty>") % dimensions] = 1.0
            norm = 1.0
        out.append((vec / norm).tolist())
    return out


def _word_count(text: str) -> int:
    return len(text.split())


def _split_stream(text: str) -> list[str]:
    """Split text into word-ish pieces (leading whitespace kept) that join back exactly."""
    pieces = re.findall(r"\s*\S+", text)
    rest = text[len("".join(pieces)) :]
    if rest:
        pieces.append(rest)
    return pieces


# --------------------------------------------------------------------------------------
# The server
# --------------------------------------------------------------------------------------


class OpenAICompatServer:
    """An OpenAI-compatible server on ``127.0.0.1`` (port 0 = a free port).

    Attributes you can change at any time: ``responder``, ``embed``,
    ``embedding_dimensions`` (used when a request has no ``dimensions``), ``models``.
    """

    def __init__(
        self,
        responder: Responder | None = None,
        embed: EmbedFn | Any | None = None,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        api_key: str | None = None,
        embedding_dimensions: int = DEFAULT_EMBEDDING_DIMENSIONS,
        models: Iterable[str] = DEFAULT_MODELS,
        first_token_delay: float = 0.0,
    ):
        self.responder: Responder = responder or default_responder
        #: Seconds every chat reply waits before its first token (streamed or not).
        self.first_token_delay = first_token_delay
        self.embed: EmbedFn | Any = embed or hashed_bow_embed
        self.embedding_dimensions = embedding_dimensions
        self.models = list(models)
        self.api_key = api_key
        self._initial = (
            self.responder,
            self.embed,
            embedding_dimensions,
            list(self.models),
            first_token_delay,
        )
        self.requests: list[RecordedRequest] = []
        self.errors: list[str] = []
        self._lock = threading.Lock()
        self._ids = itertools.count(1)
        self._uvicorn = ThreadedUvicorn(self._build_app(), host, port, name="openai-compat")

    # -- lifecycle ---------------------------------------------------------------------

    def start(self) -> OpenAICompatServer:
        self._uvicorn.start()
        return self

    def stop(self) -> None:
        self._uvicorn.stop()

    def __enter__(self) -> OpenAICompatServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def host(self) -> str:
        return self._uvicorn.host

    @property
    def port(self) -> int:
        if self._uvicorn.port is None:
            raise RuntimeError("server not started")
        return self._uvicorn.port

    @property
    def url(self) -> str:
        """``http://127.0.0.1:PORT`` (no ``/v1``)."""
        return f"http://{self.host}:{self.port}"

    @property
    def base_url(self) -> str:
        """``http://127.0.0.1:PORT/v1`` -- what OpenAI clients take as ``base_url``."""
        return f"{self.url}/v1"

    def reset(self) -> None:
        """Forget recorded requests; restore the responder, embedder, dimensions and models
        the server was constructed with."""
        with self._lock:
            self.requests.clear()
            self.errors.clear()
        responder, embed, dimensions, models, delay = self._initial
        self.responder, self.embed = responder, embed
        self.embedding_dimensions, self.models = dimensions, list(models)
        self.first_token_delay = delay

    # -- recorded traffic ----------------------------------------------------------------

    @property
    def chat_requests(self) -> list[ChatRequest]:
        with self._lock:
            return [
                ChatRequest(r.body)
                for r in self.requests
                if r.path.endswith("/chat/completions") and isinstance(r.body, dict)
            ]

    @property
    def chat_records(self) -> list[RecordedRequest]:
        """The chat requests as recorded: body, ``usage``, arrival and first-token times."""
        with self._lock:
            return [
                r
                for r in self.requests
                if r.path.endswith("/chat/completions") and isinstance(r.body, dict)
            ]

    @property
    def embedding_requests(self) -> list[RecordedRequest]:
        with self._lock:
            return [r for r in self.requests if r.path.endswith("/embeddings")]

    # -- app -----------------------------------------------------------------------------

    def _build_app(self) -> Starlette:
        routes = [
            Route("/v1/chat/completions", self._chat, methods=["POST"]),
            Route("/chat/completions", self._chat, methods=["POST"]),
            Route("/v1/embeddings", self._embeddings, methods=["POST"]),
            Route("/embeddings", self._embeddings, methods=["POST"]),
            Route("/v1/models", self._list_models, methods=["GET"]),
            Route("/v1/models/{model_id:path}", self._get_model, methods=["GET"]),
            Route(
                "/{path:path}",
                self._not_found,
                methods=["GET", "POST", "PUT", "PATCH", "DELETE"],
            ),
        ]
        return Starlette(routes=routes)

    async def _record(self, request: Request) -> RecordedRequest:
        raw = await request.body()
        body: Any = None
        if raw:
            try:
                body = json.loads(raw)
            except ValueError:
                body = raw.decode("utf-8", "replace")
        rec = RecordedRequest(
            request.method,
            request.url.path,
            dict(request.headers),
            body,
            received_at=time.perf_counter(),
        )
        with self._lock:
            self.requests.append(rec)
        return rec

    def _auth_error(self, rec: RecordedRequest) -> Response | None:
        if self.api_key is None:
            return None
        if rec.headers.get("authorization") != f"Bearer {self.api_key}":
            return OpenAIError(
                "Incorrect API key provided.", status=401, code="invalid_api_key"
            ).response()
        return None

    async def _not_found(self, request: Request) -> Response:
        rec = await self._record(request)
        return OpenAIError(
            f"{rec.method} {rec.path} is not implemented by the test server "
            "(chat completions, embeddings and models only; no Responses API)",
            status=404,
            code="unknown_url",
        ).response()

    async def _list_models(self, request: Request) -> Response:
        await self._record(request)
        return JSONResponse({"object": "list", "data": [self._model_card(m) for m in self.models]})

    async def _get_model(self, request: Request) -> Response:
        await self._record(request)
        model_id = request.path_params["model_id"]
        if model_id not in self.models:
            return OpenAIError(
                f"The model `{model_id}` does not exist", status=404, code="model_not_found"
            ).response()
        return JSONResponse(self._model_card(model_id))

    @staticmethod
    def _model_card(model_id: str) -> dict[str, Any]:
        return {"id": model_id, "object": "model", "created": 0, "owned_by": "tests"}

    # -- chat ----------------------------------------------------------------------------

    def _normalise(self, result: Any) -> Reply:
        if isinstance(result, OpenAIError):
            raise result
        if result is None:
            return Reply(content="")
        if isinstance(result, Reply):
            return result
        if isinstance(result, ToolCall):
            return Reply(tool_calls=[result])
        if (
            isinstance(result, (list, tuple))
            and result
            and all(isinstance(r, ToolCall) for r in result)
        ):
            return Reply(tool_calls=list(result))
        if isinstance(result, str):
            return Reply(content=result)
        if isinstance(result, BaseModel):
            return Reply(content=result.model_dump_json())
        if isinstance(result, (dict, list, tuple, int, float, bool)):
            return Reply(content=json.dumps(result))
        raise TypeError(f"responder returned an unsupported value: {result!r}")

    def _respond(self, chat: ChatRequest) -> Reply:
        return self._normalise(self.responder(chat))

    async def _chat(self, request: Request) -> Response:
        rec = await self._record(request)
        if (err := self._auth_error(rec)) is not None:
            return err
        if not isinstance(rec.body, dict) or not rec.body.get("messages"):
            return OpenAIError(
                "'messages' is required", code="missing_required_parameter"
            ).response()
        chat = ChatRequest(rec.body)
        try:
            reply = await run_in_threadpool(self._respond, chat)
        except OpenAIError as exc:
            return exc.response()
        except Exception as exc:
            # A broken responder is a test bug: answer 400 (the SDK does not retry it) with
            # the traceback, so the failure names its cause instead of timing out.
            tb = traceback.format_exc()
            with self._lock:
                self.errors.append(tb)
            return OpenAIError(f"test responder raised {exc!r}\n{tb}", status=400).response()

        model = chat.model or "gpt-test"
        completion_id = f"chatcmpl-test{next(self._ids)}"
        created = int(time.time())
        tool_calls = [
            {
                "id": tc.id or f"call_test{next(self._ids)}",
                "type": "function",
                "function": {"name": tc.name, "arguments": tc.arguments_json()},
            }
            for tc in reply.tool_calls
        ]
        content = reply.content
        if content is None and not tool_calls:
            content = ""
        finish_reason = reply.finish_reason or ("tool_calls" if tool_calls else "stop")
        prompt_tokens = sum(_word_count(t) for t in chat.texts()) + 1
        completion_tokens = _word_count(content or "") + sum(
            _word_count(tc["function"]["arguments"]) + 1 for tc in tool_calls
        )
        usage = reply.usage or {
            "prompt_tokens": prompt_tokens,
            "completion_tokens": completion_tokens,
            "total_tokens": prompt_tokens + completion_tokens,
        }
        rec.usage = dict(usage)
        delay = max(0.0, float(self.first_token_delay or 0.0))

        if not chat.stream:
            if delay:
                await asyncio.sleep(delay)
            rec.first_token_at = time.perf_counter()
            message: dict[str, Any] = {"role": "assistant", "content": content, "refusal": None}
            if tool_calls:
                message["tool_calls"] = tool_calls
            return JSONResponse(
                {
                    "id": completion_id,
                    "object": "chat.completion",
                    "created": created,
                    "model": model,
                    "system_fingerprint": "fp_test",
                    "choices": [
                        {
                            "index": 0,
                            "message": message,
                            "logprobs": None,
                            "finish_reason": finish_reason,
                        }
                    ],
                    "usage": usage,
                }
            )

        include_usage = bool((rec.body.get("stream_options") or {}).get("include_usage"))

        def chunk(delta: dict[str, Any], finish: str | None = None) -> str:
            payload: dict[str, Any] = {
                "id": completion_id,
                "object": "chat.completion.chunk",
                "created": created,
                "model": model,
                "system_fingerprint": "fp_test",
                "choices": [
                    {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}
                ],
            }
            if include_usage:
                payload["usage"] = None
            return f"data: {json.dumps(payload)}\n\n"

        async def events():
            yield chunk({"role": "assistant", "content": "", "refusal": None})
            if delay:
                await asyncio.sleep(delay)
            for i, piece in enumerate(_split_stream(content or "")):
                if i == 0:
                    rec.first_token_at = time.perf_counter()
                yield chunk({"content": piece})
            if rec.first_token_at is None:
                rec.first_token_at = time.perf_counter()
            for index, tc in enumerate(tool_calls):
                yield chunk(
                    {
                        "tool_calls": [
                            {
                                "index": index,
                                "id": tc["id"],
                                "type": "function",
                                "function": {"name": tc["function"]["name"], "arguments": ""},
                            }
                        ]
                    }
                )
                for piece in _split_stream(tc["function"]["arguments"]):
                    yield chunk(
                        {"tool_calls": [{"index": index, "function": {"arguments": piece}}]}
                    )
            yield chunk({}, finish_reason)
            if include_usage:
                final = {
                    "id": completion_id,
                    "object": "chat.completion.chunk",
                    "created": created,
                    "model": model,
                    "system_fingerprint": "fp_test",
                    "choices": [],
                    "usage": usage,
                }
                yield f"data: {json.dumps(final)}\n\n"
            yield "data: [DONE]\n\n"

        return StreamingResponse(
            events(),
            media_type="text/event-stream",
            headers={"Cache-Control": "no-cache"},
        )

    # -- embeddings ----------------------------------------------------------------------

    def _embed(self, texts: list[str], dimensions: int) -> list[list[float]]:
        embed = self.embed
        if hasattr(embed, "embed_documents"):
            vectors = embed.embed_documents(texts)
        else:
            vectors = embed(texts, dimensions)
        return [[float(x) for x in v] for v in vectors]

    async def _embeddings(self, request: Request) -> Response:
        rec = await self._record(request)
        if (err := self._auth_error(rec)) is not None:
            return err
        body = rec.body if isinstance(rec.body, dict) else {}
        raw_input = body.get("input")
        if raw_input is None or raw_input == [] or raw_input == "":
            return OpenAIError("'input' must be a non-empty string or array").response()
        # string | [string] | [int] (one token list) | [[int]] (token lists)
        if isinstance(raw_input, str):
            items: list[Any] = [raw_input]
        elif isinstance(raw_input, list) and all(isinstance(x, int) for x in raw_input):
            items = [raw_input]
        else:
            items = list(raw_input)
        texts = [
            item if isinstance(item, str) else " ".join(f"tok{int(t)}" for t in item)
            for item in items
        ]
        dimensions = int(body.get("dimensions") or self.embedding_dimensions)
        try:
            vectors = await run_in_threadpool(self._embed, texts, dimensions)
        except Exception as exc:
            tb = traceback.format_exc()
            with self._lock:
                self.errors.append(tb)
            return OpenAIError(f"test embedder raised {exc!r}\n{tb}", status=400).response()

        encoding = body.get("encoding_format") or "float"
        data = []
        for i, vec in enumerate(vectors):
            if encoding == "base64":
                value: Any = base64.b64encode(np.asarray(vec, dtype="<f4").tobytes()).decode()
            else:
                value = vec
            data.append({"object": "embedding", "index": i, "embedding": value})
        tokens = sum(_word_count(t) for t in texts)
        return JSONResponse(
            {
                "object": "list",
                "data": data,
                "model": body.get("model", "text-embedding-3-small"),
                "usage": {"prompt_tokens": tokens, "total_tokens": tokens},
            }
        )

"""One settings object for every knob of an agent, and the only place env vars are read.

Each field of :class:`Settings` names its ``RAG_*`` variable, default, accepted values and
meaning in its metadata, so validation, error messages and the docs' configuration table all
come from the same declaration. Precedence: explicit argument > environment > default.
"""

from __future__ import annotations

import contextlib
import dataclasses
import math
import os
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from retrievalagent._inputs import MAX_TOP_K
from retrievalagent.errors import ConfigError

__all__ = [
    "FUSION_METHODS",
    "PER_CALL",
    "Settings",
    "call_settings",
    "check_collection",
    "default_data_dir",
    "env_table",
]

FUSION_METHODS = ("rrf", "weighted_rrf", "convex", "adaptive")
_COLLECTION = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")


def check_collection(collection: object) -> str:
    """``collection`` if it is a valid collection name: it becomes a folder name and a Qdrant
    collection name, so nothing that could climb out of the data dir gets through."""
    # fullmatch: "$" also matches before a final newline, which let "docs\n" through
    if not isinstance(collection, str) or not _COLLECTION.fullmatch(collection):
        shown = repr(collection)
        if len(shown) > 80:  # a server echoes what a client sent: not a megabyte of it
            shown = f"{shown[:60]}... ({len(collection) if isinstance(collection, str) else '?'} characters)"
        raise ConfigError(
            f"collection={shown} is invalid: expected 1-64 characters of letters, digits, "
            "'_', '-' or '.', starting with a letter or digit"
        )
    return collection


def default_data_dir() -> Path:
    """The per-user data directory (``~/.local/share/retrievalagent`` on Linux)."""
    import platformdirs

    return Path(platformdirs.user_data_dir("retrievalagent", appauthor=False))


def _knob(
    env: str,
    default: Any,
    doc: str,
    *,
    kind: type | tuple[type, ...],
    low: float | None = None,
    high: float | None = None,
    choices: tuple[str, ...] | None = None,
    optional: bool = False,
    secret: bool = False,
    per_call: bool = False,
) -> Any:
    return field(
        default=default,
        metadata={
            "env": env,
            "doc": doc,
            "kind": kind,
            "low": low,
            "high": high,
            "choices": choices,
            "optional": optional,
            "secret": secret,
            "per_call": per_call,
        },
    )


def _count(
    env: str, default: int | None, doc: str, low: int, high: int, *, per_call: bool = False
) -> Any:
    """A knob holding a whole number from ``low`` to ``high`` (a size, a count, a limit)."""
    return _knob(env, default, doc, kind=int, low=low, high=high, per_call=per_call)


def _fraction(env: str, default: float, doc: str) -> Any:
    """A knob holding a number from 0 to 1 (a weight, a confidence, a similarity)."""
    return _knob(env, default, doc, kind=float, low=0.0, high=1.0)


@dataclass(frozen=True, repr=False)
class Settings:
    """Every tunable of an agent. Build it with :meth:`Settings.load`; it is immutable."""

    # models and backends
    model: str | None = _knob(
        "RAG_MODEL",
        None,
        "Chat model as an `init_chat_model` string; unset = offline mode.",
        kind=str,
        optional=True,
    )
    embeddings: str | None = _knob(
        "RAG_EMBEDDINGS",
        None,
        "Embeddings as a `provider:model` string; unset = the packaged offline MiniLM model.",
        kind=str,
        optional=True,
    )
    backend: str = _knob("RAG_BACKEND", "qdrant", "Vector backend.", kind=str, choices=("qdrant",))
    backend_url: str | None = _knob(
        "RAG_BACKEND_URL",
        None,
        "Unset = embedded Qdrant on disk; `:memory:` = throwaway; `http(s)://...` = Qdrant server.",
        kind=str,
        optional=True,
    )
    qdrant_api_key: str | None = _knob(
        "RAG_QDRANT_API_KEY",
        None,
        "API key for a Qdrant server or cloud cluster.",
        kind=str,
        optional=True,
        secret=True,
    )
    data_dir: Path = _knob(
        "RAG_DATA_DIR",
        None,
        "Where embedded indexes and embedded mem0 live (default: the per-user data dir).",
        kind=Path,
    )
    # retrieval
    top_k: int = _count(
        "RAG_TOP_K", 5, "Passages given to the answer.", 1, MAX_TOP_K, per_call=True
    )
    fetch_k: int = _count(
        "RAG_FETCH_K",
        50,
        "Candidates each retriever returns before fusion (at least `top_k`).",
        1,
        1000,
        per_call=True,
    )
    fusion: str = _knob(
        "RAG_FUSION",
        "convex",
        "How the dense and BM25 lists are fused: `convex` (min-max normalised weighted sum), "
        "`adaptive` (convex, BM25 weight lowered for queries whose words the corpus lacks), "
        "`rrf`, `weighted_rrf`. Chosen by bench/quality.py on held-out queries.",
        kind=str,
        choices=FUSION_METHODS,
    )
    rrf_k: int = _count("RAG_RRF_K", 60, "The k constant of reciprocal rank fusion.", 1, 1000)
    dense_weight: float = _fraction(
        "RAG_DENSE_WEIGHT",
        0.5,
        "Weight of the dense list in weighted fusions (BM25 gets 1 - this).",
    )
    rerank_k: int = _count(
        "RAG_RERANK_K",
        20,
        "With a reranker (`init_agent(reranker=...)`): fused passages it reorders before "
        "the first `top_k` are kept.",
        1,
        200,
        per_call=True,
    )
    max_retries: int = _count(
        "RAG_MAX_RETRIES", 1, "Query rewrites after an insufficient answer.", 0, 5, per_call=True
    )
    min_confidence: float = _fraction(
        "RAG_MIN_CONFIDENCE",
        0.35,
        "Grader confidence below which an answer counts as insufficient.",
    )
    max_question_chars: int = _count(
        "RAG_MAX_QUESTION_CHARS",
        8000,
        "Longest question accepted (characters, after trimming); a longer one is a ValueError.",
        1,
        1_000_000,
    )
    # chat model calls
    model_retries: int = _count(
        "RAG_MODEL_RETRIES",
        3,
        "Retries of a chat-model call (answer, grade, rewrite) after a transient error "
        "(rate limit, timeout, connection error, 5xx); then the turn fails with ModelError. "
        "Models built from a string get the client's own retries turned off, so this is the "
        "only retry policy; a model instance keeps its client's retries (they multiply).",
        0,
        10,
    )
    model_backoff: float = _knob(
        "RAG_MODEL_BACKOFF",
        0.5,
        "Seconds before the first model retry; doubled per retry (at most 20 s), with jitter "
        "(each wait is 50-100% of that), or the server's Retry-After when it is longer.",
        kind=float,
        low=0.0,
        high=60.0,
    )
    grading: str = _knob(
        "RAG_GRADING",
        "separate",
        "How an LLM answer is graded: 'separate' streams the answer, then one grade call sees "
        "the question, the answer and the passages it cites; 'inline' makes ONE structured "
        "call that returns the answer with its grade (one round trip, about the answer's "
        "prompt alone; no answer tokens are streamed before the call ends, and the model "
        "grades its own answer in the same breath). Offline mode ignores it.",
        kind=str,
        choices=("separate", "inline"),
    )
    # ingestion
    chunk_size: int = _count(
        "RAG_CHUNK_SIZE", 1000, "Target chunk length in characters.", 100, 20000
    )
    chunk_overlap: int = _count(
        "RAG_CHUNK_OVERLAP", 120, "Characters shared by adjacent chunks.", 0, 5000
    )
    embed_batch_size: int = _count(
        "RAG_EMBED_BATCH_SIZE",
        8,
        "Texts per run of the embedding model. For the packaged model, 8 embedded ~14% "
        "faster than 32 on 2 cores and peaks near 0.6 GB instead of 1.6 GB.",
        1,
        4096,
    )
    ingest_window: int = _count(
        "RAG_INGEST_WINDOW",
        512,
        "Chunks embedded and written together during an ingest. Smaller windows show "
        "progress sooner and hold fewer vectors in memory; a file larger than a window is "
        "still committed all at once.",
        1,
        100_000,
    )
    # memory
    memory_relevance_threshold: float = _fraction(
        "RAG_MEMORY_RELEVANCE_THRESHOLD",
        0.7,
        "Minimum similarity a search fact needs to be recalled by meaning alone (one whose "
        "alias the question contains is always recalled; preferences always apply).",
    )
    memory_storage_threshold: float = _fraction(
        "RAG_MEMORY_STORAGE_THRESHOLD",
        0.85,
        "Minimum grader `memory_confidence` before a fact is written.",
    )
    memory_top_k: int = _count("RAG_MEMORY_TOP_K", 5, "Memories fetched per recall.", 1, 100)
    memory_timeout: float = _knob(
        "RAG_MEMORY_TIMEOUT",
        10.0,
        "Seconds a memory read or write may take before it is "
        "abandoned (the answer never waits longer).",
        kind=float,
        low=0.01,
        high=3600,
    )
    memory_max_preferences: int = _count(
        "RAG_MEMORY_MAX_PREFERENCES",
        20,
        "Most stored preferences applied to a user's answers (newest first, one per subject).",
        0,
        1000,
    )
    memory_term_weight: float = _knob(
        "RAG_MEMORY_TERM_WEIGHT",
        1.5,
        "Weight of a recalled fact's terms in the BM25 query, relative to the question's "
        "(above 1 so a long question does not drown the one word the corpus knows).",
        kind=float,
        low=0.0,
        high=10.0,
        per_call=True,
    )
    memory_scan_limit: int = _count(
        "RAG_MEMORY_SCAN_LIMIT",
        500,
        "Most recent memories per user scored client-side when the store has no vector index.",
        1,
        100000,
    )
    memory_conversations: bool = _knob(
        "RAG_MEMORY_CONVERSATIONS",
        True,
        "Conversation memory: keep what each user said in every answered turn (the "
        "exchange; with a model also facts about the user) and recall it in their later "
        "conversations. On by default because remembering earlier conversations is what "
        "long-term memory is for; `false` stores and recalls none of it (search facts and "
        "preferences are unaffected).",
        kind=bool,
    )
    conversation_relevance_threshold: float = _fraction(
        "RAG_CONVERSATION_RELEVANCE_THRESHOLD",
        0.15,
        "Minimum relevance of a past exchange to be recalled: 0.6 x its similarity to the "
        "question + 0.4 x the share of the question's word weight it holds (one said in "
        "the time the question names, 'last week', is recalled regardless). Chosen on "
        "bench/memory's dev half: see docs/benchmarks.md.",
    )
    conversation_top_k: int = _count(
        "RAG_CONVERSATION_TOP_K",
        8,
        "Most conversation memories recalled into one answer prompt.",
        0,
        100,
    )
    conversation_max_chars: int = _count(
        "RAG_CONVERSATION_MAX_CHARS",
        2300,
        "Most characters of conversation memory in one answer prompt, dates and titles "
        "included (each memory is cut to 400).",
        0,
        100_000,
    )
    max_pending_writes: int = _count(
        "RAG_MAX_PENDING_WRITES",
        256,
        "Background memory writes in flight before new ones wait for a free slot.",
        1,
        100000,
    )
    drain_timeout: float = _knob(
        "RAG_DRAIN_TIMEOUT",
        30.0,
        "Seconds the exit hook waits for pending memory writes.",
        kind=float,
        low=0.0,
        high=3600,
    )
    # conversations
    history_tokens: int = _count(
        "RAG_HISTORY_TOKENS",
        2000,
        "Token budget for conversation history sent to the model.",
        0,
        1_000_000,
    )
    max_thread_messages: int | None = _knob(
        "RAG_MAX_THREAD_MESSAGES",
        None,
        "Keep only the last N messages in a thread (FIFO); unset keeps everything.",
        kind=int,
        low=2,
        high=1_000_000,
        optional=True,
    )
    thread_title: str = _knob(
        "RAG_THREAD_TITLE",
        "question",
        "How a thread is titled at its first turn: 'question' uses the first question cut "
        "to 50 characters (no model call); 'llm' asks the chat model for a few words (one "
        "short extra call before retrieval; only with a model and a thread id).",
        kind=str,
        choices=("llm", "question"),
    )
    # observability
    trace_file: Path | None = _knob(
        "RAG_TRACE_FILE",
        None,
        "Append every turn's trace as one JSON line to this file.",
        kind=Path,
        optional=True,
    )
    # serving
    default_collection: str = _knob(
        "RAG_COLLECTION",
        "docs",
        "Collection used when none is named: CLI commands without `--collection` and the "
        "LangGraph Server graph (`retrievalagent.server`).",
        kind=str,
    )
    serve_collections: str | None = _knob(
        "RAG_SERVE_COLLECTIONS",
        None,
        "Comma-separated collections the LangGraph Server graph may answer from; unset = "
        "every collection that has an index. A run naming any other collection is refused "
        "before anything is opened or created.",
        kind=str,
        optional=True,
    )
    serve_max_agents: int = _count(
        "RAG_SERVE_MAX_AGENTS",
        4,
        "Agents a LangGraph Server worker keeps open (one per collection and memory choice, "
        "~130 MB each); the least recently used one is closed when another is needed, once "
        "its runs have finished.",
        1,
        1000,
    )

    def __post_init__(self) -> None:
        if self.data_dir is None:
            object.__setattr__(self, "data_dir", default_data_dir())
        if self.chunk_overlap >= self.chunk_size:
            raise ConfigError(
                f"chunk_overlap ({self.chunk_overlap}) must be smaller than chunk_size "
                f"({self.chunk_size})"
            )

    @classmethod
    def load(cls, env: Mapping[str, str] | None = None, **overrides: Any) -> Settings:
        """Settings from ``overrides`` (``None`` = not given), then ``env``, then defaults.

        Raises:
            ConfigError: an unknown override, or a value outside its accepted range; the
                message names the argument or the env var.
        """
        env = os.environ if env is None else env
        known = {f.name: f for f in dataclasses.fields(cls)}
        unknown = sorted(set(overrides) - set(known))
        if unknown:
            raise ConfigError(
                f"unknown setting(s) {', '.join(unknown)}; accepted: {', '.join(sorted(known))}"
            )
        values: dict[str, Any] = {}
        for name, f in known.items():
            meta = f.metadata
            if overrides.get(name) is not None:
                values[name] = _check(name, overrides[name], meta, source="argument")
            elif meta["env"] in env and env[meta["env"]].strip() != "":
                raw = env[meta["env"]].strip()
                values[name] = _check(
                    meta["env"], _parse(meta["env"], raw, meta), meta, source="environment variable"
                )
        return cls(**values)

    def replace(self, **changes: Any) -> Settings:
        """A copy with ``changes`` applied and validated."""
        fields = {f.name: f for f in dataclasses.fields(self)}
        checked: dict[str, Any] = {}
        for name, value in changes.items():
            if name not in fields:
                raise ConfigError(f"unknown setting {name!r}")
            checked[name] = (
                value if value is None else _check(name, value, fields[name].metadata, "argument")
            )
        return dataclasses.replace(self, **checked)

    def index_dir(self, collection: str) -> Path:
        """Where the embedded index of ``collection`` lives (the one place this path is built).

        Raises:
            ConfigError: ``collection`` is not a valid collection name.
        """
        return Path(self.data_dir) / check_collection(collection) / "index"

    def public_dict(self) -> dict[str, Any]:
        """The settings as plain values, secrets masked (for logs and `--trace` output)."""
        out: dict[str, Any] = {}
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            out[f.name] = _masked(value, f.metadata)
        return out

    def __repr__(self) -> str:
        shown = ", ".join(f"{name}={value!r}" for name, value in self.public_dict().items())
        return f"Settings({shown})"


#: The settings one call may set again in its ``config["configurable"]`` (a turn's
#: retrieval depth and ranking, and its rewrites); the others hold for every call, as the
#: agent was built. Marked ``per_call`` in the declarations above.
PER_CALL: tuple[str, ...] = tuple(
    f.name for f in dataclasses.fields(Settings) if f.metadata["per_call"]
)
_PER_CALL_META = {f.name: f.metadata for f in dataclasses.fields(Settings) if f.name in PER_CALL}


def call_settings(configurable: Mapping[str, Any] | None) -> dict[str, Any]:
    """The :data:`PER_CALL` settings a run's ``configurable`` sets (``None`` counts as not
    set), each checked as its ``Settings`` field is. Other keys (``thread_id``,
    ``user_id``, ...) belong to others and are left alone.

    Raises:
        ConfigError: a value its field refuses; the message names ``configurable.<name>``.
    """
    if not configurable:
        return {}
    return {
        name: _check(f"configurable.{name}", configurable[name], meta, "per-call setting")
        for name, meta in _PER_CALL_META.items()
        if configurable.get(name) is not None
    }


def _masked(value: Any, meta: Mapping[str, Any]) -> Any:
    """``value`` as logs, reprs and errors may show it: secrets as ``***``, URLs without
    their user info (``user:password@``) or query string."""
    if meta["secret"] and value:
        return "***"
    if isinstance(value, str) and "://" in value:
        from retrievalagent._inputs import redact_url

        return redact_url(value)
    return str(value) if isinstance(value, Path) else value


def _describe(meta: Mapping[str, Any]) -> str:
    if meta["choices"]:
        return "one of " + ", ".join(repr(c) for c in meta["choices"])
    kind = meta["kind"]
    name = {
        int: "an integer",
        float: "a number",
        str: "a string",
        Path: "a path",
        bool: "true or false",
    }.get(kind, "")
    low, high = meta["low"], meta["high"]
    if low is not None and high is not None:
        return f"{name} from {low:g} to {high:g}"
    return name


def _parse(env_name: str, raw: str, meta: Mapping[str, Any]) -> Any:
    kind = meta["kind"]
    try:
        if kind in (int, float) and (not raw.isascii() or "_" in raw):
            # Python's int() and float() read "1_0" as 10 and "٥" as 5; a config value
            # written like that is a typo, not a number.
            raise ValueError(raw)
        if kind is int:
            return int(raw)
        if kind is float:
            return float(raw)
        if kind is Path:
            return Path(raw).expanduser()
        if kind is bool:
            return _BOOLEANS[raw.lower()]
        return raw
    except (ValueError, RuntimeError, KeyError):  # RuntimeError: "~user" of an unknown user
        raise ConfigError(
            f"environment variable {env_name}={_shown(raw, meta)} is invalid: "
            f"expected {_describe(meta)}"
        ) from None


_BOOLEANS = {
    "1": True,
    "true": True,
    "yes": True,
    "on": True,
    "0": False,
    "false": False,
    "no": False,
    "off": False,
}


def _shown(value: Any, meta: Mapping[str, Any]) -> str:
    """A value as an error message shows it: secrets masked, long values cut."""
    shown = repr(_masked(value, meta))
    if len(shown) > 80:  # a 1 MB value must not make a 1 MB message
        shown = f"{shown[:60]}... ({len(shown)} characters)"
    return shown


def _as_path(value: Any) -> tuple[Any, str | None]:
    # TypeError: a PathLike giving bytes; RuntimeError: "~user" of an unknown user
    with contextlib.suppress(TypeError, RuntimeError):
        value = Path(value).expanduser() if isinstance(value, str | os.PathLike) else value
    if not isinstance(value, Path):
        return value, "expected a path"
    return value, "a path cannot contain NUL characters" if "\x00" in str(value) else None


def _as_float(value: Any) -> tuple[Any, str | None]:
    try:
        number = float(value) if isinstance(value, int | float) else math.nan
    except OverflowError:
        number = math.inf
    if isinstance(value, bool) or math.isnan(number):
        return value, "expected a number"
    return number, None


def _as_bool(value: Any) -> tuple[Any, str | None]:
    return value, None if isinstance(value, bool) else "expected True or False"


def _as_int(value: Any) -> tuple[Any, str | None]:
    if isinstance(value, bool) or not isinstance(value, int):
        return value, "expected an integer"
    return value, None


_CONVERTERS: dict[Any, Callable[[Any], tuple[Any, str | None]]] = {
    Path: _as_path,
    float: _as_float,
    int: _as_int,
    bool: _as_bool,
}


def _converted(value: Any, meta: Mapping[str, Any]) -> tuple[Any, str | None]:
    """``value`` as the field's kind, or the problem that prevents it."""
    kind = meta["kind"]
    if kind in _CONVERTERS:
        return _CONVERTERS[kind](value)
    return value, None if isinstance(value, kind) else f"expected {_describe(meta)}"


def _in_range(value: Any, meta: Mapping[str, Any]) -> bool:
    if meta["choices"] and value not in meta["choices"]:
        return False
    return meta["low"] is None or meta["low"] <= value <= meta["high"]


def _check(name: str, value: Any, meta: Mapping[str, Any], source: str) -> Any:
    value, problem = _converted(value, meta)
    if problem is None and not _in_range(value, meta):
        problem = f"expected {_describe(meta)}"
    if problem:
        raise ConfigError(f"{source} {name}={_shown(value, meta)} is invalid: {problem}")
    return value


def env_table() -> list[dict[str, str]]:
    """Rows of the configuration table in the docs: env var, setting, default, accepted,
    meaning, and whether a call may set it again (``per_call``)."""
    rows = []
    for f in dataclasses.fields(Settings):
        meta = f.metadata
        default = "per-user data dir" if f.name == "data_dir" else f.default
        rows.append(
            {
                "env": meta["env"],
                "setting": f.name,
                "default": "unset" if default is None else str(default),
                "accepted": _describe(meta) + (" (optional)" if meta["optional"] else ""),
                "meaning": meta["doc"],
                "per_call": "yes" if meta["per_call"] else "no",
            }
        )
    return rows

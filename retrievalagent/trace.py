"""The shape of a turn's trace: one TypedDict per node's event.

Every node appends one event to ``state.trace``. The types here say which keys each event
carries, when, and what they mean: the nodes build their events through them (so the
type checker holds the code to them), the table in the tracing docs is generated from
them, and a test runs real turns and checks that no event carries a key declared nowhere.

Each key is declared as ``Annotated[type, "what it means"]``; keys that only some turns
carry are ``NotRequired`` (or the class is ``total=False`` and the always-present keys are
``Required``). Keys may be added over time; none are renamed.

This module is deliberately written without ``from __future__ import annotations``: the
declarations are read at run time (by :func:`fields`), ``Required``/``NotRequired``
included.
"""

from typing import Annotated, Any, Literal, NamedTuple, get_args, get_origin

from typing_extensions import NotRequired, Required, TypedDict, get_type_hints

__all__ = [
    "EVENTS",
    "ConversationWrite",
    "DenseSearchEvent",
    "Field",
    "FinalGradeEvent",
    "FuseEvent",
    "GenerateEvent",
    "LexicalSearchEvent",
    "MemoryItem",
    "PrepareEvent",
    "ReadMemoryEvent",
    "RerankEvent",
    "RewriteEvent",
    "TimeWindow",
    "TraceEvent",
    "Usage",
    "UsageTotals",
    "WriteMemoryEvent",
    "fields",
]

_ERROR = "the exception's message (its kind when it has none)"
_ERROR_TYPE = 'with `error`: the exception\'s class name, or `"timeout"`'


class UsageTotals(TypedDict):
    """The model calls of one role (or of all of them): count, tokens and time."""

    calls: Annotated[int, "how many chat-model calls were made"]
    input_tokens: Annotated[int, "tokens sent (estimated when the provider reports none)"]
    output_tokens: Annotated[int, "tokens received (estimated when the provider reports none)"]
    ms: Annotated[float, "wall time of the calls, retries included"]
    estimated: Annotated[bool, "true when any call's tokens were estimated (4 characters a token)"]


class Usage(TypedDict, total=False):
    """What one node's chat-model calls cost (its event's ``usage``)."""

    calls: Required[Annotated[int, "how many chat-model calls the node made"]]
    input_tokens: Required[Annotated[int, "tokens sent (estimated when the provider reports none)"]]
    output_tokens: Required[
        Annotated[int, "tokens received (estimated when the provider reports none)"]
    ]
    ms: Required[Annotated[float, "wall time of the calls, retries included"]]
    estimated: Required[
        Annotated[bool, "true when any call's tokens were estimated (4 characters a token)"]
    ]
    role: Required[
        Annotated[
            str,
            "what the calls were for: `answer`, `grade`, `rewrite`, `title`, `rerank`, ... "
            "(`mixed` when the node made calls of more than one role)",
        ]
    ]
    by_role: Annotated[dict[str, UsageTotals], "with `role: mixed`: the same totals for each role"]


class MemoryItem(TypedDict, total=False):
    """One recalled memory as ``read_memory`` lists it."""

    id: Required[Annotated[str, "the memory's id in its backend"]]
    kind: Required[Annotated[str, "`search_fact`, `preference` or `conversation`"]]
    key: Required[Annotated[str, "its alias key (search fact) or subject (preference)"]]
    text: Required[Annotated[str, "the memory's text"]]
    score: Required[Annotated[float, "its relevance to the question, 0 to 1"]]
    matched: Required[
        Annotated[
            str,
            "why it was recalled: `alias`, `similarity`, `preference`, `conversation` or "
            "`window` (said in the time the question names)",
        ]
    ]
    thread_id: Annotated[str, "conversation memory: the thread it was said in"]
    at: Annotated[str, "conversation memory: when it was said (ISO 8601, UTC)"]
    relevance: Annotated[
        float,
        "conversation memory: the relevance `conversation_relevance_threshold` gates: by its "
        "own words, or an answer's by the question it answers (`score`, which orders, also "
        "counts what the exchange before it lends and, asked about now, its place in time)",
    ]


class TimeWindow(TypedDict):
    """The time a question names ("yesterday", "last time", "now"), as recall used it."""

    start: Annotated[str, 'start of the window (ISO 8601, UTC; `""` when there is none)']
    end: Annotated[str, "end of the window, exclusive"]
    sessions_back: Annotated[int, "how many conversations back (0 for a window)"]
    present: Annotated[bool, 'it asks how things stand now ("now", "still"): newer first']


class ConversationWrite(TypedDict, total=False):
    """What conversation memory does with the turn's exchange (``write_memory.conversation``)."""

    scheduled: Annotated[bool, "the exchange is being written in the background"]
    exchanges: Annotated[int, "how many records the exchange became"]
    secrets_masked: Annotated[int, "how many secrets were masked before storing"]
    facts: Annotated[bool, "whether facts about the user are drawn from it (a model call)"]
    skipped: Annotated[str, "why nothing is written: `off`, `no_answer`, `no_memory_backend`"]


class PrepareEvent(TypedDict, total=False):
    """``prepare``: the turn starts; the thread gets its title."""

    node: Required[Literal["prepare"]]
    user_id: Required[Annotated[str, "whose turn it is (memory reads and writes are theirs)"]]
    ms: Required[Annotated[float, "time the node took, in milliseconds"]]
    usage: Annotated[
        Usage, 'the title call, when a model names a new thread (`thread_title="llm"`)'
    ]


class ReadMemoryEvent(TypedDict, total=False):
    """``read_memory``: long-term memory recalled for the question."""

    node: Required[Literal["read_memory"]]
    memories: Required[
        Annotated[
            str,
            'what was recalled, one `- ` line each (conversation memory as `[day] text`); `""` '
            "when nothing was kept. `state.memory_context` has the prompt's exact text",
        ]
    ]
    items: Annotated[list[MemoryItem], "each memory kept, best first"]
    n_kept: Annotated[int, "how many memories were kept"]
    n_facts: Annotated[int, "of them, search facts"]
    n_preferences: Annotated[int, "of them, preferences"]
    n_conversations: Annotated[int, "of them, past exchanges (conversation memory)"]
    n_scanned: Annotated[
        int,
        "how many stored memories were looked at (search facts, and conversation memories found)",
    ]
    threshold: Annotated[float, "the relevance bar of search facts (`memory_relevance_threshold`)"]
    conversation_threshold: Annotated[
        float, "the relevance bar of past exchanges (`conversation_relevance_threshold`)"
    ]
    best_score: Annotated[
        float | None, "the best search fact's score, kept or not (what `tune` reads)"
    ]
    best_similarity: Annotated[
        float | None, "the best embedding similarity of a search fact, kept or not"
    ]
    best_conversation: Annotated[
        float | None,
        "the best relevance of a past exchange, as the conversation threshold reads it "
        "(see `MemoryItem.relevance`), kept or not",
    ]
    backend: Annotated[str, "the memory backend's name"]
    waited_for_writes_ms: Annotated[
        float, "time spent waiting for this user's previous writes to land (read-your-writes)"
    ]
    ms: Annotated[float, "time the node took, in milliseconds"]
    time: Annotated[TimeWindow, "when the question names a time"]
    skipped: Annotated[
        str,
        "why nothing was kept: `no_memory_backend`, `no_memories`, `below_threshold`, `error`",
    ]
    n_malformed: Annotated[
        int, "hits the backend returned that could not be used (no finite score, no text)"
    ]
    error: Annotated[str, f"the recall failed: {_ERROR}; the turn goes on without memory"]
    error_type: Annotated[str, _ERROR_TYPE]


class DenseSearchEvent(TypedDict):
    """``dense_search``: the nearest passages by embedding."""

    node: Literal["dense_search"]
    hits: Annotated[int, "how many passages were found"]
    embed_ms: Annotated[float, "time to embed the query (cached queries take ~0)"]
    search_ms: Annotated[float, "time of the vector search"]
    attempt: Annotated[int, "0 for the question, 1 and up for rewritten queries"]


class LexicalSearchEvent(TypedDict, total=False):
    """``lexical_search``: the best BM25 matches."""

    node: Required[Literal["lexical_search"]]
    hits: Required[Annotated[int, "how many passages were found"]]
    ms: Required[Annotated[float, "time the node took, in milliseconds"]]
    attempt: Required[Annotated[int, "0 for the question, 1 and up for rewritten queries"]]
    memory_terms: Annotated[str, "the recalled memories' terms added to the query, when any"]


class FuseEvent(TypedDict):
    """``fuse``: the two lists fused into the sources the answer cites."""

    node: Literal["fuse"]
    method: Annotated[str, "the fusion method (`rrf`, `weighted_rrf`, `convex`, `adaptive`)"]
    dense_hits: Annotated[int, "passages from the dense search"]
    lexical_hits: Annotated[int, "passages from the BM25 search"]
    fused: Annotated[int, "sources kept (at most `top_k`)"]
    ms: Annotated[
        float, "time of fusion and loading the winners' payloads (reranking not included)"
    ]
    top_sources: Annotated[list[str], "the `source` of the first three sources"]


class RerankEvent(TypedDict, total=False):
    """``rerank``: only with a reranker; the first ``rerank_k`` fused passages reordered."""

    node: Required[Literal["rerank"]]
    reranker: Required[Annotated[str, "the reranker's name"]]
    candidates: Required[Annotated[int, "how many passages it was given"]]
    moved: Annotated[int, "how many of them changed place"]
    ms: Annotated[float, "time the reranker took, in milliseconds"]
    attempt: Annotated[int, "0 for the question, 1 and up for rewritten queries"]
    top_sources: Annotated[list[str], "the `source` of the first three sources, after reranking"]
    usage: Annotated[Usage, 'the model call, with `reranker="llm"`']
    error: Annotated[str, f"the reranker failed: {_ERROR}"]
    error_type: Annotated[str, _ERROR_TYPE]
    fallback: Annotated[Literal["fused_order"], "after a failure: the fused order is kept"]


class GenerateEvent(TypedDict, total=False):
    """``generate``: the answer."""

    node: Required[Literal["generate"]]
    generated_by: Required[
        Annotated[str, "what wrote it: `llm:<model>`, or the offline extractive answerer"]
    ]
    llm: Required[Annotated[bool, "whether a language model wrote it"]]
    n_sources: Required[Annotated[int, "how many sources the answer was given"]]
    history_messages: Required[Annotated[int, "earlier messages of the thread it was given"]]
    search_hints: Required[Annotated[bool, "whether recalled memories were in the prompt"]]
    ms: Required[Annotated[float, "time the node took, in milliseconds"]]
    usage: Annotated[Usage, "the answer call, with a model"]
    grading: Annotated[
        Literal["inline"], 'with `grading="inline"`: the same call also graded the answer'
    ]
    error: Annotated[str, f"the inline reply could not be used: {_ERROR}"]
    error_type: Annotated[str, _ERROR_TYPE]
    fallback: Annotated[
        Literal["separate"], "after an unusable inline reply: answered, and graded, separately"
    ]


class FinalGradeEvent(TypedDict, total=False):
    """``final_grade``: the grader's verdict, and whether a memory is worth storing."""

    node: Required[Literal["final_grade"]]
    sufficient: Required[Annotated[bool, "whether the answer is supported and complete"]]
    confidence: Required[Annotated[float, "how sure the grader is, 0 to 1"]]
    memory_should_store: Required[
        Annotated[bool, "whether a memory will be stored (worth it, and confident enough)"]
    ]
    memory_confidence: Required[Annotated[float, "the grader's confidence in the memory, 0 to 1"]]
    memory_worth_storing: Required[Annotated[bool, "whether the grader proposed a memory at all"]]
    memory_kind: Required[
        Annotated[str, "the kind of memory proposed: `search_fact` or `preference`"]
    ]
    memory_key: Required[
        Annotated[
            str,
            "what the memory is about: the user's word a search fact explains, or a "
            'preference\'s subject (`""` when none)',
        ]
    ]
    storage_threshold: Required[
        Annotated[float, "the confidence a memory needs (`memory_storage_threshold`)"]
    ]
    attempt: Required[Annotated[int, "0 for the question, 1 and up for rewritten queries"]]
    ms: Required[Annotated[float, "time the node took, in milliseconds"]]
    usage: Annotated[Usage, "the grading call, with a model"]
    grading: Annotated[Literal["inline"], "the answer call already graded: no call here"]
    memory_fact_rejected: Annotated[
        str, "why the proposed memory was refused (longer than 300 characters)"
    ]
    error: Annotated[str, f"the grader's reply could not be used: {_ERROR}"]
    error_type: Annotated[str, _ERROR_TYPE]
    fallback: Annotated[
        Literal["conservative"], "after an unusable reply: graded not sufficient, nothing stored"
    ]


class RewriteEvent(TypedDict, total=False):
    """``rewrite``: a new query after an insufficient answer."""

    node: Required[Literal["rewrite"]]
    query: Required[Annotated[str | None, "the new query; null when there is none to run"]]
    ms: Required[Annotated[float, "time the node took, in milliseconds"]]
    attempt: Required[Annotated[int, "which retrieval the new query is (1 and up)"]]
    usage: Annotated[Usage, "the rewrite call, with a model"]
    repeated: Annotated[str, "a query the rewriter gave that was already tried (not run again)"]
    skipped: Annotated[str, "why no new search runs: `no_new_query`, `repeated_query`"]
    error: Annotated[str, f"the rewriter's reply could not be used: {_ERROR}"]
    error_type: Annotated[str, _ERROR_TYPE]


class WriteMemoryEvent(TypedDict, total=False):
    """``write_memory``: the turn's memory writes, scheduled in the background.

    A background write that fails later adds a second, late ``write_memory`` event to the
    turn's record in the trace file (``late``, ``fact``, ``error``, ``error_type``).
    """

    node: Required[Literal["write_memory"]]
    scheduled: Annotated[bool, "a search fact or preference is being written"]
    backend: Annotated[str, "with `scheduled`: the memory backend's name"]
    kind: Annotated[
        str, "with `scheduled`: the kind of the memory written, `search_fact` or `preference`"
    ]
    key: Annotated[
        str,
        "with `scheduled`: its alias key or subject; a newer memory with the same key "
        "replaces the older",
    ]
    fact: Annotated[
        str, "the memory's text (scheduled or already known); in a late event, what failed"
    ]
    also: Annotated[
        list[str],
        "with a preference: the other preferences the same message states (a grade holds "
        "one; the offline rules find the rest when they find the grade's), written beside "
        "it, also when it is `already_known`",
    ]
    skipped: Annotated[
        str,
        "why no memory is written: `no_memory_backend`, `not_worth_storing`, "
        "`below_threshold`, `fact_too_long`, `already_known`",
    ]
    memory_confidence: Annotated[
        float,
        "skipped for the grade's sake (`not_worth_storing`, `below_threshold`, "
        "`fact_too_long`): the grader's confidence in the memory",
    ]
    threshold: Annotated[
        float,
        "with `memory_confidence`: the confidence a memory needs (`memory_storage_threshold`)",
    ]
    conversation: Annotated[
        ConversationWrite, "with a memory backend: what conversation memory does with the exchange"
    ]
    mode: Annotated[
        Literal["thread", "task"],
        "when anything was scheduled: how the writes run (a thread, or an asyncio task with a "
        "natively async backend)",
    ]
    waited_ms: Annotated[
        float,
        "when anything was scheduled: time spent waiting for a free background writer",
    ]
    ms: Annotated[float, "time the node took, in milliseconds"]
    late: Annotated[bool, "a late event: a background write of this turn failed"]
    error: Annotated[str, f"in a late event: why the write failed, {_ERROR}"]
    error_type: Annotated[str, _ERROR_TYPE]


TraceEvent = (
    PrepareEvent
    | ReadMemoryEvent
    | DenseSearchEvent
    | LexicalSearchEvent
    | FuseEvent
    | RerankEvent
    | GenerateEvent
    | FinalGradeEvent
    | RewriteEvent
    | WriteMemoryEvent
)
"""One event of ``state.trace``: which one is told by its ``node`` key."""

#: Each node's event type, by node name, in the order the nodes run.
EVENTS: dict[str, Any] = {
    get_args(get_type_hints(event)["node"])[0]: event for event in get_args(TraceEvent)
}


class Field(NamedTuple):
    """One declared key of an event (or of a dict inside one)."""

    key: str
    type: Any  # the annotation, without Required/NotRequired/Annotated
    doc: str
    always: bool  # present in every such event (or dict)


def fields(event_type: Any) -> list[Field]:
    """The keys ``event_type`` (one of these TypedDicts) declares, in declaration order."""
    hints = get_type_hints(event_type, include_extras=True)
    required = event_type.__required_keys__
    out = []
    wrappers: tuple[Any, ...] = (Required, NotRequired)
    origin: Any
    for key, hint in hints.items():
        while get_origin(hint) in wrappers:
            hint = get_args(hint)[0]
        doc, origin = "", get_origin(hint)
        if origin is Annotated:
            hint, doc = get_args(hint)[0], str(get_args(hint)[1])
        out.append(Field(key, hint, doc, key in required))
    return out

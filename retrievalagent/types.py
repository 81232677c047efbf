"""Public data types: the result of a turn, the grader's verdict, stream events, reports."""

from __future__ import annotations

from typing import Any, Literal, Self, TypedDict, cast

from pydantic import BaseModel, Field

__all__ = [
    "AgentResult",
    "DrainReport",
    "Grade",
    "MemoryInfo",
    "Recollection",
    "Source",
    "StreamEvent",
]


class Source(TypedDict, total=False):
    """One cited passage. ``metadata`` is exactly what the caller attached at ingestion."""

    id: str
    source: str
    text: str
    score: float
    metadata: dict[str, Any]
    position: int | None
    headings: list[str]
    dense_rank: int | None
    lexical_rank: int | None
    fused_rank: int  # with a reranker: the rank fusion gave it
    rerank_score: float  # with a reranker that scores (FlashRank, Cohere, ...)


class Grade(BaseModel):
    """The grader's structured verdict on an answer (what ``final_grade`` asks the model for)."""

    sufficient: bool = Field(
        description=(
            "True if the passages the answer cites support it and it answers the question."
        )
    )
    confidence: float = Field(
        ge=0.0,
        le=1.0,
        description="How sure you are that the answer is correct and complete, 0 to 1.",
    )
    memory_worth_storing: bool = Field(
        default=False,
        description=(
            "True only if this turn revealed something worth remembering for this user: a "
            "search fact (a word the user typed that the documents call something else) or a "
            "preference the user stated about how to answer them. Not for trivial substring "
            "matches or facts about a single document; a request about this one question "
            "only is not a preference; never identity, secrets or personal details."
        ),
    )
    memory_kind: Literal["search_fact", "preference"] = Field(
        default="search_fact",
        description=(
            "search_fact: a synonym, alias, abbreviation, spelling or informal word and the "
            "documents' term for it. preference: how the user wants answers (language, "
            "length, format, tone, how to address them)."
        ),
    )
    memory_key: str = Field(
        default="",
        description=(
            "For a search_fact, the user's word or phrase exactly as they typed it (e.g. "
            "'backup copy'); for a preference, its subject: language, length, format, tone, "
            "address or another one-word subject. Empty if nothing is stored."
        ),
    )
    memory_confidence: float = Field(
        default=0.0,
        ge=0.0,
        le=1.0,
        description="How sure you are that memory_fact is correct and useful later, 0 to 1.",
    )
    memory_fact: str = Field(
        default="",
        description=(
            'What to remember, short. A search_fact as a mapping, e.g. \'"backup copy" is '
            'called "snapshot" in these documents\'; a preference as an instruction, e.g. '
            "'Answer in German.'. Empty if none."
        ),
    )


class MemoryInfo(TypedDict):
    """One memory the agent keeps about a user (``list_memories``, ``remember``). A dict;
    its fields also read as attributes (``memory.kind`` as well as ``memory["kind"]``).

    ``kind`` is ``"search_fact"`` (used to search), ``"preference"`` (applied to every
    answer) or ``"conversation"`` (what the user said in a conversation: ``form`` is
    ``"exchange"``, or ``"fact"`` for a fact a model drew from it, whose ``history`` holds
    the older facts it replaced); ``key`` is what makes two memories the same one (a newer
    replaces the older): a fact's alias key, a preference's subject. ``thread_id`` and
    ``at`` say in which conversation and when it was said; ``sources`` are the metadata of
    the messages it came from.
    """

    id: str
    text: str
    kind: str
    key: str
    alias: str
    question: str
    updated_at: str
    thread_id: str
    at: str
    form: str
    sources: list[dict[str, Any]]
    history: list[dict[str, Any]]


class Recollection(TypedDict):
    """One memory :meth:`~retrievalagent.RetrievalAgent.recall` found, best first. A dict;
    its fields also read as attributes (``hit.score`` as well as ``hit["score"]``).

    ``kind`` as in :class:`MemoryInfo`; ``score`` in [0, 1]; ``thread_id`` and ``at`` (ISO
    8601, UTC) say where and when it was said or learned; ``sources`` are the metadata of
    the messages it came from, in order; ``matched`` says why it was recalled.
    """

    id: str
    kind: str
    text: str
    score: float
    thread_id: str
    at: str
    sources: list[dict[str, Any]]
    matched: str


class DrainReport(TypedDict):
    """What waiting for background memory writes found."""

    landed: int
    failed: int
    pending: int


class StreamEvent(TypedDict, total=False):
    """One item of ``stream``/``astream``: a node's update or a piece of the answer."""

    type: Literal["node", "token", "result"]
    node: str
    update: dict[str, Any]
    text: str
    result: AgentResult


class _FieldsAsAttributes(dict[str, Any]):
    """A dict whose keys also read as attributes; an unknown one names the fields there
    are (``_what`` says what the dict is)."""

    __slots__ = ()
    _what = "record"

    def __getattr__(self, name: str) -> Any:
        try:
            return self[name]
        except KeyError:
            raise AttributeError(
                f"{self._what} has no field {name!r}; fields: {', '.join(sorted(self))}"
            ) from None

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError(
            f"{self._what} fields read as attributes but are set by key: "
            f"[{name!r}] = ..., as on any dict"
        )

    def __dir__(self) -> list[str]:
        return sorted(set(super().__dir__()) | set(self))

    def copy(self) -> Self:
        """A copy that still reads its fields as attributes (``dict.copy`` gives a dict)."""
        return type(self)(self)


class AgentResult(_FieldsAsAttributes):
    """The final state of a turn: a mapping (as LangGraph returns it) with attribute access.

    ``result.answer``, ``result.sources``, ``result.trace``, ``result.memory_context``,
    ``result.memory_fact``, ``result.messages``, ``result.documents`` ... and
    ``result["answer"]`` are the same thing. ``result.usage`` is what the turn's model
    calls cost, per role (``answer``, ``grade``, ``rewrite``, ``title``) and in ``total``:
    ``calls``, ``input_tokens``, ``output_tokens``, ``ms``, ``estimated``.
    """

    __slots__ = ()
    _what = "result"

    def events(self, node: str) -> list[dict[str, Any]]:
        """The trace events one node left, in order."""
        return [e for e in self.get("trace", []) if e.get("node") == node]


class _MemoryInfoFields(_FieldsAsAttributes):
    __slots__ = ()
    _what = "MemoryInfo"


class _RecollectionFields(_FieldsAsAttributes):
    __slots__ = ()
    _what = "Recollection"


def readable_memory(info: MemoryInfo) -> MemoryInfo:
    """``info`` as the API returns it: a dict whose fields also read as attributes, so code
    written for LangGraph's store items or other records (``memory.text``) works too."""
    return cast(MemoryInfo, _MemoryInfoFields(info))


def readable_recollection(hit: Recollection) -> Recollection:
    """``hit`` as ``recall`` returns it (see :func:`readable_memory`)."""
    return cast(Recollection, _RecollectionFields(hit))

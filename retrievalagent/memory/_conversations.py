"""Conversation memory records: what is kept of an exchange, and of an imported history.

One record is one *exchange*: a message of the user (or of another speaker) and a short
form of the assistant's reply that followed it. It keeps the conversation (``thread_id``
and its title), the time it was said, and ``sources``: the metadata of the messages it was
drawn from, in order (for the agent's own turns, their message ids and roles). Secrets are
masked before anything is stored (``memory._secrets``).

A record's key is derived from its thread and its messages, so importing the same history
twice stores it once.
"""

from __future__ import annotations

import dataclasses
import decimal
import enum
import hashlib
import json
import math
import numbers
import re
import uuid
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import date, datetime, time, timezone
from typing import Any, Literal

from langchain_core.messages import BaseMessageChunk, message_chunk_to_message

from retrievalagent._inputs import block_text, content_text, normalized
from retrievalagent.memory._secrets import (
    mask_known,
    mask_metadata,
    mask_secrets,
    masked_reply,
    recurring_secrets,
)
from retrievalagent.memory._temporal import iso, parse_time

__all__ = [
    "CONVERSATION_KEYS",
    "EARLIER",
    "MESSAGE_KEYS",
    "OPENAI_MESSAGE_KEYS",
    "ConversationRecord",
    "Said",
    "about_self",
    "earliest",
    "exchange_records",
    "fact_key",
    "found_by",
    "latest_forms",
    "mentions_self",
    "said_in",
    "said_of",
    "short_reply",
    "something_said",
    "source_of",
    "speaker_lines",
    "unread_keys",
    "unread_warning",
    "user_statements",
]

#: What a conversation given as a dict holds (``remember_many``, ``memory import``).
CONVERSATION_KEYS = ("messages", "thread_id", "at")
#: What ``said_of`` reads of a message given as a dict.
#: Where a message may say when it was said: ``at`` as ``remember`` names a conversation's
#: time, and the names exports use (ChatGPT's ``create_time`` counts seconds since 1970).
MESSAGE_TIME_KEYS = ("at", "timestamp", "created_at", "create_time")
MESSAGE_KEYS = ("role", "content", "name", "metadata", "id", *MESSAGE_TIME_KEYS)
#: What a message may hold beside ``MESSAGE_KEYS``: the keys of OpenAI's own message
#: objects, which an export carries and which say nothing a memory keeps.
OPENAI_MESSAGE_KEYS = frozenset(
    {"tool_calls", "tool_call_id", "function_call", "refusal", "audio", "annotations"}
    | {"type", "status"}  # a Responses API message item
    | {"update_time"}  # beside create_time in a ChatGPT export: an edit, not when it was said
)
#: Longest message text kept in one exchange (characters; the rest is cut).
MAX_SAID_CHARS = 2000
#: Longest form of the assistant's reply kept beside the user's message.
MAX_REPLY_CHARS = 240
_ROLES = {"user": "user", "human": "user", "assistant": "assistant", "ai": "assistant"}
_SKIPPED_ROLES = frozenset({"system", "tool", "function", "developer"})
#: Content block types that carry a message's words.
_TEXT_BLOCKS = frozenset({"text", "input_text", "output_text"})
_CITATION = re.compile(r"\s*\[\d+(?:\s*[-–,;]\s*\d+)*\]")
#: How an offline answer quotes what the user said before (never stored back as said).
EARLIER = "(Earlier{day} you said: “{statement}”)"
#: The offline answer when no passage is found. Kept as part of an exchange it would say
#: nothing of the user, yet match every later question about an index or a document.
NOTHING_FOUND = "I could not find anything about this in the indexed documents."
_QUOTED_EARLIER = re.compile(r"\s*\(Earlier[^()“”]* you said: “[^”]*”\)")
#: Where one speaker's words are cut into sentences.
SENTENCE_END = re.compile(r"(?<=[.!?…])\s+")
# First person: what a user says about themselves ("my cluster", "I run", "we moved").
_SELF = re.compile(
    r"\b(?:i|i'm|i've|i'd|i'll|im|me|my|mine|myself|we|we're|we've|our|ours|us)\b", re.I
)


@dataclass(frozen=True)
class Said:
    """One message of a conversation, as memory reads it."""

    role: Literal["user", "assistant"]
    content: str
    name: str = ""
    metadata: dict[str, Any] = field(default_factory=dict)
    id: str = ""
    #: when it was said, as the message gives it (``MESSAGE_TIME_KEYS``), UTC ISO; or ""
    at: str = ""

    @property
    def speaker(self) -> str:
        return self.name or self.role


@dataclass
class ConversationRecord:
    """One conversation memory to write: an exchange, or a fact drawn from exchanges.

    ``key`` makes two records the same memory: an exchange's comes from its thread and
    messages; a fact's from its subject (a newer fact on a subject replaces the older,
    which stays in the new one's ``history``).
    """

    text: str
    user_id: str
    thread_id: str = ""
    at: str = ""
    title: str = ""
    sources: list[dict[str, Any]] = field(default_factory=list)
    message_ids: list[str] = field(default_factory=list)
    #: What the people said, without the assistant's reply: what recall embeds (the
    #: reply's words still count for BM25, which indexes ``text``).
    said: str = ""
    #: Who spoke in it besides the user and the assistant (``name`` of the messages).
    speakers: list[str] = field(default_factory=list)
    #: "exchange"; "fact" (a fact about the user, checked); "extract": the messages for a
    #: backend that draws its own facts from them (mem0 with its LLM)
    form: Literal["exchange", "fact", "extract"] = "exchange"
    subject: str = ""
    key: str = ""
    masked: int = 0  # secrets replaced before storing
    #: A live turn's exchange: it replaces a stored one with its key (a copy of the same turn
    #: whose reply never reached the thread), where an imported one is stored only once.
    replaces: bool = False
    #: The messages as said (secrets masked), for a backend that extracts its own facts.
    messages: list[dict[str, str]] = field(default_factory=list)
    #: Where the exchange stands in its conversation (0: first), which recall reads to know
    #: what was said just before it (the exchanges of one import share their time).
    place: int = 0
    #: A fact put back (``replaced_facts``: the newer fact that replaced it goes with its
    #: conversation): stored only where no fact holds its key (one said since comes first)
    #: but the one it takes the place of, with the history it had.
    restores: bool = False
    history: list[dict[str, Any]] = field(default_factory=list)
    #: The fact a put-back takes the place of, by id and ``written_us``: the one being
    #: erased, which holds the subject until the put-back is stored over it (so that no
    #: failure between the two leaves neither).
    in_place_of: tuple[str, Any] | None = None
    #: An imported exchange that ends with the assistant's reply: the keys it had when an
    #: earlier export of its conversation ended before all of that reply came (the
    #: question alone, then with each reply message but the last). Stored, it takes such a
    #: one's place (the same words, now answered), instead of standing beside it.
    earlier_keys: list[str] = field(default_factory=list)

    def takes_place_of(self, memory_id: str, written_us: Any) -> bool:
        """Whether this put-back may be stored over the memory ``memory_id`` holds."""
        return self.restores and self.in_place_of == (memory_id, written_us)

    def value(self, written: str) -> dict[str, Any]:
        """The record as a store item's value (without its vector)."""
        return {
            "text": self.text,
            "kind": "conversation",
            "form": self.form,
            "subject": self.subject,
            "thread_id": self.thread_id,
            "title": self.title,
            "at": self.at,
            "written": written,
            "sources": self.sources,
            "message_ids": self.message_ids,
            "said": self.said or self.text,
            "speakers": self.speakers,
            "place": self.place,
        }


def responses_item(message: Mapping[str, Any]) -> bool:
    """Whether ``message`` is an item of an OpenAI Responses API transcript that is not a
    message (``reasoning``, ``function_call``, ``function_call_output``...): it has a
    ``type`` and no ``role``."""
    kind = message.get("type")
    return "role" not in message and isinstance(kind, str) and kind not in ("", "message")


def said_of(
    message: Any, position: int, *, strict: bool = False, times: bool = True
) -> Said | None:
    """A LangChain message or an OpenAI-style dict as a ``Said`` (None for system and tool
    messages, which are not something a person said); ``ValueError`` naming ``position``
    for anything else. ``strict`` (``remember``, ``memory import``): metadata that is not
    a JSON dict and a text block whose words cannot be read are errors too; a live turn
    leaves them out, since what memory cannot keep must not fail the answer."""
    if isinstance(message, Mapping):
        if responses_item(message):
            return None  # a tool call, its output or reasoning: nothing a person said
        role = str(message.get("role") or "")
        content, name = message.get("content"), message.get("name")
        metadata, ident = message.get("metadata"), message.get("id")
        timed: Mapping[str, Any] = message
    elif hasattr(message, "type") and hasattr(message, "content"):
        if isinstance(message, BaseMessageChunk):  # a streamed reply, merged
            message = message_chunk_to_message(message)
        role, content, name = str(message.type), message.content, getattr(message, "name", None)
        if role == "chat":  # a ChatMessage names its own role
            role = str(getattr(message, "role", "") or role)
        extra = getattr(message, "additional_kwargs", None) or {}
        # HumanMessage(..., metadata={...}) keeps it as an extra field, beside the
        # additional_kwargs["metadata"] LangChain's own code uses: both are read
        metadata = _both(getattr(message, "metadata", None), extra.get("metadata"))
        ident = getattr(message, "id", None)
        # a time given as an extra field (HumanMessage("...", timestamp=...)), as metadata is
        timed = {**(getattr(message, "model_extra", None) or {}), **extra}
    else:
        raise ValueError(
            f"message {position} must be a LangChain message or a dict with 'role' and "
            f"'content', not {type(message).__name__}"
        )
    role = role.strip().lower()  # "User", "HUMAN": as chat(history=...) reads them
    if role in _SKIPPED_ROLES:
        return None
    _check_role(role, message, position)
    kept = _checked_metadata(metadata, position, strict)
    if content is None and _ROLES[role] == "user":
        raise ValueError(f"message {position} (from {role!r}) has no 'content'")
    _check_fields(position, content, name, ident, strict)
    text = _normalized(content_text(content))
    if not text:
        return None
    at = _message_time(timed, position, strict) if times else ""
    if times and not at and kept and isinstance(metadata, Mapping):
        # where some apps keep it; metadata is the user's own data, so a value there that
        # is not a time is left as it is, never an error. Read as given: a naive datetime
        # is local time, where its ISO string kept would read as UTC
        at = _message_time(metadata, position, strict=False)
    return Said(
        role=_ROLES[role],  # type: ignore[arg-type]
        content=text,
        name=_normalized(str(name or "")),
        metadata=dict(kept or {}),
        id=str(ident or ""),
        at=at,
    )


#: A number of seconds since 1970 from this on is taken as milliseconds (year 5138).
_MILLISECONDS_FROM = 10**11
#: Seconds since 1970 before this (1990) are refused: no chat export is that old, and
#: 20260105 (a date written as a number) would read as August 1970.
_SECONDS_FROM = 631_152_000


def _message_time(message: Mapping[str, Any], position: int, strict: bool) -> str:
    """When ``message`` says it was said (UTC ISO), or ""; ``ValueError`` naming the
    message and the key for a time that cannot be read or has not come yet (``strict``:
    an import; a live turn is dated by the clock instead). An export's times are what
    date an imported conversation: dropped, it would read as said today."""
    try:
        return _time_given(message, position)
    except ValueError:
        if strict:
            raise
        return ""


def _time_given(message: Mapping[str, Any], position: int) -> str:
    """The first of ``MESSAGE_TIME_KEYS`` the message gives a time under, read."""
    for key in MESSAGE_TIME_KEYS:
        value = message.get(key)
        if value is None or (isinstance(value, str) and not value.strip()):
            continue
        what = f"message {position}'s {key}"
        number = isinstance(value, numbers.Real | decimal.Decimal) and not isinstance(value, bool)
        if number and key != "at":  # numpy's and Decimal's too, as a data frame gives them
            seconds = float(value)
            seconds = seconds / 1000 if abs(seconds) >= _MILLISECONDS_FROM else seconds
            try:
                if not seconds >= _SECONDS_FROM:  # NaN too
                    raise ValueError
                value = datetime.fromtimestamp(seconds, timezone.utc)
            except (OverflowError, OSError, ValueError):
                raise ValueError(
                    f"{what}={message.get(key)!r} is not a time: expected an ISO 8601 "
                    "string or seconds (or milliseconds) since 1970, from 1990 on"
                ) from None
        if not isinstance(value, str | date):  # a datetime is a date too
            numeric = "" if key == "at" else ", or seconds since 1970"
            raise ValueError(
                f"{what} must be a datetime, a date or an ISO 8601 string{numeric}, "
                f"not {type(value).__name__}"
            )
        return iso(parse_time(value, what, past=True))
    return ""


def _check_role(role: str, message: Any, position: int) -> None:
    """``ValueError`` naming ``position`` for a message without a role a person speaks in."""
    if not role and isinstance(message, Mapping):  # a transcript of another shape
        given = message.get("role")
        problem = (
            f"has no 'role' (it has {_keys(message)})"
            if given is None and "role" not in message
            else f"has an empty 'role' ({given!r})"
        )
        raise ValueError(
            f"message {position} {problem}; "
            "expected OpenAI-style {'role': 'user', 'content': '...', 'name': ...}"
        )
    if role not in _ROLES:
        raise ValueError(
            f"message {position} has role {role!r}; accepted: user, assistant (human, ai), "
            "or system/tool (skipped)"
        )


def _keys(message: Mapping[Any, Any]) -> str:
    """A message's keys as an error names them (a few: a row may have many)."""
    keys = [repr(k) for k in list(message)[:6]]
    return ", ".join(keys) + (", ..." if len(message) > 6 else "") if keys else "no keys"


def _both(field: Any, kwargs: Any) -> Any:
    """A LangChain message's metadata given as its own field and in ``additional_kwargs``,
    as one dict (the latter's keys win); one that is not a dict is returned, to be named."""
    if field is None or kwargs is None:
        return kwargs if field is None else field
    if isinstance(field, Mapping) and isinstance(kwargs, Mapping):
        return {**field, **kwargs}
    return kwargs if isinstance(field, Mapping) else field


def _check_fields(position: int, content: Any, name: Any, ident: Any, strict: bool) -> None:
    """``ValueError`` naming ``position`` for a field ``Said`` would otherwise turn into
    something else ({"a": 1} as a speaker's name, a number in a list of content blocks)."""
    if content is not None and not isinstance(content, str | list):
        # None: an assistant message that only calls tools (OpenAI exports have them)
        raise ValueError(
            f"message {position}'s content must be text or a list of content blocks, "
            f"not {type(content).__name__}"
        )
    blocks = content if isinstance(content, list) else []
    odd = next((c for c in blocks if not isinstance(c, str | Mapping)), None)
    if odd is not None:
        raise ValueError(
            f"message {position}'s content list holds a {type(odd).__name__} value; expected text "
            "or content blocks ({'type': 'text', 'text': ...})"
        )
    for place, block in enumerate(blocks if strict else ()):
        # a text block whose words cannot be read is refused, not dropped without a word
        # (an image's or a tool call's block has no words to keep)
        if block_text(block) is None and ("text" in block or block.get("type") in _TEXT_BLOCKS):
            raise ValueError(
                f"message {position}'s content block {place} holds no text that can be read; "
                "expected {'type': 'text', 'text': '...'} or {'text': {'value': '...'}}"
            )
    if name is not None and not isinstance(name, str):
        raise ValueError(f"message {position}'s name must be text, not {type(name).__name__}")
    if ident is not None and (not isinstance(ident, str | int) or isinstance(ident, bool)):
        raise ValueError(
            f"message {position}'s id must be text or a number, not {type(ident).__name__}"
        )


def _checked_metadata(metadata: Any, position: int, strict: bool) -> Mapping[str, Any] | None:
    """``metadata`` as JSON holds it (``_as_json``) if it is a dict JSON can keep; else
    ``ValueError`` naming ``position``, or None when not ``strict`` (a live turn's
    message is then known by its id and role)."""
    try:
        if metadata is None:
            return None
        if not isinstance(metadata, Mapping):
            raise ValueError(
                f"message {position}'s metadata must be a dict, not {type(metadata).__name__}"
            )
        kept: dict[str, Any] = _as_json(metadata, f"message {position}'s metadata")
    except ValueError:
        if strict:
            raise
        return None
    return kept


def _as_json(value: Any, where: str, within: tuple[int, ...] = ()) -> Any:
    """``value`` with the common scalars JSON has no type for written as LangGraph's stores
    write them (a datetime, date or time as its ISO 8601 string, a UUID or Decimal as its
    text, an Enum as its value, a tuple or set as a list): kept, not refused. What JSON
    cannot hold faithfully (bytes, an object, NaN, a key that is not a string, a NUL, a
    container inside itself or nested past ``_MAX_NESTING``) is a ``ValueError`` naming
    ``where`` it is (``within``: the containers around it)."""
    if isinstance(value, enum.Enum):  # before str and int: a StrEnum is a str too
        return _as_json(value.value, where, within)
    if isinstance(value, Mapping | list | tuple | set | frozenset):
        return _json_container(value, where, within)
    if value is None or isinstance(value, bool | int):
        return value
    if isinstance(value, float):
        if not math.isfinite(value):
            raise ValueError(f"{where} is not JSON: {value!r} is no JSON number")
        return value
    if isinstance(value, str):
        return _json_text(value, where)
    if isinstance(value, datetime | date | time):
        return value.isoformat()
    if isinstance(value, uuid.UUID | decimal.Decimal):
        return str(value)  # a Decimal's text is exact, where a float would round it
    raise ValueError(
        f"{where} is not JSON: a value of type {type(value).__name__}, which has no "
        "faithful JSON form; give it as text, a number, a bool, None, a list or a dict (a "
        "datetime, date, time, UUID, Decimal, Enum, tuple or set is converted)"
    )


def _json_container(value: Any, where: str, within: tuple[int, ...]) -> Any:
    """A dict as a dict of string keys, a list, tuple or set as a list (a set sorted)."""
    if id(value) in within:
        raise ValueError(f"{where} holds itself (a container inside itself is no JSON)")
    if len(within) >= _MAX_NESTING:
        raise ValueError(f"{where} is nested more than {_MAX_NESTING} levels deep")
    inside = (*within, id(value))
    if isinstance(value, Mapping):
        out = {}
        for key, item in value.items():
            if not isinstance(key, str):  # JSON makes it a string: 1 and "1" one key
                raise ValueError(
                    f"{where} has the key {key!r}: keys must be strings (stored as JSON, "
                    "it would become a string)"
                )
            out[_json_text(key, f"{where} key {key!r}")] = _as_json(
                item, f"{where}[{key!r}]", inside
            )
        return out
    if isinstance(value, set | frozenset):
        try:
            value = sorted(value)
        except TypeError:  # kinds that do not compare: in an order that does not vary
            value = sorted(value, key=lambda v: (type(v).__name__, repr(v)))
    return [_as_json(v, f"{where}[{i}]", inside) for i, v in enumerate(value)]


#: Deepest metadata kept (containers within containers); real metadata is a few levels.
_MAX_NESTING = 64


def _json_text(text: str, where: str) -> str:
    """``text`` as JSON in every backend holds it: no NUL (PostgreSQL's ``jsonb`` takes
    none) and no lone surrogate (not UTF-8)."""
    if "\x00" in text:
        raise ValueError(f"{where} holds a NUL character")
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        raise ValueError(f"{where} holds a lone surrogate (not valid Unicode)") from None
    return text


def earliest(said: Iterable[Said]) -> str:
    """The earliest time the messages give ("" if none gives one): what dates what they
    were said in."""
    return min((m.at for m in said if m.at), default="")


def said_in(messages: Any, *, times: bool = True) -> list[Said]:
    """A conversation's messages as ``Said`` (system and tool messages skipped);
    ``ValueError`` naming what is wrong: not a list, a bad message, nothing said."""
    if isinstance(messages, str | bytes | Mapping) or not isinstance(messages, Sequence):
        raise ValueError(
            "messages must be a list of LangChain messages or of dicts with 'role' and "
            f"'content', not {type(messages).__name__}"
        )
    return something_said(
        [s for i, m in enumerate(messages) if (s := said_of(m, i, strict=True, times=times))]
    )


def something_said(said: list[Said]) -> list[Said]:
    """``said``, unless nobody said anything (``ValueError``)."""
    if not said:
        raise ValueError("messages hold no text from the user or the assistant")
    return said


def unread_keys(messages: Any) -> list[str]:
    """The keys of dict messages that nothing reads, each as "message 2's 'nmae'": a
    misspelt key would lose a speaker without a word (``memory import`` refuses them; a
    script's call goes on, warned: ``unread_warning``)."""
    if not isinstance(messages, Sequence) or isinstance(messages, str | bytes):
        return []
    return [
        f"message {i}'s {key!r}"
        for i, m in enumerate(messages)
        if isinstance(m, Mapping) and not responses_item(m)
        for key in m
        if key not in MESSAGE_KEYS and key not in OPENAI_MESSAGE_KEYS
    ]


def unread_warning(unread: Sequence[str]) -> str:
    """The warning naming ``unread_keys`` (the first five)."""
    more = " and more" if len(unread) > 5 else ""
    return (
        f"not read, so not remembered: {', '.join(unread[:5])}{more}; a message is read by "
        f"{', '.join(MESSAGE_KEYS)}, and what else it should keep goes in its 'metadata'"
    )


def short_reply(text: str, limit: int = MAX_REPLY_CHARS) -> str:
    """The reply's first sentences, citations dropped, within ``limit`` characters."""
    text = _QUOTED_EARLIER.sub("", _CITATION.sub("", " ".join(text.split())))
    text = text.replace(NOTHING_FOUND, "").strip()
    if len(text) <= limit:
        return text
    out = ""
    for sentence in SENTENCE_END.split(text):
        if out and len(out) + len(sentence) + 1 > limit:
            break
        out = f"{out} {sentence}".strip()
    return out if len(out) <= limit else out[: limit - 1].rsplit(" ", 1)[0] + "…"


def _units(said: Sequence[Said]) -> list[list[int]]:
    """The places of each unit's messages: a unit starts at each message not by the
    assistant; the replies that follow join it."""
    units: list[list[int]] = []
    for place, message in enumerate(said):
        if message.role == "assistant" and units:
            units[-1].append(place)
        else:
            units.append([place])
    return units


def _line(message: Said) -> str:
    if message.role == "assistant":
        return f"{message.speaker}: {short_reply(message.content)}"
    return f"{message.speaker}: {clip_said(message.content)}"


def clip_said(text: str, limit: int = MAX_SAID_CHARS) -> str:
    """A long message as memory keeps it: its beginning and its end (a pasted log and the
    question after it, a long story and what it comes to), within ``limit`` characters."""
    if len(text) <= limit:
        return text
    half = (limit - 3) // 2
    return f"{text[:half].rstrip()} … {text[-half:].lstrip()}"


def masked_said(said: Sequence[Said], earlier: Sequence[Said] = ()) -> tuple[list[Said], int]:
    """``said`` with every secret masked (see ``_masked_each``), and how many were."""
    masked, _ = _masked_each(said, earlier)
    return [m for m, _ in masked], sum(found for _, found in masked)


def _masked_each(
    said: Sequence[Said], earlier: Sequence[Said] = ()
) -> tuple[list[tuple[Said, int]], list[str]]:
    """Each message of ``said`` with the secrets in its words, speaker name and metadata
    masked (before anything is cut, so no piece of a key survives a cut), with how many
    were; then every value found, in it or in ``earlier`` (turns a model saw before these),
    masked wherever the conversation repeats it: a reply quoting the password back. Also
    those values (``recurring_secrets``), for what else the conversation names."""
    found: list[str] = []
    for message in earlier:
        mask_secrets(message.content, found=found)
    first = []
    previous = earlier[-1] if earlier else None
    for message in said:
        content, in_content = mask_secrets(message.content, found=found)
        if previous is not None and previous.role == "assistant" and message.role == "user":
            # "Please enter your password." then "Sunshine2024": the reply is the secret
            content, replied, values = masked_reply(content, previous.content)
            in_content += replied
            found.extend(values)
        previous = message
        name, in_name = mask_secrets(message.name)
        metadata, in_metadata = mask_metadata(message.metadata, found)
        masked = dataclasses.replace(message, content=content, name=name, metadata=metadata)
        first.append((masked, in_content + in_name + in_metadata))
    known = recurring_secrets(found)
    out = []
    for message, count in first:
        content, echoed = mask_known(message.content, known)
        out.append((dataclasses.replace(message, content=content), count + echoed))
    return out, known


def _normalized(text: str) -> str:
    """Words as memory keeps them: in the form a question is read in (``normalized``),
    with runs of whitespace as one space."""
    return " ".join(normalized(text).split())


def source_of(message: Said) -> dict[str, Any]:
    """What a memory keeps of a message it came from: the message's metadata as given;
    for a message without metadata, its id and role (the agent's own turns)."""
    if message.metadata or not message.id:
        return dict(message.metadata)
    return {"message_id": message.id, "role": message.role}


def _key(prefix: str, *parts: Any) -> str:
    digest = hashlib.sha256(json.dumps(parts, sort_keys=True, default=str).encode()).hexdigest()
    return f"{prefix}{digest[:32]}"


def latest_forms(records: Sequence[ConversationRecord]) -> list[ConversationRecord]:
    """``records`` without an exchange another of them holds with more of its reply (two
    exports of one thread imported at once: only the later one's is stored)."""
    completed = {key for r in records for key in r.earlier_keys}
    return [r for r in records if r.key not in completed]


def _imported_identity(raw: Sequence[Said], place: int) -> Any:
    """What tells an imported exchange apart: its messages' ids and words when each has
    an id, else its place and words (see ``exchange_records``)."""
    said = [(m.role, m.name, m.content) for m in raw]
    return [[m.id for m in raw], said] if all(m.id for m in raw) else [place, said]


def exchange_records(
    said: Sequence[Said],
    *,
    user_id: str,
    thread_id: str = "",
    at: datetime | str | None = None,
    title: str = "",
    after: str | None = None,
    earlier: Sequence[Said] = (),
) -> list[ConversationRecord]:
    """The exchanges of one conversation, each with its sources, secrets masked (also
    those pasted in ``earlier``: the turns before this one a model saw, which its reply may
    quote back).

    An exchange is known by its thread and its place and words in the conversation (by
    its messages' ids and words when they all have an id: an export that numbers each
    conversation's messages from 1, or puts the conversation's id on every row, repeats
    ids), not by its time: importing the same history again, even with another time,
    stores it once. Outside a thread, ``at`` tells two
    conversations with the same words apart. A live turn gives ``after``, the id of the
    reply it follows: asked again after it was cancelled (same words, same place in the
    thread, new message ids) it replaces its first copy instead of adding a second."""
    when = iso(parse_time(at))
    dated = when if at is not None else ""
    masked_all, known = _masked_each(said, earlier)
    title = mask_known(mask_secrets(title)[0], known)[0]
    records = []
    said_at = when  # an exchange is dated by its messages' times, else as the one before it
    for place, span in enumerate(_units(said)):
        raw = [said[i] for i in span]
        unit = [masked_all[i][0] for i in span]
        said_at = earliest(raw) or said_at
        masked = sum(masked_all[i][1] for i in span)
        # each line masked again after its cut: a cut may join words into a secret's shape
        lines = [mask_secrets(_line(m)) for m in unit]
        masked += sum(found for _, found in lines)
        # a reply that said nothing worth keeping (``NOTHING_FOUND``) leaves no line
        text = "\n".join(
            line
            for m, (line, _) in zip(unit, lines, strict=True)
            if m.role != "assistant" or line.partition(": ")[2].strip()
        )
        people = "\n".join(
            line for m, (line, _) in zip(unit, lines, strict=True) if m.role != "assistant"
        )
        messages = [
            {"role": m.role, "content": clip_said(m.content)} | ({"name": m.name} if m.name else {})
            for m in unit
        ]
        ids = [m.id for m in raw]
        words = [(m.role, m.name, m.content) for m in raw if m.role != "assistant"]
        if after is not None:
            identity: Any = ["turn", after, words]
        else:
            identity = _imported_identity(raw, place)
        # what exports that ended before all the reply came stored of it, which it replaces
        asked = next((i for i in range(len(raw), 0, -1) if raw[i - 1].role != "assistant"), 0)
        incomplete = [
            _key(
                "x",
                thread_id,
                "" if thread_id or all(m.id for m in raw[:end]) else dated,
                _imported_identity(raw[:end], place),
            )
            for end in (range(asked, len(raw)) if after is None and asked else ())
        ]
        records.append(
            ConversationRecord(
                text=text,
                user_id=user_id,
                thread_id=thread_id,
                at=said_at,
                title=title,
                sources=[source_of(m) for m in unit],
                message_ids=[i for i in ids if i],
                key=_key("x", thread_id, "" if thread_id or all(ids) else dated, identity),
                masked=masked,
                place=place,
                replaces=after is not None,
                messages=messages,
                said=people,
                speakers=list(
                    dict.fromkeys(m.name for m in unit if m.name and m.role != "assistant")
                ),
                earlier_keys=incomplete,
            )
        )
    return records


def found_by(text: str, form: Any, subject: Any) -> str:
    """What a memory is searched by (its words, and what is embedded of it): a fact's
    subject leads its own words. A later question names the thing ("How should I upgrade
    my database?") where the fact names what it is ("Runs PostgreSQL 13 on Debian 11."),
    and the small embedder finds the two only 0.16 similar; the subject the model gave the fact
    ("database") is the word that links them."""
    if form != "fact" or not isinstance(subject, str) or not subject.strip():
        return text
    return f"{subject.replace('-', ' ').strip()}: {text}"


def fact_key(subject: str) -> str:
    """The key of a fact about the user: one item per subject."""
    return _key("f", subject)


def speaker_lines(text: str, separator: str = "\n") -> list[tuple[str, str]]:
    """A stored exchange as ``(speaker, words)``, one per message: it is stored one
    "speaker: words" line per message (``separator`` "\n"), and shown in a prompt on one
    line, the messages apart by " / " (pass that). A piece without a speaker has ``""``."""
    out = []
    for line in text.split(separator):
        speaker, sep, words = line.partition(": ")
        out.append((speaker.strip(), words) if sep else ("", line))
    return out


#: A sentence that asks, though it ends without "?": "Tell me my dog's name.", "Remind me
#: what I said about backups", "how do I reset my password".
_ASKING = re.compile(
    r"^(?:(?:please|ok|okay|so|and|now|hey|hi)[,\s]+)*(?:(?:tell|remind|show|give|help|find)\s+me"
    r"|let\s+me\s+know|list|explain|describe|summari[sz]e|look\s+up"
    r"|how\s+(?:do|can|should|would)\s+(?:i|we)|what(?:'s|’s|\s+is|\s+was|\s+are)\s+(?:my|our))\b",
    re.IGNORECASE,
)


def _states_self(sentence: str) -> bool:
    """A sentence with "I", "my", "we"... that states something: not a question, whether or
    not it ends with "?"."""
    sentence = sentence.strip()
    return (
        bool(sentence)
        and not sentence.endswith("?")
        and _SELF.search(sentence) is not None
        and _ASKING.match(sentence) is None
    )


def about_self(text: str) -> bool:
    """Whether ``text`` speaks of the user: "I", "my", "we"... ("Which version am I on?")."""
    return _SELF.search(text) is not None


def user_statements(memory_text: str, names: Collection[str] = ()) -> list[str]:
    """What the user stated about themselves in an exchange as a prompt shows it (messages
    apart by " / "): the sentences with "I", "my", "we"... of their own lines that state
    something. Their own: unnamed, or named by one of ``names`` (the user's id, as an
    export that names every speaker names them); another named line may be the
    assistant's ("Aria: I run nightly backups") or another person's, not the user's."""
    own = {"user", *(" ".join(n.split()).casefold() for n in names)}
    return [
        sentence.strip()
        for speaker, content in speaker_lines(memory_text, " / ")
        if speaker.casefold() in own
        for sentence in SENTENCE_END.split(content)
        if _states_self(sentence)
    ]


def mentions_self(texts: Iterable[str]) -> bool:
    """Whether the user stated something about themselves (worth a fact-extraction call):
    a sentence with "I", "my", "we"... that states something ("How do I ...?" and "Tell
    me my dog's name." do not)."""
    return any(_states_self(sentence) for text in texts for sentence in SENTENCE_END.split(text))

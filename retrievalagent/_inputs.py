"""Checks on what callers hand the agent on every call: questions, user ids and thread ids.

They run before any work starts, so bad input is a ``ConfigError`` (a ``ValueError``) that
says what is wrong, never a failure deep inside the embedder, a checkpointer or a store.

* A question must be a string; it is trimmed, control characters other than tab and
  newline become spaces (they break JSON columns in PostgreSQL and tokenizers alike),
  unpaired surrogates become U+FFFD, the text is NFKC-normalised (fullwidth ``ＬＦ-４０９``
  becomes ``LF-409``, ligatures and compatibility forms their plain letters, as the
  corpus is usually written), and the result must be non-empty and at most
  ``max_question_chars`` characters (default 8000, ``RAG_MAX_QUESTION_CHARS``). The
  cleaned question is the one searched, shown to the model and echoed in the state.
* A user id or thread id must be a string (an int or UUID is turned into one) of at most
  256 characters with no control characters, and is used exactly as given: one that starts
  or ends with whitespace is refused, never trimmed (trimming made ``"  alice  "`` share
  alice's memory). Separators such as ``.`` and ``/`` are allowed; memory backends escape
  them where their storage gives them a meaning.
"""

from __future__ import annotations

import re
import unicodedata
import uuid
from collections.abc import Mapping
from typing import Any

from retrievalagent.errors import ConfigError

__all__ = [
    "MAX_ID_CHARS",
    "MAX_TOP_K",
    "NAMED_AFTER_WHAT_WAS_SAID",
    "block_text",
    "check_id",
    "check_name",
    "check_top_k",
    "clean_question",
    "clean_text",
    "content_text",
    "normalized",
    "redact_url",
]

MAX_ID_CHARS = 256
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")
_ID_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")
_SURROGATE = re.compile(r"[\ud800-\udfff]")
# Zero-width and invisible format characters: a question of only these is empty. Not
# the narrow and the medium space (U+202F, U+205F), which NFKC makes spaces.
_INVISIBLE = re.compile(r"[\u00ad\u034f\u180e\u200b-\u200f\u202a-\u202e\u2060-\u206f\ufeff]")
# Letters that show as blank (the Braille blank, the Hangul fillers), which chat apps let
# through as a "blank message": spaces, so a message of only these is empty too.
_BLANK = re.compile(r"[\u2800\u3164\u115f\u1160\uffa0]")
# The line and paragraph separators end a line, as a newline does ("Hosts:\u2028alpha
# runs nginx" is two lines, never "Hosts:alpha").
_LINE_BREAK = re.compile(r"[\u2028\u2029]")
_WORD = re.compile(r"\w")
#: The most passages one search returns: the bound of ``top_k``, as a setting
#: (``Settings.top_k``) and per call (``search(top_k=...)``, ``configurable.top_k``);
#: evaluation reads that deep.
MAX_TOP_K = 1000


def clean_text(text: str) -> str:
    """``text`` without what no store or model can take or show: invisible format
    characters dropped, letters that show as blank as spaces, line and paragraph
    separators as newlines, control characters
    (NUL included, which PostgreSQL refuses) as spaces, lone surrogates (which UTF-8
    cannot encode) as U+FFFD."""
    text = _LINE_BREAK.sub("\n", _BLANK.sub(" ", _INVISIBLE.sub("", text)))
    return _SURROGATE.sub("\ufffd", _CONTROL.sub(" ", text))


def normalized(text: str) -> str:
    """``clean_text`` in NFKC form: how a question is read, and what memory keeps of what
    was said, so that one typed full width ("ＩＮＣ－２０９３１") finds the other."""
    return unicodedata.normalize("NFKC", clean_text(text))


def content_text(content: Any) -> str:
    """The words of a message's content: a string, or its content blocks' text, one block
    a line (what a chat UI or an export sends; an image or a tool call has none)."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(p for c in content if (p := block_text(c)))
    return ""


def block_text(block: Any) -> str | None:
    """The words of a content block: text, ``{"text": "..."}`` (LangChain, Anthropic,
    OpenAI's chat and Responses APIs) or ``{"text": {"value": "..."}}`` (the Assistants
    API); None when it holds none that can be read."""
    if isinstance(block, str):
        return block
    text = block.get("text") if isinstance(block, Mapping) else None
    if isinstance(text, Mapping):
        text = text.get("value")
    return text if isinstance(text, str) else None


def clean_question(question: Any, max_chars: int) -> str:
    """The question as the agent uses it, or ``ConfigError`` saying why it cannot be used."""
    if not isinstance(question, str):
        raise ConfigError(f"question must be a string, not {type(question).__name__}")
    text = question.strip()
    if len(text) > max_chars:
        raise ConfigError(
            f"question is {len(text)} characters long; the limit is {max_chars} "
            "(setting max_question_chars, env RAG_MAX_QUESTION_CHARS)"
        )
    text = normalized(text).strip()
    if not text:
        raise ConfigError(
            "question must be a non-empty string (it is empty, or only whitespace or "
            "invisible characters)"
        )
    if not _WORD.search(text):
        raise ConfigError(
            f"question {text[:40]!r} has no letters or digits; ask something with words in it"
        )
    return text


def check_top_k(value: Any, what: str = "top_k") -> int:
    """A per-call passage count: an int from 1 to ``MAX_TOP_K`` (the bound of the ``top_k``
    setting), or ``ConfigError``."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise ConfigError(f"{what} must be an int, not {type(value).__name__} ({value!r})")
    if not 1 <= value <= MAX_TOP_K:
        raise ConfigError(f"{what} must be between 1 and {MAX_TOP_K}, not {value}")
    return value


def check_id(value: Any, what: str) -> str:
    """A user or thread id as a string, or ``ConfigError`` naming ``what`` and the problem."""
    if isinstance(value, int | uuid.UUID) and not isinstance(value, bool):
        value = str(value)
    if not isinstance(value, str):
        raise ConfigError(f"{what} must be a string, not {type(value).__name__}")
    if len(value) > MAX_ID_CHARS:
        raise ConfigError(f"{what} is {len(value)} characters long; the limit is {MAX_ID_CHARS}")
    if _ID_CONTROL.search(value) or _SURROGATE.search(value):
        raise ConfigError(f"{what}={value!r} is invalid: it contains control characters")
    if value.strip() and value != value.strip():
        raise ConfigError(
            f"{what}={value!r} is invalid: it starts or ends with whitespace (ids are used "
            "exactly as given, so another id would hold its memory and threads)"
        )
    return value


#: What to do instead of naming an imported conversation "" (``remember``, ``memory import``).
NAMED_AFTER_WHAT_WAS_SAID = "leave it out to name the conversation after what was said"


def check_name(value: Any, what: str, hint: str = "") -> str:
    """``check_id``, and not blank: a blank user or thread id names nobody and no
    conversation (a thread named "" could never be erased by name). ``hint`` says what to
    do instead."""
    name = check_id(value, what)
    if not name.strip():
        raise ConfigError(f"{what} must not be empty" + (f"; {hint}" if hint else ""))
    return name


def redact_url(url: str) -> str:
    """``url`` as messages and reprs may show it: no user info (passwords) or query string
    (API keys are sometimes passed there)."""
    from urllib.parse import urlsplit, urlunsplit

    try:
        parts = urlsplit(url)
        host = parts.netloc.rsplit("@", 1)[-1]
    except ValueError:
        return "<unparsable URL>"
    netloc = f"***@{host}" if "@" in parts.netloc else host
    return urlunsplit((parts.scheme, netloc, parts.path, "***" if parts.query else "", ""))

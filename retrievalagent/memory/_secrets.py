"""Secrets a user pasted are not kept in long-term memory.

People paste API keys, passwords and tokens into a chat while asking for help with them.
Conversation memory is recalled in later conversations and shown to the model again, so
before anything is stored, what looks like a secret is replaced by ``[secret removed]``:
well-known key formats (OpenAI, Anthropic, GitHub, GitLab, Slack, AWS, Google, Stripe,
JSON web tokens, private key blocks, HTTP authorization headers), the password in a URL,
the value of an environment variable named like one (``PGPASSWORD=...``), the value after
words such as "password" (in a few languages), "token" or "api key" (after "password:",
the rest of the clause: pass phrases have spaces), and long random-looking strings of mixed
letters and digits. A value found once is masked wherever its conversation repeats it
(``recurring_secrets``, ``mask_known``): replies quote what the user pasted. Ordinary
words, numbers, versions and ids (ticket 4411, PostgreSQL 13, a commit hash in lower-case
hex) are left alone.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

__all__ = ["MASK", "mask_known", "mask_metadata", "mask_secrets", "recurring_secrets"]

MASK = "[secret removed]"

_KNOWN_FORMATS = re.compile(
    r"""
    -----BEGIN[A-Z ]*PRIVATE\ KEY-----.*?(?:-----END[A-Z ]*PRIVATE\ KEY-----|\Z)
    | \bsk-(?:ant-|proj-|live-|test-)?[A-Za-z0-9_\-]{16,}
    | \b(?:ghp|gho|ghu|ghs|ghr)_[A-Za-z0-9]{20,}
    | \bgithub_pat_[A-Za-z0-9_]{20,}
    | \bglpat-[A-Za-z0-9_\-]{20,}
    | \bxox[abprs]-[A-Za-z0-9\-]{10,}
    | \b(?:AKIA|ASIA)[0-9A-Z]{16}\b
    | \bAIza[0-9A-Za-z_\-]{35}
    | \b(?:rk|pk|sk)_(?:live|test)_[A-Za-z0-9]{16,}
    | \beyJ[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]{8,}
    | (?i:\bauthorization)\s*:\s*(?i:basic|bearer|token|digest)\s+[^\s"',;]+
    """,
    re.VERBOSE | re.DOTALL,
)
# "password: hunter2", "my token is abc123", "API_KEY=...", "secret = '...'"
_LABELLED = re.compile(
    r"""
    (?P<label>(?:\b|_)(?:pass(?:word|wd|phrase)?|pwd|secret(?:[ _-]?(?:access[ _-]?)?key)?
      |(?:api|access|auth|private)[ _-]?(?:key|token)|token|bearer|client[ _-]?secret|credentials?
      |passwort|kennwort|mot\ de\ passe|contrase[ñn]a|senha|wachtwoord|has[łl]o|пароль)\b)
    (?P<sep>\s*(?:[:=]|\bis\b|\bwas\b|\bist\b|\best\b|\bes\b)\s*)
    (?P<value>"[^"\n]+"|'[^'\n]+'|[^\s"',;]{3,})
    """,
    re.VERBOSE | re.IGNORECASE,
)
# the password runs to the last "@" before the host: passwords may hold "@" and "/"
_URL_PASSWORD = re.compile(
    r"(?P<head>\b[a-z][a-z0-9+.\-]*://[^\s:/@]+:)(?P<value>\S+)(?=@[^\s@]*(?:\s|$))", re.I
)
# PGPASSWORD=..., export AWS_SECRET_ACCESS_KEY="...", GITHUB_TOKEN=...: an environment
# variable named like a secret (upper case, as the shell writes them)
_ENV_SECRET = re.compile(
    r"""\b[A-Z][A-Z0-9_]*(?:PASSWORD|PASSWD|PWD|TOKEN|SECRET|(?:API|ACCESS|SECRET|PRIVATE|AUTH)_?KEY)\s*=\s*(?P<value>"[^"\n]*"|'[^'\n]*'|[^\s"',;]+)"""
)
# after "password:" a pass phrase may have spaces: the rest of the clause goes
# (a clause ends at ";" or at ".", "!" or "?" before a space or the end: inside a word they
# belong to the password, as in "Sun.Flower!42")
_PASS_PHRASE = re.compile(
    r"""(?:\b|_)(?:pass(?:word|wd|phrase)?|pwd|passwort|kennwort|mot\ de\ passe|contrase[ñn]a
      |senha|wachtwoord|has[łl]o|пароль)\s*[:=]\s*
      (?P<value>[^\s"'\[;](?:[^.!?;\n]|[.!?](?=[^\s.!?;]))*)""",
    re.VERBOSE | re.IGNORECASE,
)
# 32+ characters of letters and digits (and - _ + / =) with upper case, lower case and digits
# mixed: what generated keys look like; lower-case hex (hashes) and words do not qualify.
_RANDOM = re.compile(r"(?<![A-Za-z0-9_\-+/=])[A-Za-z0-9_\-+/=]{32,}(?![A-Za-z0-9_\-+/=])")


# Words that follow "password is" / "token was" without being one.
_NOT_A_VALUE = frozenset(
    [
        "a",
        "an",
        "the",
        "not",
        "too",
        "very",
        "still",
        "being",
        "now",
        "expired",
        "wrong",
        "incorrect",
        "correct",
        "invalid",
        "valid",
        "missing",
        "empty",
        "weak",
        "strong",
        "long",
        "short",
        "required",
        "needed",
        "set",
        "reset",
        "changed",
        "same",
        "different",
        "fine",
        "ok",
        "okay",
        "working",
        "broken",
        "rejected",
        "accepted",
        "saved",
        "stored",
        "there",
        "here",
        "in",
        "on",
        "at",
        "for",
        "case",
        "sensitive",
        "encrypted",
        "hashed",
    ]
)


def _is_password_label(label: str) -> bool:
    return (
        not label.lower()
        .lstrip("_")
        .startswith(
            (
                "secret",
                "api",
                "access",
                "auth",
                "private",
                "token",
                "bearer",
                "client",
                "credential",
            )
        )
    )


def _labelled_secret(label: str, sep: str, value: str) -> bool:
    """Whether ``value`` after ``label`` is a secret: anything after ':' or '=' or in
    quotes, but after "is"/"was" only a word that is not ordinary prose ("the token is
    expired")."""
    if ":" in sep or "=" in sep or value[:1] in "\"'":
        return True
    if value.lower().strip(".!?") in _NOT_A_VALUE:
        return False
    looks_random = any(not c.isalpha() for c in value) or any(c.isupper() for c in value[1:])
    return looks_random or _is_password_label(label)


def _random_looking(token: str) -> bool:
    mixed = any(c.islower() for c in token) and any(c.isupper() for c in token)
    if len(token) == 40 and any(c.isdigit() or c in "/+" for c in token):
        return mixed  # the shape of an AWS secret access key
    return mixed and sum(c.isdigit() for c in token) >= 3


def mask_secrets(
    text: str, *, random_looking: bool = True, found: list[str] | None = None
) -> tuple[str, int]:
    """``text`` with what looks like a secret replaced by ``MASK``, and how many were
    (``random_looking=False``: not the long random-looking strings, which ids can be).
    ``found``, when given, collects the values masked."""
    count = 0

    def masked(m: re.Match[str]) -> str:
        nonlocal count
        count += 1
        if found is not None:
            found.append(m.group(0))
        return MASK

    def masked_value(m: re.Match[str]) -> str:
        nonlocal count
        value = m.group("value")
        if value.startswith("[secret"):
            return m.group(0)
        groups = m.groupdict()
        if "label" in groups and not _labelled_secret(groups["label"], groups["sep"], value):
            return m.group(0)
        count += 1
        if found is not None:
            found.append(value)
        return m.group(0)[: m.start("value") - m.start(0)] + MASK

    text = _KNOWN_FORMATS.sub(masked, text)
    text = _URL_PASSWORD.sub(masked_value, text)
    text = _ENV_SECRET.sub(masked_value, text)
    text = _PASS_PHRASE.sub(masked_value, text)
    text = _LABELLED.sub(masked_value, text)
    if not random_looking:
        return text, count
    text = _RANDOM.sub(lambda m: masked(m) if _random_looking(m.group(0)) else m.group(0), text)
    return text, count


def recurring_secrets(found: Iterable[str]) -> list[str]:
    """Of the values ``mask_secrets`` masked (its ``found``), those to mask wherever the
    same conversation repeats them (a reply quoting the password back, the key pasted again
    later), longest first. Only values that cannot be an ordinary word: "password: reset"
    masks "reset" there, not every "reset" of the conversation."""
    values = {value.strip("\"'").strip() for value in found}
    kept = [
        value
        for value in values
        if len(value) >= 4
        and MASK not in value
        and (not value.isalpha() or any(c.isupper() for c in value[1:]))
    ]
    return sorted(kept, key=len, reverse=True)


def mask_known(text: str, values: Sequence[str]) -> tuple[str, int]:
    """``text`` with every occurrence of the secret ``values`` (``recurring_secrets``) masked,
    and how many were."""
    count = 0
    for value in values:
        if value in text:
            count += text.count(value)
            text = text.replace(value, MASK)
    return text, count


# A metadata field whose name says it holds a secret ("api_key", "password", "authToken").
_SECRET_FIELD = re.compile(
    r"pass(?:word|wd|phrase)?|pwd|secret|token|api[_-]?key|access[_-]?key|private[_-]?key"
    r"|credential|authorization|cookie",
    re.IGNORECASE,
)


def mask_metadata(value: Any) -> tuple[Any, int]:
    """A message's metadata with its secrets masked, and how many were: the whole value of
    a field named like a secret, and secrets of known shapes inside other text (not long
    random-looking strings: message ids look like that)."""
    if isinstance(value, Mapping):
        out, count = {}, 0
        for key, item in value.items():
            if _SECRET_FIELD.search(str(key)) and item not in (None, "", [], {}):
                out[key], count = MASK, count + 1
            else:
                out[key], found = mask_metadata(item)
                count += found
        return out, count
    if isinstance(value, list):
        items = [mask_metadata(item) for item in value]
        return [item for item, _ in items], sum(found for _, found in items)
    if isinstance(value, str):
        return mask_secrets(value, random_looking=False)
    return value, 0

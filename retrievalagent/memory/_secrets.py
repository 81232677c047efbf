"""Secrets a user pasted are not kept in long-term memory.

People paste API keys, passwords and tokens into a chat while asking for help with them.
Conversation memory is recalled in later conversations and shown to the model again, so
before anything is stored, what looks like a secret is replaced by ``[secret removed]``:
well-known key formats (OpenAI, Anthropic, GitHub, GitLab, Slack, AWS, Google, Stripe,
JSON web tokens, private key blocks), the password in a URL, the value after words such
as "password", "token" or "api key", and long random-looking strings of mixed letters and
digits. Ordinary words, numbers, versions and ids (ticket 4411, PostgreSQL 13, a commit
hash in lower-case hex) are left alone.
"""

from __future__ import annotations

import re

__all__ = ["MASK", "mask_secrets"]

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
    """,
    re.VERBOSE | re.DOTALL,
)
# "password: hunter2", "my token is abc123", "API_KEY=...", "secret = '...'"
_LABELLED = re.compile(
    r"""
    (?P<label>(?:\b|_)(?:pass(?:word|wd|phrase)?|pwd|secret(?:[ _-]?(?:access[ _-]?)?key)?
      |(?:api|access|auth|private)[ _-]?(?:key|token)|token|bearer|client[ _-]?secret|credentials?)\b)
    (?P<sep>\s*(?:[:=]|\bis\b|\bwas\b)\s*["']?)
    (?P<value>[^\s"',;]{3,})
    """,
    re.VERBOSE | re.IGNORECASE,
)
_URL_PASSWORD = re.compile(
    r"(?P<head>\b[a-z][a-z0-9+.\-]*://[^\s:/@]+:)(?P<value>[^\s@/]+)(?=@)", re.I
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


def _labelled_secret(label: str, sep: str, value: str) -> bool:
    """Whether ``value`` after ``label`` is a secret: anything after ':' or '=', but after
    "is"/"was" only a word that is not ordinary prose ("the token is expired")."""
    if ":" in sep or "=" in sep:
        return True
    if value.lower().strip(".!?") in _NOT_A_VALUE:
        return False
    looks_random = any(not c.isalpha() for c in value) or any(c.isupper() for c in value[1:])
    return looks_random or label.lower().lstrip("_").startswith(("pass", "pwd"))


def _random_looking(token: str) -> bool:
    return (
        any(c.islower() for c in token)
        and any(c.isupper() for c in token)
        and sum(c.isdigit() for c in token) >= 3
    )


def mask_secrets(text: str) -> tuple[str, int]:
    """``text`` with what looks like a secret replaced by ``MASK``, and how many were."""
    count = 0

    def masked(_: re.Match[str]) -> str:
        nonlocal count
        count += 1
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
        return m.group(0)[: m.start("value") - m.start(0)] + MASK

    text = _KNOWN_FORMATS.sub(masked, text)
    text = _URL_PASSWORD.sub(masked_value, text)
    text = _LABELLED.sub(masked_value, text)
    text = _RANDOM.sub(lambda m: masked(m) if _random_looking(m.group(0)) else m.group(0), text)
    return text, count

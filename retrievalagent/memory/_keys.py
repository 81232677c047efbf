"""Keys that let a search fact be found by the words a user types, whatever surrounds them.

A fact's key is its alias -- the user's word or phrase -- as the BM25 term ids the corpus
is searched with (lower-cased, stop words dropped, Snowball-stemmed), so "backups",
"Backup" and "backup" give one key. A question yields the keys of all its runs of up to
``MAX_ALIAS_WORDS`` content words; a fact is recalled when its key is among them. Exact
lookups, so a question that does not contain the alias never recalls the fact this way.

The fact's *targets* are what goes into the BM25 query: the corpus terms it maps the alias
to, without the alias itself and without the words that phrase the mapping ("is called",
"another name for"), which would pull in passages about names.

An alias is words the user typed: a model's ``memory_key`` is checked against the question
(:func:`typed_alias`), so a key that is the whole fact sentence, as small models write it,
becomes the question's word it holds instead of a key no question ever contains.
"""

from __future__ import annotations

import re

from retrievalagent.index import MEMORY_META_WORDS, LexicalEncoder

__all__ = [
    "MAX_ALIAS_WORDS",
    "alias_key",
    "fact_targets",
    "mapping_alias",
    "question_keys",
    "typed_alias",
]

#: Longest alias (in content words) a question is cut into.
MAX_ALIAS_WORDS = 4
_QUOTED = re.compile(r"[\"“”«»]([^\"“”«»]{1,80})[\"“”«»]|'([^']{1,80})'")
# Words that only say how two terms relate ("another name for", "stands for", "short for").
_LINK_WORDS = frozenset(
    {"another", "name", "names", "stands", "stand", "short", "abbreviation", "acronym", "aka"}
)


def _word_ids(encoder: LexicalEncoder, text: str) -> list[tuple[int, ...]]:
    return [ids for ids in (encoder.term_ids(w) for w in encoder.words(text)) if ids]


def _key(parts: list[tuple[int, ...]]) -> str:
    return "t" + "-".join(str(i) for ids in parts for i in ids)


def alias_key(encoder: LexicalEncoder, alias: str) -> str:
    """The key of an alias ('' when it holds no content word or is too long to be one)."""
    parts = _word_ids(encoder, alias)
    return _key(parts) if 0 < len(parts) <= MAX_ALIAS_WORDS else ""


def question_keys(encoder: LexicalEncoder, question: str) -> tuple[str, ...]:
    """The key of every run of 1..MAX_ALIAS_WORDS consecutive content words of ``question``."""
    parts = _word_ids(encoder, question)
    keys = {
        _key(parts[i : i + n])
        for n in range(1, MAX_ALIAS_WORDS + 1)
        for i in range(len(parts) - n + 1)
    }
    return tuple(sorted(keys))


def _quoted(fact: str) -> list[str]:
    return [" ".join((a or b).split()) for a, b in _QUOTED.findall(fact)]


def mapping_alias(fact: str) -> str:
    """The alias of a fact phrased as a quoted mapping ('"vault" is called "repository"'):
    the first quoted term ('' when the fact quotes fewer than two terms)."""
    quoted = _quoted(fact)
    return quoted[0] if len(quoted) >= 2 else ""


def fact_targets(encoder: LexicalEncoder, fact: str, alias: str = "") -> str:
    """The corpus words a fact points search to: its quoted terms other than the alias, or
    (unquoted) its content words minus the alias and the words that phrase a mapping."""
    alias_words = set(encoder.words(alias))
    quoted = [q for q in _quoted(fact) if set(encoder.words(q)) - alias_words]
    if quoted and alias:
        text = " ".join(q for q in quoted if encoder.words(q) != encoder.words(alias))
    elif len(quoted) >= 2:
        text = " ".join(quoted[1:])
    else:
        text = fact
    skip = alias_words | MEMORY_META_WORDS | _LINK_WORDS
    words = (w for w in encoder.words(text) if w not in skip)
    return " ".join(dict.fromkeys(words))


def _holds(parts: list[tuple[int, ...]], run: list[tuple[int, ...]]) -> bool:
    return any(parts[i : i + len(run)] == run for i in range(len(parts) - len(run) + 1))


def typed_alias(encoder: LexicalEncoder, key: str, question: str, fact: str = "") -> str:
    """The alias a fact is keyed by: the longest run of ``question``'s own content words
    (up to ``MAX_ALIAS_WORDS``) that ``key`` holds, else the mapping's first quoted term
    when the question holds it, else '' (the fact is then recalled by meaning only)."""
    words = [w for w in encoder.words(question) if encoder.term_ids(w)]
    asked = [encoder.term_ids(w) for w in words]
    held = _word_ids(encoder, key)
    for n in range(min(MAX_ALIAS_WORDS, len(asked)), 0, -1):
        for i in range(len(asked) - n + 1):
            if _holds(held, asked[i : i + n]):
                return " ".join(words[i : i + n])
    quoted = mapping_alias(fact)
    if quoted and alias_key(encoder, quoted) in question_keys(encoder, question):
        return quoted
    return ""

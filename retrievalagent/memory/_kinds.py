"""What the well-known names a user mentions are: PostgreSQL is a database, Debian an
operating system, a ThinkPad a laptop.

A user states the thing by its name ("My cluster runs PostgreSQL 13 on Debian 11.") and
later asks by its kind ("How should I upgrade my database?"). The two share no word, and
the packaged embedder puts them no closer than the question and "My car is a 2012 Honda
Civic." (0.16 and 0.15 similar), so offline nothing linked them: recall found the
statement only when the assistant's reply happened to say "database". With a model, a
fact's subject links them (``found_by``); this table links them without one.

Both sides get words of their own, which no text holds: a memory naming PostgreSQL is
also searched by ``kinddatabase`` and ``namepostgres`` (``kinds_named``), and a question
has "my database" or "which DB" read as ``kinddatabase`` and gets ``namepostgres`` where
it names it in any spelling, "Postgres13" or "PostgreSQL" (``kinds_asked``). So an ordinary word never matches a kind: "Which system sends the
invoices?" or "the legal framework" asks about no kind, and neither do "Bali and Java",
"C# minor", "a fedora" or "the Vue cinema" name one. A name that is often something else
counts only with a version ("Java 17", "Windows 11", "Fedora 39", "Android 14", "Vue 3")
or is left out ("Go", "Rust", "Swift", "React", "Kafka", "Cassandra", "Julia", "Vim").
The words are English, as the lexical encoder's are.
"""

from __future__ import annotations

import re
from functools import cache

__all__ = ["kinds_asked", "kinds_named"]

#: A version written after a name: "13", "3.11", " 17", "-13" (what makes "Java 17" the
#: language and "Java" maybe an island).
_VERSION = (
    r"[\s-]?v?\d+(?:\.\d+)*(?!\d|\.\d)"
    r"(?!\s*(?:weeks?|years?|days?|months?|hours?|minutes?|times?|ago|people|kg|km)\b)"
)

#: Kind -> the names of that kind: a name is its token (``name<slug>``) and the pattern of
#: its spellings (case-insensitive unless it sets ``(?-i:...)``; a trailing version number
#: is allowed after any of them: "Postgres13", "python3.11", "sqlite3").
_NAMES: dict[str, dict[str, str]] = {
    "database": {
        "postgres": r"postgre(?:sql|s)|psql",
        "mysql": r"mysql",
        "mariadb": r"mariadb",
        "sqlite": r"sqlite",
        "mongodb": r"mongodb",
        "redis": r"redis",
        "elasticsearch": r"elasticsearch",
        "opensearch": r"opensearch",
        "dynamodb": r"dynamodb",
        "cockroachdb": r"cockroachdb",
        "sqlserver": r"sql\s+server|mssql",
        "clickhouse": r"clickhouse",
        "bigquery": r"bigquery",
        "neo4j": r"neo4j",
        "couchdb": r"couchdb",
        "influxdb": r"influxdb",
        "timescaledb": r"timescaledb",
        "memcached": r"memcached",
        "oracledb": r"oracle\s+(?:database|db)",
        "duckdb": r"duckdb",
        "qdrant": r"qdrant",
        "pgvector": r"pgvector",
    },
    "os": {
        "debian": r"debian",
        "ubuntu": r"ubuntu",
        "fedora": r"fedora" + _VERSION,
        "centos": r"centos",
        "rhel": r"rhel|red\s+hat\s+enterprise\s+linux",
        "rocky": r"rocky\s+linux",
        "almalinux": r"almalinux|alma\s+linux",
        "archlinux": r"arch\s+linux",
        "alpine": r"alpine\s+linux",
        "opensuse": r"opensuse",
        "nixos": r"nixos",
        "raspbian": r"raspbian|raspberry\s+pi\s+os",
        "windows": r"(?-i:Windows)(?:" + _VERSION + r"|\s+(?:server|xp|vista))",
        "macos": r"macos|mac\s+os(?:\s+x)?|(?-i:OS\s+X)",
        "freebsd": r"freebsd",
        "openbsd": r"openbsd",
        "ios": r"(?-i:iOS)",
        "android": r"android" + _VERSION,
        "chromeos": r"chromeos|chrome\s+os",
    },
    "language": {
        "python": r"(?<!monty\s)python",
        "javascript": r"javascript",
        "typescript": r"typescript",
        "golang": r"golang",
        "java": r"java" + _VERSION + r"|openjdk",
        "kotlin": r"kotlin",
        "haskell": r"haskell",
        "ocaml": r"ocaml",
        "perl": r"perl",
        "php": r"php",
        "cpp": r"c\+\+|cpp",
        "csharp": r"c#(?!\s+(?:minor|major|sharp|flat|note|chord))|csharp",
        "fortran": r"fortran",
        "cobol": r"cobol",
        "erlang": r"erlang",
        "clojure": r"clojure",
    },
    "webserver": {
        "nginx": r"nginx",
        "httpd": r"apache\s+httpd|httpd",
        "traefik": r"traefik",
        "haproxy": r"haproxy",
    },
    "container": {
        "docker": r"docker",
        "podman": r"podman",
        "kubernetes": r"kubernetes|k8s|k3s",
        "openshift": r"openshift",
    },
    "cloud": {
        "aws": r"aws|amazon\s+web\s+services",
        "azure": r"(?-i:Azure)",
        "gcp": r"gcp|google\s+cloud",
        "digitalocean": r"digitalocean|digital\s+ocean",
        "hetzner": r"hetzner",
        "linode": r"linode",
        "heroku": r"heroku",
    },
    "browser": {
        "firefox": r"firefox",
        "chrome": r"(?-i:Chrome)(?!\s+os)|google\s+chrome",
    },
    "editor": {
        "neovim": r"neovim|nvim",
        "emacs": r"emacs",
        "vscode": r"vscode|vs\s+code|visual\s+studio\s+code",
        "pycharm": r"pycharm",
        "intellij": r"intellij",
    },
    "framework": {
        "django": r"django",
        "fastapi": r"fastapi",
        "rails": r"ruby\s+on\s+rails",
        "springboot": r"spring\s+boot",
        "laravel": r"laravel",
        "nextjs": r"next\.js|nextjs",
        "vue": r"vue\.?js|vue" + _VERSION,
    },
    "queue": {
        "rabbitmq": r"rabbitmq",
        "activemq": r"activemq",
        "kafka": r"apache\s+kafka",
        "sqs": r"amazon\s+sqs",
    },
    "ci": {
        "githubactions": r"github\s+actions",
        "gitlabci": r"gitlab\s+ci",
        "circleci": r"circleci",
        "travisci": r"travis\s+ci",
    },
    "laptop": {
        "thinkpad": r"thinkpad",
        "macbook": r"macbook(?:\s+(?:air|pro))?",
        "chromebook": r"chromebook",
    },
    "phone": {
        "iphone": r"iphone",
        "pixel": r"pixel" + _VERSION,
        "oneplus": r"oneplus",
    },
}

#: Kind -> how a text names the kind itself ("database", "OS"). It counts as the kind only
#: after a word that makes it someone's or asks which (``_OWNED``): "my database", "which
#: OS", "our main DB", "what Linux distribution". A question about the thing in general
#: ("Who created Linux?", "What is a database index?") asks about no memory of the user.
_ASKED: dict[str, str] = {
    "database": r"databases?|dbs?|dbms|rdbms",
    "os": r"operating\s+systems?|os|linux\s+(?:distros?|distributions?)|distros?|linux",
    "language": r"(?:programming|coding|scripting)\s+languages?",
    "webserver": r"web\s*servers?|reverse\s+prox(?:y|ies)",
    "container": r"container\s+(?:runtime|engine|platform)s?|orchestrators?",
    "cloud": r"cloud\s+(?:providers?|platforms?|hosting)|hosting\s+providers?|cloud",
    "browser": r"(?:web\s+)?browsers?",
    "editor": r"(?:text|code)\s+editors?|editors?|ides?",
    "framework": r"web\s+frameworks?",
    "queue": r"message\s+(?:queues?|brokers?)|queue\s+system",
    "ci": r"ci(?:/cd)?|continuous\s+integration|(?:ci|build)\s+pipelines?",
    "laptop": r"laptops?|notebook\s+computers?",
    "phone": r"smartphones?|mobile\s+phones?|phone\s+models?",
}
#: Kinds whose phrase says whose it is itself (no word may come between: "my brother
#: phone" is someone phoning).
_ASKED_WHOLE: dict[str, str] = {
    "phone": r"(?:my|our|which|what)\s+phone(?!\s+(?:number|bill|call|plan)s?\b)",
}
#: What makes a kind someone's or asks which, and up to two words between ("my production
#: database"; not "what is a database": those words say it is the kind in general).
_OWNED = (
    r"(?:my|our|your|his|her|their|which|what|whose)\s+"
    r"(?:(?!(?:is|are|was|were|a|an|the|of|for|in|on|to|do|does|did|and|or)\b)[\w.-]+\s+){0,2}?"
)

#: Around a name or a phrase: not inside a longer word ("non-Debian" is not Debian).
_BEFORE = r"(?<![\w.+#-])"
_AFTER = r"(?![^\W\d]|[+#]|\.[^\W\d])"


@cache
def _named() -> tuple[re.Pattern[str], list[tuple[str, str]]]:
    """One pattern for every name (a group each), and per group the tokens it adds."""
    tokens: list[tuple[str, str]] = []
    groups = []
    for kind, names in _NAMES.items():
        for slug, spellings in names.items():
            groups.append(f"(?P<n{len(tokens)}>{spellings})")
            tokens.append((f"kind{kind}", f"name{slug}"))
    alternatives = "|".join(groups)
    pattern = re.compile(rf"{_BEFORE}(?:{alternatives})(?:\d+(?:\.\d+)*)?{_AFTER}", re.IGNORECASE)
    return pattern, tokens


@cache
def _asked() -> re.Pattern[str]:
    """One pattern for every kind a text may name as someone's; the kind's group holds
    the phrase (what ``kinds_asked`` replaces), the words before it stay."""
    owned = "|".join(f"{_OWNED}(?P<{kind}>{phrase})" for kind, phrase in _ASKED.items())
    whole = "|".join(f"(?P<w_{kind}>{phrase})" for kind, phrase in _ASKED_WHOLE.items())
    return re.compile(rf"{_BEFORE}(?:{owned}|{whole}){_AFTER}", re.IGNORECASE)


def _kind_of(match: re.Match[str]) -> str:
    """The kind a match of ``_asked`` names (its group's name, without ``w_``)."""
    return (match.lastgroup or "").removeprefix("w_")


def _names_in(text: str) -> list[tuple[str, str]]:
    pattern, tokens = _named()
    found = []
    for match in pattern.finditer(text):
        group = match.lastgroup
        if group is not None:
            found.append(tokens[int(group[1:])])
    return found


def kinds_named(text: str) -> str:
    """Words to search a memory by besides its own: the kind and the name of each
    well-known name in ``text``, and the kind of each kind it names itself ("" when none):
    "runs PostgreSQL 13 on Debian 11" gives "kinddatabase namepostgres kindos namedebian"."""
    words = [word for pair in _names_in(text) for word in pair]
    words += [f"kind{_kind_of(m)}" for m in _asked().finditer(text) if m.lastgroup]
    return " ".join(dict.fromkeys(words))


def kinds_asked(question: str) -> str:
    """``question`` as memories are searched for it: each phrase naming a kind ("my
    database", "which OS") put as the kind's word, which every memory naming that kind or
    something of it holds, and the word of each name it mentions added ("Which Postgres
    release?" also matches "PostgreSQL 13"). "How should I upgrade my database?" gives
    "How should I upgrade kinddatabase?". The phrase is replaced, not joined: a question
    about the OS of a Debian box then counts the box's kind as its word, and a short
    question leans on it as much as a long one."""
    names = " ".join(dict.fromkeys(name for _, name in _names_in(question)))
    asked = _asked().sub(_as_kind, question)
    return f"{asked} {names}".strip()


def _as_kind(match: re.Match[str]) -> str:
    """A match of ``_asked`` with its phrase put as the kind's word ("my production
    database": "my production kinddatabase")."""
    group = match.lastgroup or ""
    kept = match.group(0)[: match.start(group) - match.start()] if group[:2] != "w_" else ""
    return f"{kept} kind{_kind_of(match)} "

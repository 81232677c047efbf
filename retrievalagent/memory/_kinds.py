"""What the well-known names a user mentions are: PostgreSQL is a database, Debian an
operating system, a ThinkPad a laptop.

A user states the thing by its name ("My cluster runs PostgreSQL 13 on Debian 11.") and
later asks by its kind ("How should I upgrade my database?"). The two share no word, and
the packaged embedder puts them no closer than the question and "My car is a 2012 Honda
Civic." (0.16 and 0.15 similar), so offline nothing linked them: recall found the
statement only when the assistant's reply happened to say "database". A memory is also
searched by the kinds of the names it holds (``kinds_named``), and by the other spellings
of a name ("Postgres" for "PostgreSQL"). With a model, a fact's subject does the same
(``found_by``); this table is what links them without one.

Only names that are rarely anything else are listed: "Go", "Rust", "Swift", "React",
"Windows" or "Alpine" alone, "Cassandra", "Julia", "Jenkins", "Kafka", "Bash", "Caddy" or
"Snowflake" would tag a trip, a car, a house, a person, a novel, a party or the weather. The words are English,
as the lexical encoder's are.
"""

from __future__ import annotations

import re
from functools import cache

__all__ = ["kinds_named"]

#: Kind words -> the names of that kind, each as its spellings apart by "|" (lower case; a
#: spelling may be several words).
_KINDS: dict[str, tuple[str, ...]] = {
    "database db": (
        "postgresql|postgres",
        "mysql",
        "mariadb",
        "sqlite",
        "mongodb|mongo",
        "redis",
        "elasticsearch",
        "opensearch",
        "dynamodb",
        "cockroachdb",
        "sql server|mssql",
        "clickhouse",
        "bigquery",
        "neo4j",
        "couchdb",
        "influxdb",
        "timescaledb",
        "memcached",
        "oracle database",
        "supabase",
        "duckdb",
        "etcd",
        "qdrant",
        "pgvector",
    ),
    "operating system os linux distro": (
        "debian",
        "ubuntu",
        "fedora",
        "centos",
        "rhel|red hat enterprise linux",
        "rocky linux",
        "almalinux",
        "arch linux",
        "alpine linux",
        "opensuse",
        "gentoo",
        "nixos",
        "linux mint",
        "raspbian|raspberry pi os",
    ),
    "operating system os": (
        "windows 7",
        "windows 10",
        "windows 11",
        "windows server",
        "macos|mac os|os x",
        "freebsd",
        "openbsd",
        "netbsd",
        "ios",
        "android",
        "chromeos",
    ),
    "programming language language": (
        "python",
        "javascript",
        "typescript",
        "golang",
        "java",
        "kotlin",
        "scala",
        "erlang",
        "haskell",
        "ocaml",
        "perl",
        "php",
        "c++|cpp",
        "c#",
        "fortran",
        "cobol",
        "clojure",
        "lua",
    ),
    "web server proxy": ("nginx", "apache httpd", "traefik", "haproxy", "lighttpd"),
    "container": ("docker", "podman", "containerd"),
    "cluster orchestration container": ("kubernetes|k8s", "openshift", "docker swarm"),
    "cloud provider cloud": (
        "aws|amazon web services",
        "azure",
        "gcp|google cloud",
        "digitalocean",
        "hetzner",
        "linode",
        "heroku",
        "cloudflare",
    ),
    "browser": ("firefox", "chrome", "chromium"),
    "editor ide": ("vim", "neovim", "emacs", "vscode|vs code", "pycharm", "intellij"),
    "framework web framework": (
        "django",
        "fastapi",
        "ruby on rails",
        "spring boot",
        "laravel",
        "next.js",
        "vue.js|vue",
    ),
    "message queue broker queue": ("apache kafka", "rabbitmq", "activemq", "amazon sqs"),
    "ci pipeline build": ("github actions", "gitlab ci", "circleci", "travis ci"),
    "shell": ("zsh", "powershell"),
    "laptop computer": ("thinkpad", "macbook", "chromebook"),
    "phone": ("iphone", "pixel 7", "pixel 8", "pixel 9", "oneplus"),
}


@cache
def _table() -> tuple[re.Pattern[str], dict[str, str]]:
    """One pattern for every spelling, and per spelling (lower case, single spaces) the
    words it adds: its kind and its other spellings."""
    adds: dict[str, list[str]] = {}
    for kind, names in _KINDS.items():
        for name in names:
            spellings = name.split("|")
            for spelling in spellings:
                others = [s for s in spellings if s != spelling]
                adds.setdefault(spelling, []).extend([kind, *others])
    longest_first = sorted(adds, key=len, reverse=True)  # "sql server" before "sql"
    alternatives = "|".join(re.escape(n).replace(r"\ ", r"\s+") for n in longest_first)
    pattern = re.compile(rf"(?<![\w.+#-])({alternatives})(?![\w+#]|\.\w)", re.IGNORECASE)
    return pattern, {name: " ".join(" ".join(words).split()) for name, words in adds.items()}


def kinds_named(text: str) -> str:
    """The kinds of the well-known names in ``text`` and their other spellings, as words
    to search it by ("" when it names none): "runs PostgreSQL 13 on Debian 11" gives
    "database db postgres operating system os linux distro"."""
    pattern, adds = _table()
    found = (adds[" ".join(m.group(1).lower().split())] for m in pattern.finditer(text))
    return " ".join(dict.fromkeys(" ".join(found).split()))

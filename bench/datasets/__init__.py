"""Retrieval evaluation datasets built from text shipped in Debian and PyPI packages.

    from bench.datasets import load, path, names
    corpus, queries = load("manpages")   # builds into bench/.cache/manpages/ if missing
    path("pydocs")                       # Path of bench/.cache/pydocs/

Passages: ``{"id", "source", "title", "text"}``. Queries: ``{"id", "query", "relevant"}``
(``relevant`` lists passage ids); the ``aliases`` and ``glossary`` queries add ``alias``,
``canonical`` and ``phrasings`` (other sentences holding the alias), and both sets have
control questions (``load_controls``) that use no taught alias.
See ``bench/datasets/README.md`` for how each set is made.
"""

from __future__ import annotations

import json
from pathlib import Path

from .passages import read_jsonl
from .sources import cache_dir

__all__ = ["NAMES", "load", "load_controls", "names", "path", "rebuild"]

NAMES = ("manpages", "pydocs", "aliases", "glossary", "scale")


def names() -> tuple[str, ...]:
    """The dataset names ``load`` accepts."""
    return NAMES


def path(name: str) -> Path:
    """The folder of a dataset in the cache (``bench/.cache/<name>``); it may not exist yet."""
    if name not in NAMES:
        raise ValueError(f"unknown dataset {name!r}; choose from {', '.join(NAMES)}")
    return cache_dir() / name


def _corpus_file(name: str) -> Path:
    """Where the corpus of a set lives (``aliases`` points at its base set's corpus)."""
    d = path(name)
    manifest = d / "manifest.json"
    if manifest.exists():
        ref = json.loads(manifest.read_text()).get("corpus")
        if ref:
            return path(ref) / "corpus.jsonl"
    return d / "corpus.jsonl"


def rebuild(name: str) -> None:
    """(Re)build one dataset, fetching its packages if they are not cached."""
    from .build import run

    path(name)  # validates the name
    if name == "aliases" and not (path("manpages") / "corpus.jsonl").exists():
        run("manpages")
    run(name)


def load(name: str, build_missing: bool = True) -> tuple[list[dict], list[dict]]:
    """Return ``(corpus, queries)`` of a dataset, building it first if the cache lacks it."""
    d = path(name)
    if not (d / "queries.jsonl").exists() or not _corpus_file(name).exists():
        if not build_missing:
            raise FileNotFoundError(f"{d} is not built: run python -m bench.datasets.build")
        rebuild(name)
    return read_jsonl(_corpus_file(name)), read_jsonl(d / "queries.jsonl")


def load_controls(name: str, build_missing: bool = True) -> list[dict]:
    """The control questions of an alias set (``aliases``, ``glossary``): no taught alias."""
    f = path(name) / "controls.jsonl"
    if not f.exists():
        if not build_missing:
            raise FileNotFoundError(f"{f} is not built: run python -m bench.datasets.build")
        rebuild(name)
    if not f.exists():
        raise ValueError(f"{name!r} has no control questions")
    return read_jsonl(f)

"""Build the retrieval benchmark datasets into ``bench/.cache/<set>/``.

    python -m bench.datasets.build                 # every set
    python -m bench.datasets.build --only manpages  # one set (repeatable)
    python bench/datasets/build.py --only scale --baseline

Each set is written as ``corpus.jsonl`` and ``queries.jsonl`` plus ``manifest.json``
(package versions, counts, build time). The output is deterministic: the same pinned
packages give byte-identical files.
"""

from __future__ import annotations

import argparse
import json
import logging
import random
import re
import sys
import time
from collections import Counter, defaultdict
from pathlib import Path

if __package__ in (None, ""):  # run as a script: make ``bench.datasets`` importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
    __package__ = "bench.datasets"

from bench.datasets import catalog
from bench.datasets.markup import Block, parse_markdown, parse_rst
from bench.datasets.passages import (
    MAX_WORDS,
    MIN_WORDS,
    TARGET_WORDS,
    chunk_paragraphs,
    dedup,
    nwords,
    tokenize,
    write_jsonl,
)
from bench.datasets.roff import ManPage, decode, parse_manpage
from bench.datasets.sources import (
    Deb,
    Sdist,
    cache_dir,
    fetch_debs,
    fetch_sdists,
    read_deb,
    read_sdist,
)

log = logging.getLogger("bench.datasets")

SEED = 20261122
SETS = ("manpages", "pydocs", "aliases", "glossary", "scale")


# =========================================================================== man pages

SKIP_MAN_SECTIONS = {"NAME", "COLOPHON"}


def page_id(path: str) -> str:
    """``usr/share/man/man2/open.2.gz`` -> ``open.2``."""
    return re.sub(r"\.gz$", "", path.rsplit("/", 1)[-1])


def man_passages(
    page: ManPage,
    pid: str,
    source: str,
    target: int = TARGET_WORDS,
    max_words: int = MAX_WORDS,
) -> list[dict]:
    """Passages of one man page: each (sub)section chunked, small pieces merged.

    The text of a passage starts with its section heading (``DESCRIPTION`` or
    ``DESCRIPTION: Signal dispositions``), the way a chunker keeps heading context.
    The NAME section is left out (the page title and the queries come from it).
    Every passage carries ``_sections``: the top-level sections it covers.
    """
    title = f"{page.name}({page.section})" if page.section else page.name
    pieces: list[tuple[str, str, str]] = []  # (top section, label, body)
    for s in page.sections:
        if s.name in SKIP_MAN_SECTIONS and not s.sub:
            continue
        label = f"{s.name}: {s.sub}" if s.sub else s.name
        for body in chunk_paragraphs(s.paragraphs, max_words, target):
            pieces.append((s.name, label, body))
    # merge runs of small pieces forward (LIBRARY + SYNOPSIS, short SEE ALSO, ...)
    groups: list[list[tuple[str, str, str]]] = []
    for piece in pieces:
        w = nwords(piece[2])
        if groups:
            gw = sum(nwords(p[2]) for p in groups[-1])
            if gw < MIN_WORDS and gw + w <= max_words:
                groups[-1].append(piece)
                continue
        groups.append([piece])
    if len(groups) > 1:
        lw = sum(nwords(p[2]) for p in groups[-1])
        pw = sum(nwords(p[2]) for p in groups[-2])
        if lw < MIN_WORDS and lw + pw <= max_words * 1.25:
            groups[-2].extend(groups.pop())
    out = []
    for k, g in enumerate(groups):
        parts = []
        last_label = None
        for _, label, body in g:
            parts.append(body if label == last_label else f"{label}\n{body}")
            last_label = label
        out.append(
            {
                "id": f"{pid}#{k}",
                "source": source,
                "title": title,
                "text": "\n\n".join(parts),
                "_sections": sorted({sec for sec, _, _ in g}),
            }
        )
    return out


def load_manpages(debs: tuple[Deb, ...], prefix: bool = False) -> list[tuple[str, str, ManPage]]:
    """Parse every real (non-alias) page of the packages: (page id, source path, page)."""
    paths = fetch_debs(debs)
    pages = []
    for d in debs:
        for path, raw in read_deb(d, paths[d.label]):
            page = parse_manpage(decode(raw))
            if page is None:
                continue
            pid = page_id(path)
            pages.append((f"{d.name}:{pid}" if prefix else pid, path, page))
    return pages


def clean_summary(s: str) -> str:
    s = re.sub(r"\s+", " ", s).strip().rstrip(".")
    return s


def build_manpages() -> dict:
    """Man pages of Linux man-pages 6.03: NAME line description -> DESCRIPTION passages."""
    pages = load_manpages(catalog.MANPAGES_DEBS)
    corpus: list[dict] = []
    cands: list[dict] = []
    summaries: Counter = Counter()
    for pid, path, page in pages:
        ps = man_passages(page, pid, path)
        corpus.extend(ps)
        summaries[clean_summary(page.summary).lower()] += 1
        desc = [p["id"] for p in ps if "DESCRIPTION" in p["_sections"]]
        if page.summary and desc:
            first = page.names.split(",")[0].strip()
            cands.append(
                {"page": pid, "name": first, "query": clean_summary(page.summary), "relevant": desc}
            )
    corpus, remap = dedup(corpus)
    queries = []
    for c in cands:
        q = c["query"]
        if summaries[q.lower()] > 1:  # the same description on several pages: ambiguous
            continue
        if len([t for t in tokenize(q) if not t.isdigit()]) < 3:
            continue
        if len(c["relevant"]) > 4:  # very long DESCRIPTION: the NAME line is too coarse
            continue
        rel = sorted(dict.fromkeys(remap.get(r, r) for r in c["relevant"]), key=_idkey)
        queries.append(
            {
                "id": f"man-{c['page']}",
                "query": f"{c['name']}: {q}" if c["name"] else q,
                "relevant": rel,
                "description": q,
            }
        )
    # the aliases set re-words the description alone (no function name to lean on)
    pool = [dict(q, query=q["description"]) for q in queries]
    queries = _sample(queries, 500)
    for p in corpus:
        p.pop("_sections")
    return {
        "corpus": corpus,
        "queries": queries,
        "pool": pool,  # every valid query, for the aliases set
        "packages": [d.label for d in catalog.MANPAGES_DEBS],
    }


def _idkey(pid: str) -> tuple:
    base, _, k = pid.rpartition("#")
    return (base, int(k) if k.isdigit() else 0)


def _sample(rows: list[dict], k: int) -> list[dict]:
    rows = sorted(rows, key=lambda r: r["id"])
    if len(rows) > k:
        rows = random.Random(SEED).sample(rows, k)
        rows.sort(key=lambda r: r["id"])
    return rows


# =========================================================================== docs (reST/MD)

GENERIC_HEADING = re.compile(
    r"^(installation|installing|install|usage|overview|introduction|intro|quickstart|"
    r"example|examples|api|api reference|reference|notes?|summary|see also|"
    r"table of contents|contents|indices and tables|license|credits|"
    r"(what's|whats) new.*|release notes.*|changelog|changes|version \S+|"
    r"deprecated.*|removed.*|backwards incompatible changes|bug ?fixes|features|"
    r"improvements|other changes|new features|breaking changes|migration guide)$",
    re.I,
)


def parse_doc(path: str, raw: bytes) -> list[Block]:
    text = raw.decode("utf-8", errors="replace")
    if path.endswith(".md"):
        return parse_markdown(text)
    return parse_rst(text)


def doc_passages(
    blocks: list[Block],
    doc_id: str,
    source: str,
    title: str,
    target: int = TARGET_WORDS,
    max_words: int = MAX_WORDS,
) -> list[dict]:
    """Passages of one document: section bodies WITHOUT their headings.

    A section shorter than MIN_WORDS is merged into the following section of the same
    document. Every passage carries ``_heads``: indexes of the blocks it covers.
    """
    pieces: list[tuple[int, str]] = []
    for bi, b in enumerate(blocks):
        for body in chunk_paragraphs(b.paragraphs, max_words, target):
            pieces.append((bi, body))
    groups: list[list[tuple[int, str]]] = []
    for piece in pieces:
        w = nwords(piece[1])
        if groups:
            gw = sum(nwords(p[1]) for p in groups[-1])
            if gw < MIN_WORDS and gw + w <= max_words:
                groups[-1].append(piece)
                continue
        groups.append([piece])
    if len(groups) > 1:
        lw = sum(nwords(p[1]) for p in groups[-1])
        pw = sum(nwords(p[1]) for p in groups[-2])
        if lw < MIN_WORDS and lw + pw <= max_words * 1.25:
            groups[-2].extend(groups.pop())
    out = []
    for k, g in enumerate(groups):
        out.append(
            {
                "id": f"{doc_id}#{k}",
                "source": source,
                "title": title,
                "text": "\n\n".join(body for _, body in g),
                "_heads": sorted({bi for bi, _ in g}),
            }
        )
    return out


def doc_title(blocks: list[Block], path: str) -> str:
    for b in blocks:
        if b.level >= 1 and b.heading:
            return b.heading
    return path.rsplit("/", 1)[-1].rsplit(".", 1)[0]


def good_heading(h: str) -> bool:
    words = [w for w in h.split() if re.fullmatch(r"[A-Za-z][A-Za-z'-]*[A-Za-z?,:]?", w)]
    if len(words) < 3 or len(h) > 120:
        return False
    if GENERIC_HEADING.match(h.strip().rstrip(":?!.")):
        return False
    if re.search(r"[{}<>=\[\]]|\(\)|\w\.\w+\(|^\W|\d+\.\d+\.\d+", h):
        return False  # code signatures, versions
    letters = sum(c.isalpha() for c in h)
    return letters / max(len(h), 1) > 0.6


def load_docs(sdists: tuple[Sdist, ...]) -> list[tuple[str, str, str, list[Block]]]:
    """Parse every documentation file: (doc id, source path, title, blocks)."""
    archives = fetch_sdists(sdists)
    docs = []
    for s in sdists:
        for path, raw in read_sdist(s, archives[s.label]):
            blocks = parse_doc(path, raw)
            if not blocks:
                continue
            inner = path.split("/", 1)[1]
            docs.append((f"{s.name}:{inner}", path, doc_title(blocks, path), blocks))
    return docs


def build_pydocs() -> dict:
    """Docs of Python projects (sdists): section heading -> its body (heading removed)."""
    docs = load_docs(catalog.PYDOCS_SDISTS)
    corpus: list[dict] = []
    cands: list[dict] = []
    titles = {t.lower() for _, _, t, _ in docs}
    heading_count: Counter = Counter()
    for _, _, _, blocks in docs:
        for b in blocks:
            heading_count[b.heading.lower()] += 1
    for doc_id, path, title, blocks in docs:
        ps = doc_passages(blocks, doc_id, path, title)
        corpus.extend(ps)
        by_block: dict[int, list[str]] = defaultdict(list)
        for p in ps:
            for bi in p["_heads"]:
                by_block[bi].append(p["id"])
        first_title = next((i for i, b in enumerate(blocks) if b.level >= 1), -1)
        for bi, b in enumerate(blocks):
            h = b.heading
            if bi == first_title or b.level < 1 or not good_heading(h):
                continue
            if heading_count[h.lower()] > 1 or h.lower() in titles:
                continue
            if b.words < 40 or not 1 <= len(by_block[bi]) <= 3:
                continue
            cands.append({"doc": doc_id, "bi": bi, "query": h, "relevant": by_block[bi]})
    corpus = [p for p in corpus if nwords(p["text"]) >= 20]  # stubs (a lone toctree page)
    corpus, remap = dedup(corpus)
    queries = []
    for c in cands:
        rel = sorted(dict.fromkeys(remap.get(r, r) for r in c["relevant"]), key=_idkey)
        queries.append({"id": f"doc-{c['doc']}@{c['bi']}", "query": c["query"], "relevant": rel})
    pool = list(queries)
    queries = _sample(queries, 500)
    for p in corpus:
        p.pop("_heads")
    return {
        "corpus": corpus,
        "queries": queries,
        "pool": pool,
        "packages": [s.label for s in catalog.PYDOCS_SDISTS],
    }


# =========================================================================== driver


def set_dir(name: str) -> Path:
    d = cache_dir() / name
    d.mkdir(parents=True, exist_ok=True)
    return d


def stats(corpus: list[dict], queries: list[dict]) -> dict:
    lens = [nwords(p["text"]) for p in corpus]
    return {
        "passages": len(corpus),
        "queries": len(queries),
        "avg_passage_words": round(sum(lens) / max(len(lens), 1), 1),
        "min_passage_words": min(lens) if lens else 0,
        "max_passage_words": max(lens) if lens else 0,
        "avg_relevant_per_query": round(
            sum(len(q["relevant"]) for q in queries) / max(len(queries), 1), 2
        ),
    }


def write_set(
    name: str,
    corpus: list[dict] | None,
    queries: list[dict],
    meta: dict,
    controls: list[dict] | None = None,
) -> dict:
    d = set_dir(name)
    if corpus is not None:
        ids = {p["id"] for p in corpus}
        assert len(ids) == len(corpus), f"{name}: duplicate passage ids"
        for q in queries:
            missing = [r for r in q["relevant"] if r not in ids]
            assert not missing, f"{name}: query {q['id']} has unknown relevant ids {missing}"
        write_jsonl(d / "corpus.jsonl", corpus)
    elif meta.get("corpus"):  # reuses another set's corpus: a relative symlink to it
        link = d / "corpus.jsonl"
        if link.is_symlink() or link.exists():
            link.unlink()
        link.symlink_to(Path("..") / meta["corpus"] / "corpus.jsonl")
    write_jsonl(d / "queries.jsonl", queries)
    if controls is not None:
        write_jsonl(d / "controls.jsonl", controls)
    (d / "manifest.json").write_text(json.dumps(meta, indent=2, sort_keys=True) + "\n")
    return meta


_BUILT: dict[str, dict] = {}


def _get(name: str) -> dict:
    """Build a base set once per process (aliases reuse manpages' query pool)."""
    if name not in _BUILT:
        _BUILT[name] = {"manpages": build_manpages, "pydocs": build_pydocs}[name]()
    return _BUILT[name]


def run(name: str) -> dict:
    t0 = time.perf_counter()
    controls = None
    if name in ("manpages", "pydocs"):
        res = _get(name)
        meta = {"name": name, "packages": res["packages"], **stats(res["corpus"], res["queries"])}
        corpus, queries = res["corpus"], res["queries"]
    elif name == "aliases":
        from bench.datasets.aliases import build_aliases

        res = build_aliases(_get("manpages"))
        corpus, queries, controls = None, res["queries"], res["controls"]
        meta = {"name": name, "packages": res["packages"], "corpus": res["corpus_ref"]}
        meta.update(stats(_get("manpages")["corpus"], queries))
        meta["pairs_used"] = res["pairs_used"]
        meta["pairs_rejected"] = res["pairs_rejected"]
        meta["pairs_considered"] = res["pairs_considered"]
    elif name == "glossary":
        from bench.datasets.glossary import build_glossary

        res = build_glossary()
        corpus, queries, controls = res["corpus"], res["queries"], res["controls"]
        meta = {"name": name, "packages": res["packages"], **stats(corpus, queries)}
        for key in ("pairs_usable", "pairs_rejected", "pairs_by_kind", "pairs_by_source"):
            meta[key] = res[key]
        meta["passages_edited"] = res["passages_edited"]
    elif name == "scale":
        from bench.datasets.scale import build_scale

        res = build_scale()
        corpus, queries = res["corpus"], res["queries"]
        meta = {"name": name, "packages": res["packages"], **stats(corpus, queries)}
    else:
        raise SystemExit(f"unknown set {name!r}; choose from {', '.join(SETS)}")
    if controls is not None:
        meta["controls"] = len(controls)
        meta["phrasings_per_query"] = min(len(q["phrasings"]) for q in queries + controls)
    meta["build_seconds"] = round(time.perf_counter() - t0, 1)
    write_set(name, corpus, queries, meta, controls)
    if corpus is not None:
        meta["corpus_mb"] = round((set_dir(name) / "corpus.jsonl").stat().st_size / 2**20, 1)
    brief = {k: v for k, v in meta.items() if not k.startswith(("packages", "pairs_"))}
    log.info("%s: %s", name, json.dumps(brief))
    return meta


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--only", action="append", choices=SETS, help="build only this set")
    ap.add_argument(
        "--baseline", action="store_true", help="also run the rank_bm25 sanity baseline"
    )
    args = ap.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s", datefmt="%H:%M:%S")
    names = args.only or list(SETS)
    for name in names:
        run(name)
    if args.baseline:
        from bench.datasets.baseline import report

        for name in names:
            if name != "scale":
                report(name)
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""The ``scale`` set: >100k passages of real text for latency and memory benchmarks.

Man pages of many Debian packages, the documentation folders of many PyPI sdists and the
docstrings of five large Python code bases, cut into ~100-300-word passages. Its ~200
queries are sampled the same way as the evaluation sets (man page NAME lines -> DESCRIPTION
passages, document headings -> their section), so they can double as a rough quality
check at scale, but the set exists for timing.
"""

from __future__ import annotations

import os
import random
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

from . import catalog
from .passages import dedup, nwords, tokenize
from .sources import Deb, Sdist, fetch_debs, fetch_sdists

TARGET = 170
MAX = 300
MIN_DOCSTRING_WORDS = 30
MIN_PASSAGE_WORDS = 20
SEED = 20261122


def _man_job(args: tuple[Deb, Path]) -> tuple[list[dict], list[dict]]:
    from .build import clean_summary, man_passages, page_id
    from .roff import decode, parse_manpage
    from .sources import read_deb

    deb, path = args
    corpus, cands = [], []
    for src, raw in read_deb(deb, path):
        page = parse_manpage(decode(raw))
        if page is None:
            continue
        pid = f"{deb.name}:{page_id(src)}"
        ps = man_passages(page, pid, src, TARGET, MAX)
        corpus.extend(ps)
        desc = [p["id"] for p in ps if "DESCRIPTION" in p["_sections"]]
        q = clean_summary(page.summary)
        if q and desc and len(desc) <= 4 and len(tokenize(q)) >= 3:
            cands.append({"id": f"man-{pid}", "query": q, "relevant": desc})
    for p in corpus:
        p.pop("_sections")
    return corpus, cands


def _doc_job(args: tuple[Sdist, Path]) -> tuple[list[dict], list[dict]]:
    from .build import doc_passages, doc_title, good_heading, parse_doc
    from .sources import read_sdist

    sd, path = args
    corpus, cands = [], []
    for src, raw in read_sdist(sd, path):
        blocks = parse_doc(src, raw)
        if not blocks:
            continue
        doc_id = f"{sd.name}:{src.split('/', 1)[1]}"
        title = doc_title(blocks, src)
        ps = doc_passages(blocks, doc_id, src, title, TARGET, MAX)
        corpus.extend(ps)
        for bi, b in enumerate(blocks):
            rel = [p["id"] for p in ps if bi in p["_heads"]]
            if b.level >= 2 and good_heading(b.heading) and b.words >= 40 and 1 <= len(rel) <= 3:
                cands.append({"id": f"doc-{doc_id}@{bi}", "query": b.heading, "relevant": rel})
    for p in corpus:
        p.pop("_heads")
    return corpus, cands


def _deb_doc_job(args: tuple[Deb, Path]) -> tuple[list[dict], list[dict]]:
    from .build import doc_passages, doc_title, good_heading
    from .markup import parse_html, parse_markdown, parse_pod, parse_vimhelp
    from .sources import read_deb

    deb, path = args
    corpus, cands = [], []
    for src, raw in read_deb(deb, path):
        text = raw.decode("utf-8", errors="replace")
        if src.endswith(".html"):
            blocks = parse_html(text)
        elif src.endswith((".md", ".md.gz")):
            blocks = parse_markdown(text)
        elif "/vim/" in src:
            blocks = parse_vimhelp(text)
        else:
            blocks = parse_pod(text)
        blocks = [b for b in blocks if b.heading or b.paragraphs]
        if not any(b.paragraphs for b in blocks):
            continue
        doc_id = f"{deb.name}:{src}"
        title = doc_title(blocks, src)
        if title == "NAME" and blocks[0].paragraphs:  # POD: "Module::Name - summary"
            title = blocks[0].paragraphs[0].split(" - ")[0].strip()[:120]
        ps = doc_passages(blocks, doc_id, src, title, TARGET, MAX)
        corpus.extend(ps)
        for bi, b in enumerate(blocks):
            rel = [p["id"] for p in ps if bi in p["_heads"]]
            if b.level >= 2 and good_heading(b.heading) and b.words >= 40 and 1 <= len(rel) <= 3:
                cands.append({"id": f"doc-{doc_id}@{bi}", "query": b.heading, "relevant": rel})
    for p in corpus:
        p.pop("_heads")
    return corpus, cands


def _docstring_job(args: tuple[Sdist, Path]) -> tuple[list[dict], list[dict]]:
    from .markup import python_docstrings
    from .passages import chunk_paragraphs
    from .sources import read_sdist

    sd, path = args
    corpus = []
    for src, raw in read_sdist(sd, path):
        inner = src.split("/", 1)[1]
        module = inner.removesuffix(".py").removesuffix("/__init__")
        module = module.removeprefix("lib/").removeprefix("src/").replace("/", ".")
        for b in python_docstrings(raw.decode("utf-8", errors="replace"), module):
            if b.words < MIN_DOCSTRING_WORDS:
                continue
            for k, body in enumerate(chunk_paragraphs(b.paragraphs, MAX, TARGET)):
                corpus.append(
                    {
                        "id": f"{sd.name}:py:{b.heading}#{k}",
                        "source": src,
                        "title": b.heading,
                        "text": body,
                    }
                )
    return corpus, []


def build_scale(workers: int | None = None) -> dict:
    debs = fetch_debs(catalog.SCALE_DEBS + catalog.SCALE_DEB_DOCS)
    sdists = fetch_sdists(catalog.SCALE_SDISTS + catalog.SCALE_DOCSTRING_SDISTS)
    jobs = [(_man_job, (d, debs[d.label])) for d in catalog.SCALE_DEBS]
    jobs += [(_deb_doc_job, (d, debs[d.label])) for d in catalog.SCALE_DEB_DOCS]
    jobs += [(_doc_job, (s, sdists[s.label])) for s in catalog.SCALE_SDISTS]
    jobs += [(_docstring_job, (s, sdists[s.label])) for s in catalog.SCALE_DOCSTRING_SDISTS]
    workers = workers or min(4, os.cpu_count() or 1)
    with ProcessPoolExecutor(workers) as ex:
        futures = [ex.submit(fn, arg) for fn, arg in jobs]
        results = [f.result() for f in futures]  # in job order: deterministic
    corpus: list[dict] = []
    man_cands: list[dict] = []
    doc_cands: list[dict] = []
    for (fn, _), (ps, cands) in zip(jobs, results, strict=True):
        corpus.extend(ps)
        (man_cands if fn is _man_job else doc_cands).extend(cands)
    # passages under 20 words (a lone SEE ALSO line, a one-line docstring chunk) are noise
    corpus = [p for p in corpus if nwords(p["text"]) >= MIN_PASSAGE_WORDS]
    seen_ids: set[str] = set()
    unique = []
    for p in corpus:  # docstrings of overloaded names can repeat an id: keep the first
        if p["id"] not in seen_ids:
            seen_ids.add(p["id"])
            unique.append(p)
    corpus, remap = dedup(unique)
    ids = {p["id"] for p in corpus}

    def pick(cands: list[dict], k: int) -> list[dict]:
        seen, rows = set(), []
        for c in sorted(cands, key=lambda r: r["id"]):
            rel = sorted(dict.fromkeys(remap.get(r, r) for r in c["relevant"]))
            if c["query"].lower() in seen or not all(r in ids for r in rel):
                continue
            seen.add(c["query"].lower())
            rows.append({"id": c["id"], "query": c["query"], "relevant": rel})
        rows = random.Random(SEED).sample(rows, min(k, len(rows)))
        return sorted(rows, key=lambda r: r["id"])

    queries = pick(man_cands, 100) + pick(doc_cands, 100)
    labels = [d.label for d in catalog.SCALE_DEBS + catalog.SCALE_DEB_DOCS]
    labels += list(dict.fromkeys(s.label for s in catalog.SCALE_SDISTS))
    return {"corpus": corpus, "queries": queries, "packages": labels}

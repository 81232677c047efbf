"""The ``glossary`` set: computing glossary entries, asked about with a word they never use.

Corpus: the entries of two dictd glossaries shipped in Debian, FOLDOC (``dict-foldoc``)
and the Jargon File (``dict-jargon``): one passage per entry (long entries chunked like
the other sets), ``title`` = the headword(s), ``text`` = the definition with its
cross-reference markup resolved to plain words.

Alias pairs come from the data itself, never from a thesaurus:

* **redirect entries** of FOLDOC and the Jargon File whose whole definition points at
  another entry: ``{X}``, ``Syn. {X}``, ``Same as {X}``, ``Abbreviation for {X}``,
  ``Alternative spelling of {X}``, ... The alias is the entry's headword, the canonical
  term is ``X``. Redirect entries hold no text of their own and are left out of the corpus.
* **acronyms** of V.E.R.A. (``dict-vera``, used only as a source of facts, never in the
  corpus) whose single expansion is a headword of the corpus.

A pair is kept when the target entry exists and is a real definition (at most 4
passages), the alias is not ambiguous (one target) and it can be made absent from the
corpus -- every token of it and every simple inflection of each token, titles included,
so BM25 cannot match it:

* the alias's own entry is not in the corpus (redirects never are; V.E.R.A. never is);
* the target entry's own mentions of it are removed: the alternative headword
  (``Mail User Agent; MUA`` -> ``Mail User Agent``), a parenthesised ``(MUA)``, and any
  other use there is written as the term;
* at most ``MAX_SPELLED_OUT`` other passages may use it, exactly as written (same case),
  and there it is spelled out as the canonical term. A pair whose alias occurs in more
  passages, or in another form or case (``iOS`` for ``IOS``), is dropped.

``edited`` on each query counts the passages changed for it (``target``, ``other``); pairs
with ``{"target": 0, "other": 0}`` needed no edit at all. The build asserts at the end that
no kept alias occurs in the corpus. At most ``MAX_PAIRS`` pairs are kept (seeded sample).

Queries: one per pair. ``query`` = the teaching phrasing ``what is <alias>?``;
``phrasings`` = other phrasings that embed the alias in longer sentences
(``bench.datasets.phrasings``); ``relevant`` = the passages of every entry whose headword
is the canonical term. ``controls.jsonl``: the same templates around headwords of other
entries (words never taught), relevant = that entry.
"""

from __future__ import annotations

import gzip
import random
import re
from collections import Counter, defaultdict
from dataclasses import dataclass

from . import catalog
from .aliases import _INFLECT
from .passages import MAX_WORDS, TARGET_WORDS, chunk_paragraphs, dedup, nwords, tokenize
from .phrasings import TERM, phrase
from .sources import fetch_debs, read_deb

SEED = 20261122
MAX_PAIRS = 300
CONTROL_COUNT = 300
MIN_ENTRY_WORDS = 8  # a target or control entry shorter than this is not a definition
MAX_SPELLED_OUT = 3  # other passages that may be rewritten to spell an alias out

_B64 = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"


@dataclass
class Entry:
    """One glossary entry: where it comes from, its headwords and its definition."""

    book: str  # foldoc, jargon, vera
    headwords: list[str]  # header lines, as written (first = primary)
    raw: str  # definition lines, markup kept, paragraphs separated by blank lines


def _b64(s: str) -> int:
    n = 0
    for c in s:
        n = n * 64 + _B64.index(c)
    return n


def read_dictd(book: str, index: bytes, data: bytes) -> list[Entry]:
    """Entries of a dictd database (``.index`` + gunzipped ``.dict``), in file order.

    Several index lines can point at one entry (its alternative headwords); each entry is
    read once. The ``00-database-*`` header entries are skipped.
    """
    spans: dict[tuple[int, int], None] = {}
    for line in index.decode("utf-8").splitlines():
        head, off, length = line.split("\t")
        if not head.startswith("00-database"):
            spans[(_b64(off), _b64(length))] = None
    entries = []
    for off, length in sorted(spans):
        lines = data[off : off + length].decode("utf-8", errors="replace").split("\n")
        heads: list[str] = []
        k = 0
        while k < len(lines) and lines[k].strip() and not lines[k][:1].isspace():
            heads.append(" ".join(lines[k].split()))
            k += 1
        if book == "vera":  # the expansion wraps without indentation
            body = " ".join(" ".join(lines[k:]).split())
        else:
            # the Jargon File's pronunciation / part-of-speech line: " /broh'k@t/, n."
            while k < len(lines) and lines[k].startswith(" ") and not lines[k].startswith("  "):
                k += 1
            body = "\n".join(x.strip() for x in lines[k:]).strip()
        if heads and body:
            entries.append(Entry(book, heads, body))
    return entries


# --------------------------------------------------------------------------- markup

_LINK = re.compile(r"\{([^{}]*)\}")
_URLISH = re.compile(r"^(?:[a-z]+:|www\.|[\w.-]+\.html?$|[\w./-]*/)", re.I)
_DATE = re.compile(r"^\(\d{4}-\d\d-\d\d\)$")


def _link_parts(inner: str) -> tuple[str, str]:
    """``{text (target)}`` -> (shown text, target entry); a URL target is no entry."""
    m = re.fullmatch(r"\s*(.*?)\s*\(([^()]*)\)\s*", inner, re.S)
    if m:
        shown, target = m.group(1), m.group(2).strip()
        if _URLISH.match(target):
            return shown, shown
        return shown or target, target
    return inner, inner


def render(raw: str) -> list[str]:
    """Plain-text paragraphs of a definition: links become their words, URLs and the
    FOLDOC date stamp are dropped, ``<category>`` tags become ``(category)``."""
    paras = []
    for block in re.split(r"\n\s*\n", raw):
        text = " ".join(block.split())
        if not text or _DATE.match(text):
            continue
        text = _LINK.sub(lambda m: _link_parts(m.group(1))[0], text)
        text = re.sub(r"<([^<>]{1,60})>", r"(\1)", text)
        text = text.replace("__", "")
        text = " ".join(text.split())
        if text and re.search(r"\w", text):
            paras.append(text)
    return paras


# --------------------------------------------------------------------------- pairs

_LEAD = re.compile(
    r"^(?:<[^<>]*>\s*|\[[^\]]*\]\s*|/[^/\s][^/]*/\s*|\((?:alt\.|also)[^)]*\)\s*"
    r"|(?:n|v|vt|vi|adj|adv|interj|pl)\.\s*)+",
    re.I,
)
_REDIRECT = re.compile(
    r"^(?:(?P<how>syn(?:onym)?\.?(?:\s+(?:for|of))?|same\s+as|equivalent\s+to"
    r"|(?:(?:a|an|common|common\s+net)\s+)?(?:abbrev(?:iation)?\.?|acronym|short(?:hand)?)"
    r"\s+(?:for|of)"
    r"|(?:an?\s+)?(?:alternative|alternate|variant)\s+(?:name|spelling|term|form)?\s*(?:for|of)"
    r"|another\s+(?:name|term|word)\s+for)\s*:?\s*)?"
    r"\{(?P<target>[^{}]+)\}(?:,?\s+sense\s+\d+)?\s*\.?$",
    re.I,
)


def _kind(how: str | None, alias: str, target: str) -> str:
    how = (how or "").lower()
    if how.startswith(("syn", "same", "equiv", "another")):
        return "synonym"
    if how.startswith(("alt", "variant", "an alt", "a variant")):
        return "spelling"
    if how:
        return "abbreviation"
    words = target.split()
    if " " not in alias and len(words) >= 2 and alias[:1].lower() == words[0][:1].lower():
        return "abbreviation"
    return "synonym"


def redirect_of(entry: Entry) -> tuple[str, str] | None:
    """(canonical term, kind) when the entry's whole definition points at one other entry."""
    paras = [p for p in re.split(r"\n\s*\n", entry.raw) if p.strip()]
    paras = [
        " ".join(p.split())
        for p in paras
        if not _DATE.match(" ".join(p.split()))
        and not re.fullmatch(r"\[\{?Jargon File\}?\]", " ".join(p.split()))
    ]
    if len(paras) != 1:
        return None
    m = _REDIRECT.match(_LEAD.sub("", paras[0]))
    if not m:
        return None
    target = _link_parts(m.group("target"))[1]
    if not target or _URLISH.match(target):
        return None
    return target, _kind(m.group("how"), entry.headwords[0], target)


def vera_expansion(entry: Entry) -> str:
    """The expansion of a V.E.R.A. acronym without its tags: ``Mail User Agent (MUA, ...)``."""
    text = re.sub(r',?\s*"[^"]*"\s*$', "", entry.raw)  # the spelled form: , "ACF/NCP"
    text = re.sub(r"\s*\([^()]*\)\s*$", "", text)  # (IBM, ACF)
    text = re.sub(r"\[[^\]]*\]", "", text)  # [technology]
    return " ".join(text.split()).strip(" ,.")


def _key(term: str) -> str:
    return " ".join(term.lower().split())


def _forms(tok: str) -> set[str]:
    """A token and its simple inflections (``-s -es -ed -ing -er -ly``, doubled final
    consonant, ``y``/``ies``/``i``), so that no stemmer can match the alias to a corpus word."""
    stems = {tok, tok[:-1] + "y" if tok.endswith("i") else tok}  # Snowball: fly -> fli
    if len(tok) > 3:
        stems |= {tok[:-1] if tok.endswith(("e", "s", "y")) else tok}
        if tok.endswith("ies"):
            stems.add(tok[:-3] + "y")
    out = set()
    for s in stems:
        out.update(tokenize(s + suf)[0] for suf in _INFLECT if tokenize(s + suf))
        if s[-1:].isalpha() and s[-1:] not in "aeiouwxy":
            out.update({s + s[-1] + "ed", s + s[-1] + "ing", s + s[-1] + "er"})
        if s.endswith("y"):
            out.update({s[:-1] + "ies", s[:-1] + "ied"})
    return out


def _usable_alias(alias: str) -> bool:
    toks = tokenize(alias)
    return bool(toks) and all(len(t) >= 2 and not t.isdigit() for t in toks)


# --------------------------------------------------------------------------- build


def _slug(s: str) -> str:
    return re.sub(r"\s+", "_", s.strip())


def load_books() -> dict[str, list[Entry]]:
    paths = fetch_debs(catalog.GLOSSARY_DEBS)
    books = {}
    for d in catalog.GLOSSARY_DEBS:
        files = dict(read_deb(d, paths[d.label]))
        book = d.name.removeprefix("dict-")
        index = files[f"usr/share/dictd/{book}.index"]
        data = gzip.decompress(files[f"usr/share/dictd/{book}.dict.dz"])
        books[book] = read_dictd(book, index, data)
    return books


def _alias_re(alias: str, flags: int = 0) -> re.Pattern:
    """The alias as a whole word (its words joined by spaces or hyphens)."""
    words = [re.escape(w) for w in alias.split()]
    return re.compile(r"(?<![\w-])" + r"[\s-]+".join(words) + r"(?![\w-])", flags)


def _hits(text: str, forms: set[str]) -> bool:
    return any(t in forms for t in tokenize(text))


def _scrub_target(p: dict, alias: str, canon: str) -> dict:
    """The target entry without its own mentions of the alias: the alternative headword,
    a ``(ALIAS)`` right after the term, and any other use spelled out as the term."""
    title = "; ".join(h for h in p["title"].split("; ") if _key(h) != _key(alias))
    own = re.compile(r"\s*\(\s*" + _alias_re(alias).pattern + r"\s*\)", re.I)
    text = _alias_re(alias, re.I).sub(canon, own.sub("", p["text"]))
    return dict(p, title=title or p["title"], text=re.sub(r"[ \t]+", " ", text).strip())


def _spell_out(p: dict, alias: str, canon: str) -> dict:
    """Another entry with the alias, written exactly as the fact writes it, spelled out."""
    rx = _alias_re(alias)
    return dict(p, title=rx.sub(canon, p["title"]), text=rx.sub(canon, p["text"]))


def build_glossary() -> dict:
    """Build the glossary corpus, its alias queries and the control questions."""
    books = load_books()

    # 1. redirect entries are facts, not passages; the rest are the corpus
    defs: list[Entry] = []
    candidates: dict[str, list[tuple[str, str, str]]] = defaultdict(list)  # alias -> (canon,..)
    shown: dict[str, str] = {}  # alias key -> alias as written
    for book in ("foldoc", "jargon"):
        for e in books[book]:
            red = redirect_of(e)
            if red is None:
                defs.append(e)
                continue
            canon, kind = red
            for h in e.headwords:
                candidates[_key(h)].append((canon, kind, book))
                shown.setdefault(_key(h), h)

    # 2. passages, and which passages each headword's entries became
    corpus: list[dict] = []
    used_ids: Counter = Counter()
    head_passages: dict[str, list[str]] = defaultdict(list)
    head_shown: dict[str, str] = {}  # headword key -> the headword as the entry writes it
    for e in defs:
        paras = render(e.raw)
        if nwords(" ".join(paras)) < 3:
            continue
        base = f"{e.book}:{_slug(e.headwords[0])}"
        used_ids[base] += 1
        if used_ids[base] > 1:
            base = f"{base}~{used_ids[base]}"
        ids = []
        for k, text in enumerate(chunk_paragraphs(paras, MAX_WORDS, TARGET_WORDS)):
            pid = f"{base}#{k}"
            corpus.append(
                {"id": pid, "source": e.book, "title": "; ".join(e.headwords), "text": text}
            )
            ids.append(pid)
        if nwords(" ".join(paras)) >= MIN_ENTRY_WORDS:
            for h in e.headwords:
                head_passages[_key(h)].extend(ids)
                head_shown.setdefault(_key(h), h)
    corpus, remap = dedup(corpus)
    by_id = {p["id"]: p for p in corpus}
    for h, ids in head_passages.items():
        head_passages[h] = [i for i in dict.fromkeys(remap.get(i, i) for i in ids) if i in by_id]

    # 3. candidate pairs: redirects and V.E.R.A. acronyms whose expansion is a headword
    vera_by_head: dict[str, list[Entry]] = defaultdict(list)
    for e in books["vera"]:
        vera_by_head[_key(e.headwords[0])].append(e)
    for head, es in vera_by_head.items():
        if len(es) == 1:
            exp = vera_expansion(es[0])
            if exp and head_passages.get(_key(exp)):
                candidates[head].append((exp, "acronym", "vera"))
                shown.setdefault(head, es[0].headwords[0])
    postings: dict[str, set[str]] = defaultdict(set)
    for p in corpus:
        for t in set(tokenize(p["title"] + " " + p["text"])):
            postings[t].add(p["id"])

    # 4. keep a pair when its alias can be made absent: the target's own mentions removed,
    #    and at most MAX_SPELLED_OUT other passages using the alias exactly as written
    why: Counter = Counter()
    pairs: list[dict] = []
    for alias in sorted(candidates):
        targets = {_key(c) for c, _, _ in candidates[alias]}
        canon, kind, _ = candidates[alias][0]
        canon = head_shown.get(_key(canon), canon)
        relevant = head_passages.get(_key(canon), [])
        if len(targets) > 1:
            why["ambiguous (two targets)"] += 1
            continue
        if not _usable_alias(alias):
            why["alias too short or numeric"] += 1
            continue
        if not relevant:
            why["no target entry"] += 1
            continue
        if len(relevant) > 4:
            why["target longer than 4 passages"] += 1
            continue
        if set(tokenize(alias)) <= set(tokenize(canon)):
            why["same words as target"] += 1
            continue
        forms = {f for t in tokenize(alias) for f in _forms(t)}
        where = set().union(*(postings.get(f, set()) for f in forms))
        others = sorted(where - set(relevant))
        if len(others) > MAX_SPELLED_OUT:
            why[f"alias in more than {MAX_SPELLED_OUT} other passages"] += 1
            continue
        edits = {i: _scrub_target(by_id[i], shown[alias], canon) for i in relevant if i in where}
        edits.update({i: _spell_out(by_id[i], shown[alias], canon) for i in others})
        if any(_hits(e["title"] + " " + e["text"], forms) for e in edits.values()):
            why["alias used in another form or sense"] += 1
            continue
        for i, e in edits.items():
            for t in set(tokenize(by_id[i]["title"] + " " + by_id[i]["text"])):
                postings[t].discard(i)
            for t in set(tokenize(e["title"] + " " + e["text"])):
                postings[t].add(i)
            by_id[i] = e
        pairs.append(
            {
                "alias": shown[alias],
                "canonical": canon,
                "kind": kind,
                "from": "+".join(sorted({b for _, _, b in candidates[alias]})),
                "relevant": sorted(relevant),
                "edited": {"target": len(edits) - len(others), "other": len(others)},
            }
        )
    corpus = [by_id[p["id"]] for p in corpus]

    # 5. the final corpus must not hold any kept alias, in any simple form
    vocab: set[str] = set()
    for p in corpus:
        vocab.update(tokenize(p["title"] + " " + p["text"]))
    for pair in pairs:
        leak = {f for t in tokenize(pair["alias"]) for f in _forms(t)} & vocab
        assert not leak, f"alias {pair['alias']!r} still in the corpus: {sorted(leak)}"
    usable = len(pairs)
    if len(pairs) > MAX_PAIRS:
        pairs = sorted(random.Random(SEED).sample(pairs, MAX_PAIRS), key=lambda p: _key(p["alias"]))

    queries = []
    for p in pairs:
        qid = f"gl-{_slug(_key(p['alias']))}"
        queries.append(
            {
                "id": qid,
                "query": f"what is {p['alias']}?",
                "phrasings": phrase(p["alias"], TERM, qid),
                "relevant": p["relevant"],
                "alias": p["alias"],
                "canonical": p["canonical"],
                "kind": p["kind"],
                "from": p["from"],
                "edited": p["edited"],
                "base_query": f"what is {p['canonical']}?",
            }
        )

    # 6. controls: headwords of other entries (never an alias, never a target)
    taught = {i for p in pairs for i in p["relevant"]}
    canon_words = {t for p in pairs for t in tokenize(p["canonical"])}
    pool = [
        head
        for head, ids in sorted(head_passages.items())
        if ids
        and len(ids) <= 4
        and head not in candidates
        and not taught & set(ids)
        and _usable_alias(head)
    ]
    controls = []
    for head in sorted(random.Random(SEED + 1).sample(pool, min(CONTROL_COUNT, len(pool)))):
        cid = f"gl-control-{_slug(head)}"
        controls.append(
            {
                "id": cid,
                "query": f"what is {head_shown[head]}?",
                "phrasings": phrase(head_shown[head], TERM, cid),
                "relevant": sorted(head_passages[head]),
                "mentions_canonical": bool(set(tokenize(head)) & canon_words),
            }
        )
    return {
        "corpus": corpus,
        "queries": queries,
        "controls": controls,
        "packages": [d.label for d in catalog.GLOSSARY_DEBS],
        "pairs_usable": usable,
        "pairs_rejected": dict(sorted(why.items())),
        "pairs_by_kind": dict(sorted(Counter(q["kind"] for q in queries).items())),
        "pairs_by_source": dict(sorted(Counter(q["from"] for q in queries).items())),
        "passages_edited": {
            "target": sum(q["edited"]["target"] for q in queries),
            "other": sum(q["edited"]["other"] for q in queries),
            "pairs_untouched": sum(1 for q in queries if not any(q["edited"].values())),
        },
    }

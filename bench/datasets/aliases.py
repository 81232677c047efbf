"""The ``aliases`` set: man page queries re-worded with a word the corpus never uses.

Two alias tables feed it:

* ``HAND_TABLE`` (written for this benchmark): user-side synonyms, informal words and
  abbreviations next to the word or phrase that the man pages use.
* British spellings derived from Debian's SCOWL word lists: a word of ``wbritish`` that
  ``wamerican`` lacks, whose American form (by the regular -ise/-ize, -our/-or, -tre/-ter,
  -ogue/-og, -lled/-led, -ence/-ense, -yse/-yze rules) is in ``wamerican`` and not in
  ``wbritish``. The Linux man-pages project writes American English.

A pair is used when its corpus-side form occurs in the ``manpages`` corpus and its
user-side word does not, nor any simple inflection of it (``-s``, ``-es``, ``-ed``,
``-ing``, ...), so no tokenizer or stemmer can match it lexically. Every base query
(the whole ``manpages`` query pool, not just its 500-query sample) that contains the
corpus-side form gives one alias query per usable pair, keeping the base query's
relevant passages. At most ``PER_PAIR`` queries per pair are kept (seeded sample) so
that no single alias dominates.

Every query also gets ``phrasings``: ``PER_QUERY`` other sentences that embed it word for
word (``bench.datasets.phrasings``; ``query`` stays the teaching phrasing). Control
questions (``controls.jsonl``): ``CONTROL_COUNT`` other queries of the pool that contain no
alias, in the same templates, to count memories recalled for words never taught.
"""

from __future__ import annotations

import random
import re
from collections import defaultdict

from . import catalog
from .passages import tokenize
from .phrasings import kind_of, phrase
from .sources import fetch_debs, read_deb

PER_PAIR = 10
CONTROL_COUNT = 150
SEED = 20261122

# (user word, corpus word or phrase, kind). Inflected forms are listed as pairs of their own.
HAND_TABLE: tuple[tuple[str, str, str], ...] = (
    # informal verbs a user types for what the pages call get/obtain/retrieve/...
    ("grab", "get", "synonym"),
    ("grab", "obtain", "synonym"),
    ("grab", "retrieve", "synonym"),
    ("grabs", "gets", "synonym"),
    ("ascertain", "determine", "synonym"),
    ("ascertains", "determines", "synonym"),
    ("purge", "remove", "synonym"),
    ("purge", "delete", "synonym"),
    ("purges", "removes", "synonym"),
    ("snooze", "sleep", "synonym"),
    ("tally", "count", "synonym"),
    ("tally", "counter", "synonym"),
    ("scrutinize", "examine", "synonym"),
    ("scrutinize", "inspect", "synonym"),
    ("wrangle", "manipulate", "synonym"),
    ("juggle", "manipulate", "synonym"),
    ("chop", "truncate", "synonym"),
    ("chop", "split", "synonym"),
    ("tweakable", "configurable", "synonym"),
    ("glue", "concatenate", "synonym"),
    ("stitch", "concatenate", "synonym"),
    ("zap", "erase", "synonym"),
    ("reboots", "restarts", "synonym"),
    ("clobber", "overwrite", "synonym"),
    ("yank", "extract", "synonym"),
    ("quash", "suppress", "synonym"),
    ("spin up", "create", "synonym"),
    ("tear down", "destroy", "synonym"),
    ("teardown", "destruction", "synonym"),
    # nouns
    ("rundown", "overview", "synonym"),
    ("primer", "introduction", "synonym"),
    ("passphrase", "password", "synonym"),
    ("passcode", "password", "synonym"),
    ("datetime", "timestamp", "synonym"),
    ("datestamp", "timestamp", "synonym"),
    ("keychain", "keyring", "synonym"),
    ("keychains", "keyrings", "synonym"),
    ("subfolder", "subdirectory", "synonym"),
    ("subfolders", "subdirectories", "synonym"),
    ("homedir", "home directory", "abbreviation"),
    ("workdir", "working directory", "abbreviation"),
    ("filepath", "pathname", "abbreviation"),
    ("filepaths", "pathnames", "abbreviation"),
    ("linebreak", "newline", "synonym"),
    ("linebreaks", "newlines", "synonym"),
    ("hyperlink", "link", "synonym"),
    ("dataset", "database", "synonym"),
    ("prefs", "preferences", "abbreviation"),
    ("configs", "configuration", "abbreviation"),
    ("multithreading", "threads", "synonym"),
    ("hashmap", "hash table", "synonym"),
    ("dict", "hash table", "abbreviation"),
    ("concurrency", "asynchronous", "synonym"),
    ("nonnegative", "unsigned", "synonym"),
    ("enumerate", "list", "synonym"),
    ("verbosity", "logging", "synonym"),
    ("trig", "trigonometric", "abbreviation"),
    ("cos", "cosine", "abbreviation"),
    ("tan", "tangent", "abbreviation"),
    ("hyp", "hyperbolic", "abbreviation"),
    ("approx", "approximate", "abbreviation"),
    ("calc", "calculate", "abbreviation"),
    ("calcs", "calculates", "abbreviation"),
    ("init", "initialize", "abbreviation"),
    ("sched", "scheduling", "abbreviation"),
    ("prio", "priority", "abbreviation"),
    ("sem", "semaphore", "abbreviation"),
    ("sems", "semaphores", "abbreviation"),
    ("pty", "pseudoterminal", "abbreviation"),
    ("nums", "numbers", "abbreviation"),
    ("repo", "repository", "abbreviation"),
    ("auth", "authentication", "abbreviation"),
    ("config", "configuration", "abbreviation"),
    ("dir", "directory", "abbreviation"),
    ("folder", "directory", "synonym"),
    ("dupe", "duplicate", "abbreviation"),
    ("commandline", "command line", "abbreviation"),
    ("catalogue", "catalog", "british"),
    ("behaviour", "behavior", "british"),
    ("cancellation", "cancelation", "british"),
    ("folders", "directories", "synonym"),
)

# British -> American suffix rules applied to the SCOWL lists.
_RULES = (
    (r"isation(s?)$", r"ization\1"),
    (r"ise(s|d|r|rs)?$", r"ize\1"),
    (r"ising$", r"izing"),
    (r"yse(s|d|r|rs)?$", r"yze\1"),
    (r"ysing$", r"yzing"),
    (r"our(s|ed|ing|ite|ites|able|ful|less)?$", r"or\1"),
    (r"tre(s|d)?$", r"ter\1"),
    (r"ogue(s)?$", r"og\1"),
    (r"lled$", r"led"),
    (r"lling$", r"ling"),
    (r"ller(s?)$", r"ler\1"),
    (r"ence(s?)$", r"ense\1"),
    (r"dgement(s?)$", r"dgment\1"),
    (r"eing$", r"ing"),
)
_SPECIAL = {"grey": "gray", "greys": "grays", "centred": "centered", "centring": "centering"}


def spelling_pairs(british: list[str], american: list[str]) -> list[tuple[str, str, str]]:
    """(British word, American word) pairs from the two SCOWL lists (lower-case words only)."""
    am, br = set(american), set(british)
    pairs = []
    for b in sorted(br - am):
        if not b.isalpha() or not b.islower():
            continue
        cands = [_SPECIAL[b]] if b in _SPECIAL else []
        for pat, rep in _RULES:
            if re.search(pat, b):
                cands.append(re.sub(pat, rep, b))
        for a in cands:
            if a != b and a in am and a not in br:
                pairs.append((b, a, "british"))
                break
    return pairs


_INFLECT = ("", "s", "es", "ed", "d", "ing", "er", "ers", "ly", "'s")


def _absent(word: str, vocab: set[str]) -> bool:
    """True when no token of ``word`` nor any simple inflection of it is in the vocab."""
    for tok in tokenize(word):
        stems = {
            tok,
            tok[:-1] if tok.endswith("e") else tok,
            tok[:-1] if tok.endswith("s") else tok,
        }
        for s in stems:
            for suf in _INFLECT:
                if tokenize(s + suf) and tokenize(s + suf)[0] in vocab:
                    return False
    return True


def _phrase_re(phrase: str) -> re.Pattern:
    words = [re.escape(w) for w in phrase.split()]
    return re.compile(r"(?<![A-Za-z0-9_-])" + r"[\s-]+".join(words) + r"(?![A-Za-z0-9_-])", re.I)


def _present(phrase: str, vocab: set[str], corpus_text: str) -> bool:
    toks = tokenize(phrase)
    if not toks or any(t not in vocab for t in toks):
        return False
    return len(toks) == 1 or bool(_phrase_re(phrase).search(corpus_text))


def _keep_case(src: str, repl: str) -> str:
    return repl[:1].upper() + repl[1:] if src[:1].isupper() else repl


def build_aliases(base: dict) -> dict:
    """Build the alias queries over the ``manpages`` corpus (``base`` is its build result)."""
    paths = fetch_debs(catalog.WORDLIST_DEBS)
    lists = {}
    for d in catalog.WORDLIST_DEBS:
        [(_, raw)] = read_deb(d, paths[d.label])
        lists[d.name] = raw.decode("utf-8").split()
    pairs = list(
        dict.fromkeys(HAND_TABLE + tuple(spelling_pairs(lists["wbritish"], lists["wamerican"])))
    )

    corpus = base["corpus"]
    vocab = set()
    for p in corpus:
        vocab.update(tokenize(p["title"] + " " + p["text"]))
    corpus_text = "\n".join(p["text"] for p in corpus)

    used: list[dict] = []
    rejected: list[dict] = []
    by_pair: dict[tuple[str, str], list[dict]] = defaultdict(list)
    hand = set(HAND_TABLE)
    for user, canon, kind in pairs:
        why = None
        if not _present(canon, vocab, corpus_text):
            why = "canonical not in corpus"
        elif not _absent(user, vocab):
            why = "alias occurs in corpus"
        if why:
            if (user, canon, kind) in hand:  # derived pairs are too many to list
                rejected.append({"alias": user, "canonical": canon, "why": why})
            continue
        rx = _phrase_re(canon)
        for q in base["pool"]:
            if not rx.search(q["query"]):
                continue
            text = rx.sub(lambda m, u=user: _keep_case(m.group(0), u), q["query"])
            by_pair[(user, canon)].append(
                {
                    "id": f"{q['id']}~{user.replace(' ', '_')}",
                    "query": text,
                    "relevant": q["relevant"],
                    "alias": user,
                    "canonical": canon,
                    "kind": kind,
                    "base_query": q["query"],
                }
            )
    queries: list[dict] = []
    rng = random.Random(SEED)
    for key in sorted(by_pair):
        rows = sorted(by_pair[key], key=lambda r: r["id"])
        if len(rows) > PER_PAIR:
            rows = sorted(rng.sample(rows, PER_PAIR), key=lambda r: r["id"])
        used.append({"alias": key[0], "canonical": key[1], "queries": len(rows)})
        queries.extend(rows)
    queries.sort(key=lambda r: r["id"])
    # a query text produced twice (two pairs, same result) is kept once
    seen: set[str] = set()
    queries = [q for q in queries if not (q["query"] in seen or seen.add(q["query"]))]
    queries = [with_phrasings(q, kind_of(q["base_query"])) for q in queries]
    return {
        "queries": queries,
        "controls": alias_controls(base["pool"], queries),
        "corpus_ref": "manpages",
        "packages": base["packages"] + [d.label for d in catalog.WORDLIST_DEBS],
        "pairs_used": used,
        "pairs_rejected": rejected,
        "pairs_considered": {
            "hand": len(HAND_TABLE),
            "derived_spelling": len(pairs) - len(HAND_TABLE),
        },
    }


def with_phrasings(q: dict, kind: str) -> dict:
    """The query row with its other phrasings right after the teaching one."""
    row = {"id": q["id"], "query": q["query"], "phrasings": phrase(q["query"], kind, q["id"])}
    row.update(q)
    return row


def alias_controls(pool: list[dict], queries: list[dict]) -> list[dict]:
    """Pool queries holding no taught alias (and not re-worded into an alias query), in the
    same templates. ``mentions_canonical`` marks those sharing a word with a taught term."""
    taught = {t for q in queries for t in tokenize(q["alias"])}
    canonical = {t for q in queries for t in tokenize(q["canonical"])}
    reworded = {q["id"].split("~")[0] for q in queries}
    rows = sorted(
        (q for q in pool if q["id"] not in reworded and not taught & set(tokenize(q["query"]))),
        key=lambda r: r["id"],
    )
    rows = sorted(
        random.Random(SEED + 1).sample(rows, min(CONTROL_COUNT, len(rows))), key=lambda r: r["id"]
    )
    return [
        with_phrasings(
            {
                "id": f"{q['id']}~control",
                "query": q["query"],
                "relevant": q["relevant"],
                "mentions_canonical": bool(canonical & set(tokenize(q["query"]))),
            },
            kind_of(q["query"]),
        )
        for q in rows
    ]

"""The alias benchmark data's building blocks, on small inputs made here (no download).

The sets themselves are built from Debian packages by ``python -m bench.datasets.build``;
these tests pin the rules the memory benchmark relies on: other phrasings keep the alias
word for word and differ from each other, redirect entries become alias pairs, an alias
is "absent" only when no inflection of it is in the corpus, and the "fact given" ceiling
scores with the project's own BM25.
"""

from __future__ import annotations

import gzip

from bench.datasets.ceiling import ProjectBM25, fact_text, replace_alias
from bench.datasets.glossary import Entry, _forms, read_dictd, redirect_of, render
from bench.datasets.phrasings import TASK, TERM, TOPIC, kind_of, phrase

_B64 = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"


def _b64(n: int) -> str:
    out = ""
    while True:
        out = _B64[n % 64] + out
        n //= 64
        if not n:
            return out


def test_other_phrasings_keep_the_request_and_vary_around_it() -> None:
    request = "grab the value of an environment variable"
    first = phrase(request, TASK, "man-getenv.3~grab")
    assert first == phrase(request, TASK, "man-getenv.3~grab")  # seeded, not random
    assert len(first) == 4 and len(set(first)) == 4
    assert all(request in p and len(p) > len(request) + 20 for p in first)
    starts = {p.split(request)[0] for p in first}
    assert len(starts) == 4  # no two share the words before the request
    assert phrase(request, TASK, "another id") != first


def test_request_kind_follows_the_first_word() -> None:
    assert kind_of("set/get contention scope attribute") == TASK
    assert kind_of("overview of POSIX shared memory") == TOPIC
    assert all("MUA" in p for p in phrase("MUA", TERM, "gl-mua"))


def test_redirect_entries_become_pairs_and_definitions_do_not() -> None:
    def entry(body: str) -> Entry:
        return Entry("foldoc", ["klone"], body)

    assert redirect_of(entry("<jargon> Syn. {clone}.\n\n(1997-01-01)")) == ("clone", "synonym")
    assert redirect_of(entry("<networking> {Mail User Agent}.")) == ("Mail User Agent", "synonym")
    assert redirect_of(Entry("foldoc", ["MUA"], "{Mail User Agent}")) == (
        "Mail User Agent",
        "abbreviation",
    )
    assert redirect_of(entry("Abbreviation for {left (left parenthesis)}.")) == (
        "left parenthesis",
        "abbreviation",
    )
    assert redirect_of(entry("1. {application program}. 2. {function application}.")) is None
    assert redirect_of(entry("A copy of a program. See {clone}.")) is None
    assert redirect_of(entry("See {swizzle}.")) is None  # a pointer, not a synonym


def test_dictd_entries_are_read_once_with_their_headwords() -> None:
    text = (
        "Mail User Agent\nMUA\n\n   <mail> (MUA) The program a person reads\n"
        "   {electronic mail} with.  {More (http://example.org/x.html)}.\n\n   (2001-02-03)\n\n"
    )
    data = text.encode()
    span = f"{_b64(0)}\t{_b64(len(data))}"
    index = f"00-database-short\tA\tB\nmail user agent\t{span}\nmua\t{span}\n".encode()
    [entry] = read_dictd("foldoc", index, gzip.decompress(gzip.compress(data)))
    assert entry.headwords == ["Mail User Agent", "MUA"]
    assert render(entry.raw) == [
        "(mail) (MUA) The program a person reads electronic mail with. More."
    ]


def test_an_alias_counts_as_present_when_any_inflection_is() -> None:
    assert {"grabbing", "grabbed", "grabs"} <= _forms("grab")
    assert "fly" in _forms("fli")  # the Snowball stem of "fly" is "fli"
    assert "tallied" in _forms("tally")


def test_the_fact_lifts_the_target_above_noise() -> None:
    corpus = [
        {"id": "mua", "title": "Mail User Agent", "text": "The program a person reads mail with."},
        {"id": "mta", "title": "Mail Transfer Agent", "text": "Moves mail between hosts."},
        {"id": "cpu", "title": "Central Processing Unit", "text": "Runs the program."},
    ]
    bm25 = ProjectBM25(corpus)
    question = "what is a MUA?"
    assert bm25.top(question) == []  # the alias is nowhere in the corpus
    assert bm25.top(f"{question} {fact_text('MUA', 'Mail User Agent')}")[0] == "mua"
    assert bm25.top(replace_alias(question, "MUA", "Mail User Agent"))[0] == "mua"

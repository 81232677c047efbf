"""Heading-aware chunking of Markdown, plain text and HTML."""

from __future__ import annotations

import itertools

from retrievalagent.ingest import chunk_sections, split_sections
from retrievalagent.ingest._chunking import html_to_sections

MARKDOWN = """---
title: front matter is not content
---
# Guide

Intro paragraph.

## Install

Run the installer.

```bash
# not a heading, a shell comment
make install
```

### On Linux

Use the package.

Setext Heading
==============

Under setext.
"""


def test_markdown_sections_keep_their_heading_path() -> None:
    sections = split_sections(MARKDOWN)
    paths = [tuple(s.headings) for s in sections]
    assert paths == [
        ("Guide",),
        ("Guide", "Install"),
        ("Guide", "Install", "On Linux"),
        ("Setext Heading",),
    ]
    install = sections[1].text
    assert "# not a heading, a shell comment" in install  # fenced code stays in the body
    assert "front matter" not in " ".join(s.text for s in sections)


def test_plain_text_headings_only_when_asked() -> None:
    text = "ERROR CODES\n\nIntro line here.\n\nE-1  Disk full\n\nThe disk is full. Free space.\n"
    assert [s.headings for s in split_sections(text)] == [[]]
    sections = split_sections(text, plain_headings=True)
    assert [s.headings for s in sections] == [["ERROR CODES"], ["ERROR CODES", "E-1  Disk full"]]
    assert sections[1].text == "The disk is full. Free space."


def test_html_headings_become_sections() -> None:
    title, sections = html_to_sections(
        "<html><head><title>Console</title><style>p{}</style></head><body>"
        "<h1>Web console</h1><p>Open it in a browser.</p>"
        "<h2>Roles</h2><p>The <b>observer</b> role can look.</p><ul><li>one</li><li>two</li></ul>"
        "<script>alert(1)</script></body></html>"
    )
    assert title == "Console"
    assert [s.headings for s in sections] == [["Web console"], ["Web console", "Roles"]]
    assert "observer role can look" in " ".join(sections[1].text.split())
    assert "alert" not in sections[1].text


def test_chunks_respect_size_and_overlap() -> None:
    sentence = "Lanternfish keeps snapshots of every source folder. "
    text = "# Title\n\n" + "\n\n".join(sentence * 3 for _ in range(30))
    chunks = chunk_sections(split_sections(text), chunk_size=400, overlap=60)
    assert len(chunks) > 5
    assert all(len(c.text) <= 400 for c in chunks)
    assert [c.position for c in chunks] == list(range(len(chunks)))
    for before, after in itertools.pairwise(chunks):
        tail = before.text[-40:].split(" ", 1)[-1]
        assert tail in after.text  # neighbours share text
    assert chunks[0].indexed_text.startswith("Title\n")


def test_long_words_are_split_not_lost() -> None:
    blob = "x" * 2500
    chunks = chunk_sections(split_sections(blob), chunk_size=1000, overlap=0)
    assert "".join(c.text for c in chunks) == blob

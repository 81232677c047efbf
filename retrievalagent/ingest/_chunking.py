"""Heading-aware chunking of Markdown, reStructuredText-like text and HTML.

A document is first cut into sections at its headings; each section is then packed into
chunks of about ``chunk_size`` characters at paragraph, then sentence, then word
boundaries. Every chunk remembers the heading path above it, which is prepended to the
text that gets embedded and indexed (so "Retention > Daily" passages match "daily
retention" queries) while the stored text stays the passage itself.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

__all__ = ["Chunk", "Section", "chunk_sections", "html_to_sections", "split_sections"]

_ATX = re.compile(r"^(#{1,6})\s+(.+?)\s*#*\s*$")
_FENCE = re.compile(r"^\s*(```|~~~)")
_UNDERLINE = re.compile(r"^([=\-~^\"'`#*+])\1{2,}\s*$")
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z0-9\"'(\[])")


@dataclass
class Section:
    """A heading path and the body text under it."""

    headings: list[str]
    text: str


@dataclass
class Chunk:
    """One indexed passage."""

    text: str
    headings: list[str] = field(default_factory=list)
    position: int = 0

    @property
    def indexed_text(self) -> str:
        """What is embedded and BM25-encoded: the heading path, then the passage."""
        if not self.headings:
            return self.text
        return " > ".join(self.headings) + "\n" + self.text


def _plain_heading(lines: list[str], i: int) -> int | None:
    """Level of a plain-text heading at line ``i``: a short line standing alone between blank
    lines, without closing punctuation (ALL CAPS = level 1, otherwise 2)."""
    line = lines[i].strip()
    if (
        not line
        or len(line) > 80
        or line[-1] in ".,;:!?)]}"
        or line.startswith(("-", "*", "|", ">"))
    ):
        return None
    if i > 0 and lines[i - 1].strip():
        return None
    if i + 1 >= len(lines) or lines[i + 1].strip():
        return None
    if not any(ch.isalpha() for ch in line) or not any(x.strip() for x in lines[i + 2 : i + 6]):
        return None
    return 1 if line.upper() == line else 2


def _without_front_matter(lines: list[str]) -> list[str]:
    """``lines`` less a leading YAML front matter block (``---`` ... ``---`` or ``...``)."""
    if lines and lines[0].strip() == "---":
        for end in range(1, min(len(lines), 200)):
            if lines[end].strip() in ("---", "..."):
                return lines[end + 1 :]
    return lines


def _is_underlined(lines: list[str], i: int) -> bool:
    """Whether line ``i`` is a Setext / reST heading: a flush-left line over a run of one
    punctuation character at least half as long."""
    line = lines[i]
    return (
        i + 1 < len(lines)
        and bool(line.strip())
        and not line.startswith((" ", "\t"))
        and _UNDERLINE.match(lines[i + 1]) is not None
        and len(lines[i + 1].strip()) >= max(3, len(line.strip()) // 2)
    )


def _heading_at(
    lines: list[str], i: int, underline_levels: list[str], plain_headings: bool
) -> tuple[int, str, int] | None:
    """The heading at line ``i`` as (level, title, lines it spans), or None.

    Underlined headings take their levels in order of first appearance of each underline
    character (``underline_levels`` remembers them across the document).
    """
    line = lines[i]
    if m := _ATX.match(line):
        return len(m.group(1)), m.group(2), 1
    if _is_underlined(lines, i):
        char = lines[i + 1].strip()[0]
        if char not in underline_levels:
            underline_levels.append(char)
        return underline_levels.index(char) + 1, line, 2
    if plain_headings and (level := _plain_heading(lines, i)) is not None:
        return level, line, 1
    return None


class _Outline:
    """Sections as they are read: the open heading path and the body lines under it."""

    def __init__(self) -> None:
        self.sections: list[Section] = []
        self.path: list[tuple[int, str]] = []
        self.body: list[str] = []

    def flush(self) -> None:
        """Close the open body; a heading with no body is kept as an empty section, for
        :func:`_bare_headings` to decide whether anything else carries it."""
        content = "\n".join(self.body).strip()
        if content or self.path:
            self.sections.append(Section([h for _, h in self.path], content))
        self.body.clear()

    def open_heading(self, level: int, title: str) -> None:
        self.flush()
        while self.path and self.path[-1][0] >= level:
            self.path.pop()
        self.path.append((level, title.strip()))


def split_sections(text: str, plain_headings: bool = False) -> list[Section]:
    """Sections of a Markdown or plain/reST text, keyed by their heading path.

    With ``plain_headings`` (plain ``.txt`` files), a short line standing alone between
    blank lines also opens a section.
    """
    lines = _without_front_matter(text.replace("\r\n", "\n").replace("\r", "\n").split("\n"))
    outline = _Outline()
    underline_levels: list[str] = []
    in_fence = False
    i = 0
    while i < len(lines):
        heading = None
        if _FENCE.match(lines[i]):
            in_fence = not in_fence
        elif not in_fence:
            heading = _heading_at(lines, i, underline_levels, plain_headings)
        if heading is None:
            outline.body.append(lines[i])
            i += 1
        else:
            level, title, spans = heading
            outline.open_heading(level, title)
            i += spans
    outline.flush()
    return _bare_headings(outline.sections)


def _bare_headings(sections: list[Section]) -> list[Section]:
    """``sections`` with the empty ones resolved: a heading that no section with text
    carries in its path (a title alone, a table of contents) becomes text itself, one
    section per run of such headings, so that a file of headings is searchable too. The
    other empty sections are dropped: their headings are indexed with the text below."""
    carried = {
        tuple(s.headings[:depth])
        for s in sections
        if s.text
        for depth in range(len(s.headings) + 1)
    }
    out: list[Section] = []
    run: Section | None = None  # the section that the current run of bare headings builds
    for section in sections:
        if section.text:
            out.append(section)
            run = None
        elif tuple(section.headings) not in carried:
            parent, title = section.headings[:-1], section.headings[-1]
            if run is not None and parent[: len(run.headings)] == run.headings:
                run.text += "\n" + title
            else:
                run = Section(parent, title)
                out.append(run)
    return out


def html_to_sections(html: str) -> tuple[str | None, list[Section]]:
    """The page title and the sections of an HTML page (headings h1-h6 keep their level)."""
    from bs4 import BeautifulSoup

    soup = BeautifulSoup(html, "html.parser")
    title = soup.title.get_text(" ", strip=True) if soup.title else None
    for tag in soup(["script", "style", "nav", "noscript", "template", "head"]):
        tag.decompose()
    blocks = (
        "p",
        "div",
        "li",
        "pre",
        "blockquote",
        "tr",
        "section",
        "article",
        "dt",
        "dd",
        "table",
        "ul",
        "ol",
        "br",
        "hr",
    )
    for tag in soup.find_all(re.compile(r"^h[1-6]$")):
        level = int(tag.name[1])
        text = " ".join(tag.get_text(" ", strip=True).split())
        tag.replace_with(f"\n\n{'#' * level} {text}\n\n")
    for tag in soup.find_all(blocks):
        if tag.name == "pre":
            tag.insert_before("\n\n```\n")
            tag.insert_after("\n```\n\n")
        elif tag.name == "li":
            tag.insert_before("\n- ")
        else:
            tag.insert_before("\n\n")
            tag.insert_after("\n\n")
    text = soup.get_text()
    text = re.sub(r"[ \t]+\n", "\n", text)
    text = re.sub(r"\n{3,}", "\n\n", text)
    return title, split_sections(text)


def _pieces(text: str, limit: int) -> list[str]:
    """Paragraphs no longer than ``limit``, splitting long ones at sentences, then words,
    then (a word longer than ``limit``) anywhere."""
    out: list[str] = []
    for para in re.split(r"\n\s*\n", text):
        para = para.strip()
        if len(para) <= limit:
            out.extend([para] if para else [])
            continue
        for sentence in _SENTENCE_END.split(para):
            out.extend([sentence] if len(sentence) <= limit else _word_runs(sentence, limit))
    return out


def _word_runs(sentence: str, limit: int) -> list[str]:
    """A long sentence packed into runs of whole words of at most ``limit`` characters; a
    word longer than that (a blob, minified text: nowhere to split) is cut."""
    out: list[str] = []
    current = ""
    for word in sentence.split():
        while len(word) > limit:
            if current:
                out.append(current)
                current = ""
            out.append(word[:limit])
            word = word[limit:]
        if current and len(current) + 1 + len(word) > limit:
            out.append(current)
            current = word
        else:
            current = f"{current} {word}" if current else word
    if current:
        out.append(current)
    return out


def _tail(text: str, size: int) -> str:
    """The last ~``size`` characters of ``text``, starting at a word boundary."""
    if size <= 0 or len(text) <= size:
        return text if size > 0 else ""
    cut = text[-size:]
    space = cut.find(" ")
    return cut[space + 1 :] if 0 <= space < len(cut) - 1 else cut


def chunk_sections(sections: list[Section], chunk_size: int, overlap: int) -> list[Chunk]:
    """Pack each section's text into chunks of at most ``chunk_size`` characters.

    Consecutive chunks of one section share ``overlap`` characters so that a fact cut by a
    boundary is still whole in one of them.
    """
    chunks: list[Chunk] = []
    for section in sections:
        current = ""
        for piece in _pieces(section.text, chunk_size):
            sep = "\n\n" if current else ""
            if current and len(current) + len(sep) + len(piece) > chunk_size:
                chunks.append(Chunk(current, list(section.headings)))
                carry = _tail(current, overlap)
                current = (
                    f"{carry}\n\n{piece}"
                    if carry and len(carry) + len(piece) + 2 <= chunk_size
                    else piece
                )
            else:
                current = f"{current}{sep}{piece}"
        if current.strip():
            chunks.append(Chunk(current, list(section.headings)))
    for position, chunk in enumerate(chunks):
        chunk.position = position
    return chunks

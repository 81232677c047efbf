"""Split documentation sources (reST, Markdown/MyST, POD, Python docstrings) into sections.

Each parser returns a list of :class:`Block`: one heading and the paragraphs of text that
follow it up to the next heading (of any level). Markup is reduced to plain text the way a
reader sees it: roles and links keep their text, images, toctrees, label targets, comments
and autodoc directives are dropped, code blocks are kept.
"""

from __future__ import annotations

import ast
import re
import textwrap
from dataclasses import dataclass, field


@dataclass
class Block:
    level: int  # 0: text before the first heading; 1: document title; 2+: sections
    heading: str
    paragraphs: list[str] = field(default_factory=list)

    @property
    def words(self) -> int:
        return sum(len(p.split()) for p in self.paragraphs)


# --------------------------------------------------------------------------- reST

_UNDER = set("=-`:'\"~^_*+#<>.")
_DROP_DIRECTIVES = {
    "toctree",
    "image",
    "figure",
    "include",
    "literalinclude",
    "raw",
    "automodule",
    "autoclass",
    "autofunction",
    "automethod",
    "autodata",
    "autoattribute",
    "autoexception",
    "autosummary",
    "autoprogram",
    "autodecorator",
    "currentmodule",
    "module",
    "py:module",
    "py:currentmodule",
    "highlight",
    "index",
    "contents",
    "sectnum",
    "meta",
    "graphviz",
    "mermaid",
    "tabularcolumns",
    "only",
    "ifconfig",
    "click:example",
    "click:run",
    "program-output",
    "command-output",
    "jinja",
    "glossary-",
    "rst-class",
    "container",
    "grid",
    "grid-item-card",
    "card",
    "tab-set",
    "youtube",
    "asciinema",
    "plot",
    "inheritance-diagram",
    "changelog",
    "towncrier-draft-entries",
    "default-role",
    "role",
    "title",
    "sidebar",
    "topic-",
    "testsetup",
    "testcleanup",
    "doctest-skip",
    "nextslide",
    "spelling:word-list",
}
_CODE_DIRECTIVES = {
    "code-block",
    "code",
    "sourcecode",
    "doctest",
    "testcode",
    "testoutput",
    "ipython",
    "console",
    "prompt",
    "parsed-literal",
    "code-tab",
}
# directives whose argument is a title or a version, not running text
_ARG_NOT_TEXT = {
    "note", "warning", "tip", "important", "seealso", "versionadded", "versionchanged",
    "deprecated", "admonition", "attention", "caution", "danger", "error", "hint",
}  # fmt: skip
_ROLE = re.compile(r":(?:[\w.+-]+:)*[\w.+-]+:`([^`]+)`")
_LINK = re.compile(r"`([^`<]+?)\s*<[^`>]+>`__?")
_REF = re.compile(r"`([^`]+)`__?(?![\w])")
_LIT = re.compile(r"``(.+?)``")
_STRONG = re.compile(r"\*\*(.+?)\*\*")
_EMPH = re.compile(r"(?<![\w*\\])\*(?=\S)([^*\n]+?)(?<=\S)\*(?![\w*])")
_SUBST = re.compile(r"\|(\w[\w\s-]*)\|(?:_{1,2})?")
_INTERP = re.compile(r"(?<![`\w])`([^`]+)`(?![`_\w])")


def _role_text(m: re.Match) -> str:
    t = m.group(1)
    lt = re.match(r"(.*?)\s*<([^>]*)>$", t, re.S)
    if lt and lt.group(1).strip():
        return lt.group(1).strip()
    if lt:
        t = lt.group(2)
    t = t.lstrip("!")
    if t.startswith("~"):
        t = t[1:].split(".")[-1]
    return t


def rst_inline(s: str) -> str:
    s = _ROLE.sub(_role_text, s)
    s = _LIT.sub(r"\1", s)
    s = _LINK.sub(r"\1", s)
    s = _REF.sub(r"\1", s)
    s = _STRONG.sub(r"\1", s)
    s = _EMPH.sub(r"\1", s)
    s = _SUBST.sub(r"\1", s)
    s = _INTERP.sub(r"\1", s)
    s = s.replace("\\ ", "").replace("\\*", "*").replace("\\_", "_").replace("\\`", "`")
    return s


def _is_under(line: str) -> bool:
    s = line.rstrip()
    return len(s) >= 3 and len(set(s)) == 1 and s[0] in _UNDER


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip(" "))


def parse_rst(src: str) -> list[Block]:
    lines = src.expandtabs(4).replace("\r\n", "\n").split("\n")
    styles: list[tuple[str, bool]] = []
    blocks: list[Block] = [Block(0, "")]
    cur_lines: list[str] = []
    code_indent: int | None = None  # inside a code/literal block indented deeper than this
    skip_indent: int | None = None  # inside a dropped directive/comment block
    pending_code = False
    i, n = 0, len(lines)

    def flush() -> None:
        blocks[-1].paragraphs.extend(_paragraphs(cur_lines))
        cur_lines.clear()

    while i < n:
        ln = lines[i]
        stripped = ln.strip()
        ind = _indent(ln)
        if skip_indent is not None:
            if stripped and ind <= skip_indent:
                skip_indent = None
            else:
                i += 1
                continue
        if code_indent is not None and stripped and ind <= code_indent:
            code_indent = None
        if code_indent is not None:
            cur_lines.append("\x02" + ln if stripped else "")
            i += 1
            continue
        if pending_code and stripped:
            pending_code = False
            if ind > 0 or cur_lines:
                base = _indent(cur_lines[-1]) if cur_lines and cur_lines[-1].strip() else 0
                if ind > base:
                    code_indent = base
                    cur_lines.append("\x02" + ln)
                    i += 1
                    continue
        # headings (only at column 0, outside code)
        if ind == 0 and stripped:
            nxt = lines[i + 1] if i + 1 < n else ""
            nxt2 = lines[i + 2] if i + 2 < n else ""
            title = None
            if (
                _is_under(ln)
                and i + 2 < n
                and nxt.strip()
                and _is_under(nxt2)
                and nxt2.rstrip()[0] == ln.rstrip()[0]
            ):
                title, style, step = nxt.strip(), (ln.rstrip()[0], True), 3
            elif (
                not _is_under(ln)
                and _is_under(nxt)
                and len(nxt.rstrip()) >= min(len(stripped), 4)
                and not stripped.startswith((".. ", "::"))
                and (i == 0 or not lines[i - 1].strip() or _is_under(lines[i - 1]))
            ):
                title, style, step = stripped, (nxt.rstrip()[0], False), 2
            if title is not None:
                flush()
                if style not in styles:
                    styles.append(style)
                blocks.append(Block(styles.index(style) + 1, _clean_heading(rst_inline(title))))
                i += step
                continue
        if stripped.startswith(".."):
            m = re.match(r"\.\.\s+([\w:.+-]+)::\s*(.*)$", stripped)
            if m:
                name = m.group(1).lower()
                arg = m.group(2)
                if name in _DROP_DIRECTIVES or name.startswith(("auto", "tab")):
                    skip_indent = ind
                elif name in _CODE_DIRECTIVES:
                    cur_lines.append("")
                    code_indent = ind
                    # options (":linenos:") directly after the directive line
                    while i + 1 < n and re.match(r"\s+:[\w-]+:", lines[i + 1]):
                        i += 1
                else:
                    cur_lines.append("")
                    if arg and name not in _ARG_NOT_TEXT:
                        cur_lines.append(" " * ind + arg)
                    while i + 1 < n and re.match(r"\s+:[\w-]+:", lines[i + 1]):
                        i += 1
                i += 1
                continue
            # comment, link target, substitution definition, footnote
            if re.match(r"\.\.\s+\[[^\]]+\]\s", stripped):
                cur_lines.append(" " * ind + re.sub(r"^\.\.\s+\[[^\]]+\]\s*", "", stripped))
                i += 1
                continue
            skip_indent = ind
            i += 1
            continue
        if re.match(r"^:(orphan|tocdepth|nosearch|hide-toc|og:\w+|html_theme[\w.]*):", stripped):
            i += 1
            continue
        if stripped == "::":
            pending_code = True
            cur_lines.append("")
            i += 1
            continue
        if stripped.endswith("::"):
            cur_lines.append(ln.rstrip()[:-1])
            pending_code = True
            i += 1
            continue
        if re.fullmatch(r"[+][-=+]+[+]", stripped) or re.fullmatch(r"[= ]{3,}", stripped):
            i += 1
            continue
        if stripped.startswith("|") and stripped.endswith("|") and stripped.count("|") > 2:
            ln = re.sub(r"\s*\|\s*", "  ", ln).rstrip()
        cur_lines.append(ln)
        i += 1
    flush()
    return _finish(blocks, rst_inline)


def _paragraphs(lines: list[str]) -> list[str]:
    """Group lines into paragraphs; code lines (marked \\x02) keep their line breaks."""
    out: list[str] = []
    buf: list[str] = []
    code: list[str] = []

    def end_prose() -> None:
        if buf:
            out.append(("P", " ".join(s.strip() for s in buf)))
            buf.clear()

    def end_code() -> None:
        if code:
            txt = textwrap.dedent("\n".join(code)).strip("\n")
            if txt.strip():
                out.append(("C", txt))
            code.clear()

    for ln in lines:
        if ln.startswith("\x02"):
            end_prose()
            code.append(ln[1:])
        elif not ln.strip():
            end_prose()
            if code:
                code.append("")
        else:
            end_code()
            buf.append(ln)
    end_prose()
    end_code()
    return out  # type: ignore[return-value]


def _clean_heading(h: str) -> str:
    h = re.sub(r"\s+", " ", h).strip()
    return h.strip("#").strip()


def _finish(blocks: list[Block], inline) -> list[Block]:
    out = []
    for b in blocks:
        paras = []
        for kind, txt in b.paragraphs:  # type: ignore[misc]
            if kind == "P":
                txt = re.sub(r"\s+", " ", inline(txt)).strip()
            if txt.strip():
                paras.append(txt)
        b.paragraphs = paras
        if b.heading or b.paragraphs:
            out.append(b)
    return out


# --------------------------------------------------------------------------- Markdown

_MD_LINK = re.compile(r"!?\[([^\]]*)\]\([^)]*\)")
_MD_REFLINK = re.compile(r"!?\[([^\]]+)\]\[[^\]]*\]")
_MD_ROLE = re.compile(r"\{[\w:.+-]+\}`([^`]+)`")
_MD_CODE = re.compile(r"`+([^`]+?)`+")
_MD_STRONG = re.compile(r"(\*\*|__)(?=\S)(.+?)(?<=\S)\1")
_MD_EMPH = re.compile(r"(?<![\w*\\])([*_])(?=\S)([^*_\n]+?)(?<=\S)\1(?![\w*])")
_HTML_TAG = re.compile(r"</?[A-Za-z][^>]*>")


def md_inline(s: str) -> str:
    s = re.sub(r"!\[[^\]]*\]\([^)]*\)", "", s)  # images
    s = _MD_ROLE.sub(lambda m: _role_text(m), s)
    s = _MD_LINK.sub(r"\1", s)
    s = _MD_REFLINK.sub(r"\1", s)
    s = _MD_CODE.sub(r"\1", s)
    s = _MD_STRONG.sub(r"\2", s)
    s = _MD_EMPH.sub(r"\2", s)
    s = _HTML_TAG.sub("", s)
    s = s.replace("&nbsp;", " ").replace("&lt;", "<").replace("&gt;", ">").replace("&amp;", "&")
    s = re.sub(r"\\([\\`*_{}\[\]()#+\-.!|<>])", r"\1", s)
    return s


def parse_markdown(src: str) -> list[Block]:
    src = src.replace("\r\n", "\n")
    src = re.sub(r"<!--.*?-->", "", src, flags=re.S)
    lines = src.split("\n")
    if lines and lines[0].strip() == "---":  # front matter
        for j in range(1, len(lines)):
            if lines[j].strip() in ("---", "..."):
                lines = lines[j + 1 :]
                break
    blocks: list[Block] = [Block(0, "")]
    cur: list[str] = []
    fence: str | None = None
    fence_mode = "code"
    i, n = 0, len(lines)

    def flush() -> None:
        blocks[-1].paragraphs.extend(_paragraphs(cur))
        cur.clear()

    while i < n:
        ln = lines[i]
        stripped = ln.strip()
        if fence is not None:
            if stripped.startswith(fence) and stripped.strip(fence[0]) == "":
                fence = None
                cur.append("")
            elif fence_mode == "prose":
                if not re.match(r"\s*:[\w-]+:", ln):
                    cur.append(ln.strip())
            elif fence_mode == "code":
                cur.append("\x02" + ln)
            i += 1
            continue
        m = re.match(r"^(\s*)(`{3,}|~{3,}|:{3,})\s*(\{?[\w:.+-]*\}?)\s*(.*)$", ln)
        if m and (m.group(2)[0] != ":" or m.group(3) or m.group(4) == ""):
            marker = m.group(2)
            info = m.group(3).strip("{}").lower()
            if marker[0] == ":":
                # MyST colon fence (admonition): its content is prose, keep it as such
                if not m.group(3) and not m.group(4):
                    i += 1
                    continue
                i += 1
                continue
            fence = marker
            if info in _DROP_DIRECTIVES or info.startswith(("auto", "eval-")):
                fence_mode = "drop"
            elif m.group(3).startswith("{") and info not in _CODE_DIRECTIVES:
                fence_mode = "prose"
            else:
                fence_mode = "code"
            cur.append("")
            i += 1
            continue
        h = re.match(r"^(#{1,6})\s+(.*?)\s*#*\s*$", ln)
        if h:
            flush()
            blocks.append(Block(len(h.group(1)), _clean_heading(md_inline(h.group(2)))))
            i += 1
            continue
        nxt = lines[i + 1] if i + 1 < n else ""
        if (
            stripped
            and not ln.startswith((" ", "\t", "|", "-", "*", ">"))
            and re.fullmatch(r"(=+|-+)\s*", nxt)
            and len(nxt.strip()) >= 3
            and (i == 0 or not lines[i - 1].strip())
        ):
            flush()
            blocks.append(Block(1 if nxt.strip()[0] == "=" else 2, _clean_heading(md_inline(ln))))
            i += 2
            continue
        if re.match(r"^\(\S+\)=\s*$", stripped) or re.match(r"^\[[^\]]+\]:\s+\S+", stripped):
            i += 1
            continue
        if re.match(r"^(!!!|\?\?\?\+?)\s", stripped):
            i += 1
            continue
        if re.fullmatch(r"\|?\s*:?-{3,}:?\s*(\|\s*:?-{3,}:?\s*)*\|?", stripped):
            i += 1
            continue
        if stripped.startswith("|") and stripped.count("|") >= 2:
            ln = re.sub(r"\s*\|\s*", "  ", ln).rstrip()
        if (
            re.match(r"^( {4}|\t)", ln)
            and (not cur or not cur[-1].strip() or cur[-1][0] == "\x02")
            and not re.match(r"^\s*([-*+]|\d+\.)\s", ln)
        ):  # an indented code block
            cur.append("\x02" + ln)
            i += 1
            continue
        cur.append(ln)
        i += 1
    flush()
    return _finish(blocks, md_inline)


# --------------------------------------------------------------------------- POD

_POD_ESC = {"lt": "<", "gt": ">", "sol": "/", "verbar": "|", "quot": '"', "amp": "&"}


def pod_inline(s: str) -> str:
    def esc(m: re.Match) -> str:
        v = m.group(1)
        if v.isdigit():
            return chr(int(v))
        if v.startswith("0x"):
            return chr(int(v, 16))
        return _POD_ESC.get(v, "")

    def link(t: str) -> str:
        if "|" in t:
            return t.split("|", 1)[0]
        t = t.replace('"', "")
        if "/" in t:
            page, sec = t.split("/", 1)
            return f"{sec} in {page}" if page else sec
        return t

    def code(m: re.Match) -> str:
        kind, body = m.group(1), m.group(2)
        if kind in "XZ":
            return ""
        if kind == "E":
            return esc(re.match(r"(.*)", body))
        if kind == "L":
            return link(body)
        return body

    # C<< text >> style first (may contain single '>')
    s = re.sub(r"([A-Z])<{2,}\s+(.*?)\s+>{2,}", code, s, flags=re.S)
    prev = None
    while prev != s:
        prev = s
        s = re.sub(r"([A-Z])<([^<>]*)>", code, s)
    return s


def parse_pod(src: str) -> list[Block]:
    src = src.replace("\r\n", "\n")
    paras = re.split(r"\n\s*\n", src)
    blocks: list[Block] = [Block(0, "")]
    in_pod = False  # a .pm file starts with code; a .pod file starts with a command
    skip_until: str | None = None
    for p in paras:
        if not p.strip():
            continue
        first = p.lstrip("\n")
        if skip_until:
            if first.startswith(skip_until):
                skip_until = None
            continue
        if first.startswith("="):
            m = re.match(r"=(\w+)\s*(.*)", first, re.S)
            if not m:
                continue
            cmd, arg = m.group(1), re.sub(r"\s+", " ", m.group(2)).strip()
            if cmd == "cut":
                in_pod = False
            elif cmd == "pod":
                in_pod = True
            elif cmd.startswith("head"):
                in_pod = True
                level = int(cmd[4:]) if cmd[4:].isdigit() else 1
                blocks.append(Block(level, _clean_heading(pod_inline(arg))))
            elif cmd == "item":
                in_pod = True
                txt = pod_inline(arg)
                if txt and txt not in ("*", "o") and not re.fullmatch(r"\d+\.?", txt):
                    blocks[-1].paragraphs.append(("P", txt))  # type: ignore[arg-type]
            elif cmd == "begin":
                skip_until = "=end"
            continue
        if not in_pod:
            continue
        if p[:1] in (" ", "\t"):
            blocks[-1].paragraphs.append(("C", textwrap.dedent(p.expandtabs(8)).strip("\n")))  # type: ignore[arg-type]
        else:
            blocks[-1].paragraphs.append(("P", " ".join(p.split())))  # type: ignore[arg-type]
    return _finish(blocks, pod_inline)


# --------------------------------------------------------------------------- Python docstrings


def python_docstrings(src: str, module: str) -> list[Block]:
    """One block per documented module, class, function and method (heading: its dotted name)."""
    try:
        tree = ast.parse(src)
    except (SyntaxError, ValueError):
        return []
    out: list[Block] = []

    def visit(node: ast.AST, prefix: str) -> None:
        doc = ast.get_docstring(node, clean=True) if hasattr(node, "body") else None
        if doc:
            blocks = parse_rst(doc)
            paras = [p for b in blocks for p in ([b.heading] if b.heading else []) + b.paragraphs]
            if paras:
                out.append(Block(2, prefix, paras))
        for child in getattr(node, "body", []):
            if isinstance(child, ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
                if child.name.startswith("_") and child.name != "__init__":
                    continue
                visit(child, f"{prefix}.{child.name}")

    visit(tree, module)
    return out


# --------------------------------------------------------------------------- Vim help

_VIM_TAG = re.compile(r"\*[^*\s|]+\*")
_VIM_LINK = re.compile(r"\|([^|\s]+)\|")


def vim_inline(s: str) -> str:
    s = _VIM_TAG.sub("", s)
    s = _VIM_LINK.sub(r"\1", s)
    s = re.sub(r"`([^`]+)`", r"\1", s)
    return s


def parse_vimhelp(src: str) -> list[Block]:
    """Vim help files: ``====`` lines start a section, ``----`` lines a subsection; the first
    text line after them is the heading; ``Heading ~`` lines are headings too; code examples
    run from a line ending in ``>`` to a line starting with ``<``."""
    lines = src.replace("\r\n", "\n").split("\n")
    blocks: list[Block] = [Block(1, "")]
    cur: list[str] = []
    want_heading = 0
    in_code = False

    def flush() -> None:
        blocks[-1].paragraphs.extend(_paragraphs(cur))
        cur.clear()

    for n, ln in enumerate(lines):
        if n == 0 and ln.startswith("*"):
            m = re.match(r"\*([^*]+)\*", ln)
            blocks[0].heading = m.group(1) if m else ""
            continue
        if re.match(r"^\s*vim:.*:\s*$", ln) or re.match(r"^ vim:", ln):
            continue
        if in_code:
            if ln.startswith("<") or (ln and not ln[0].isspace()):
                in_code = False
                if ln.startswith("<"):
                    ln = ln[1:]
                    if not ln.strip():
                        continue
            else:
                cur.append("\x02" + ln)
                continue
        if re.fullmatch(r"={20,}\s*", ln) or re.fullmatch(r"-{20,}\s*", ln):
            want_heading = 2 if ln.startswith("=") else 3
            continue
        text = vim_inline(ln).strip()
        if want_heading and text:
            flush()
            blocks.append(Block(want_heading, re.sub(r"\s+", " ", text).rstrip("~ ").strip()))
            want_heading = 0
            continue
        if ln.rstrip().endswith(" ~") and text:
            flush()
            blocks.append(Block(4, re.sub(r"\s+", " ", text).rstrip("~ ").strip()))
            continue
        code_start = ln.rstrip().endswith(">") and (ln.rstrip() == ">" or ln.rstrip()[-2] == " ")
        if code_start:
            body = vim_inline(ln.rstrip()[:-1])
            if body.strip():
                cur.append(body)
            in_code = True
            continue
        cur.append(vim_inline(ln))
    flush()
    return _finish(blocks, lambda t: t)


# --------------------------------------------------------------------------- HTML

_BLOCK_TAGS = {
    "p", "div", "pre", "li", "dt", "dd", "tr", "table", "br", "ul", "ol", "dl",
    "blockquote", "section", "article", "figure", "caption", "hr",
}  # fmt: skip
_SKIP_TAGS = {"script", "style", "head", "nav", "noscript", "button", "svg", "title"}
_SKIP_CLASSES = {"navheader", "navfooter", "toc", "footer", "header", "breadcrumb", "sidebar"}


def parse_html(src: str) -> list[Block]:
    """HTML pages (DocBook/Sphinx output): ``<h1>``-``<h6>`` start blocks; navigation,
    tables of contents, scripts and styles are dropped; ``<pre>`` keeps its line breaks."""
    from html.parser import HTMLParser

    blocks: list[Block] = [Block(0, "")]

    class P(HTMLParser):
        def __init__(self) -> None:
            super().__init__(convert_charrefs=True)
            self.stack: list[tuple[str, bool]] = []  # (tag, starts a skipped subtree)
            self.skip = 0
            self.heading: list[str] | None = None
            self.level = 0
            self.buf: list[str] = []
            self.pre = 0

        def end_para(self) -> None:
            txt = "".join(self.buf)
            self.buf = []
            if self.pre:
                txt = txt.strip("\n")
                if txt.strip():
                    blocks[-1].paragraphs.append(("C", textwrap.dedent(txt)))  # type: ignore[arg-type]
            else:
                txt = re.sub(r"\s+", " ", txt).strip()
                if txt:
                    blocks[-1].paragraphs.append(("P", txt))  # type: ignore[arg-type]

        def handle_starttag(self, tag: str, attrs: list) -> None:
            classes = set((dict(attrs).get("class") or "").split())
            skipping = tag in _SKIP_TAGS or bool(classes & _SKIP_CLASSES)
            if tag in ("br", "hr", "img", "meta", "link", "input", "wbr"):
                if tag == "br" and not self.skip:
                    self.buf.append("\n" if self.pre else " ")
                return
            self.stack.append((tag, skipping))
            if skipping:
                self.skip += 1
            if self.skip:
                return
            if re.fullmatch(r"h[1-6]", tag):
                self.end_para()
                self.heading = []
                self.level = int(tag[1])
            elif tag in _BLOCK_TAGS:
                self.end_para()
                if tag == "pre":
                    self.pre += 1

        def handle_endtag(self, tag: str) -> None:
            if tag in ("br", "hr", "img", "meta", "link", "input", "wbr"):
                return
            while self.stack:
                t, skipping = self.stack.pop()
                if skipping:
                    self.skip -= 1
                if t == tag:
                    break
            if self.skip:
                return
            if re.fullmatch(r"h[1-6]", tag) and self.heading is not None:
                h = re.sub(r"\s+", " ", "".join(self.heading)).strip()
                h = re.sub(r"^[\dA-Z]+(\.\d+)*\.\s+", "", h).rstrip("¶#").strip()
                blocks.append(Block(self.level, h))
                self.heading = None
            elif tag in _BLOCK_TAGS:
                self.end_para()
                if tag == "pre" and self.pre:
                    self.pre -= 1

        def handle_data(self, data: str) -> None:
            if self.skip:
                return
            if self.heading is not None:
                self.heading.append(data)
            else:
                self.buf.append(data)

    p = P()
    p.feed(src)
    p.close()
    p.end_para()
    return _finish(blocks, lambda t: t)

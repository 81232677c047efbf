"""A small, deterministic man page (roff ``man``/``mdoc``) to text converter.

It does not depend on the machine's groff, so the same page gives the same text
everywhere. It renders the way ``nroff`` would for a reader (``.if n`` is true,
``.if t`` false), keeps section structure and drops presentation-only requests.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

NAMED_CHARS = {
    "em": "—",
    "en": "–",
    "hy": "-",
    "mi": "-",
    "aq": "'",
    "dq": '"',
    "lq": '"',
    "rq": '"',
    "oq": "'",
    "cq": "'",
    "bu": "•",
    "co": "©",
    "rg": "®",
    "tm": "™",
    "mu": "×",
    "di": "÷",
    "+-": "±",
    "<=": "≤",
    ">=": "≥",
    "!=": "≠",
    "==": "≡",
    "~=": "≈",
    "->": "→",
    "<-": "←",
    "ti": "~",
    "ha": "^",
    "rs": "\\",
    "sl": "/",
    "ba": "|",
    "br": "|",
    "or": "|",
    "ga": "`",
    "aa": "´",
    "ul": "_",
    "dg": "†",
    "sc": "§",
    "de": "°",
    "pl": "+",
    "eq": "=",
    "ps": "¶",
    "Fo": "«",
    "Fc": "»",
    "fo": "‹",
    "fc": "›",
    "sq": "□",
    "lh": "☜",
    "rh": "☞",
    "ua": "↑",
    "da": "↓",
    "Do": "$",
    "at": "@",
    "sh": "#",
    "pc": "·",
    "ct": "¢",
    "Po": "£",
    "Eu": "€",
    "Ye": "¥",
    "if": "∞",
    "*a": "α",
    "*b": "β",
    "*g": "γ",
    "*d": "δ",
    "*e": "ε",
    "*l": "λ",
    "*m": "μ",
    "*p": "π",
    "*s": "σ",
    "ss": "ß",
    ":a": "ä",
    ":o": "ö",
    ":u": "ü",
    "'e": "é",
    "`e": "è",
    "12": "½",
    "14": "¼",
    "34": "¾",
}

DEFAULT_STRINGS = {
    "R": "®",
    "Tm": "™",
    "lq": '"',
    "rq": '"',
    "Aq": "'",
    "C`": "",
    "C'": "",
    'L"': '"',
    'R"': '"',
    "--": "--",
    "PI": "π",
    "S": "",
}

# Requests and man/mdoc macros that only affect layout: they produce no text.
LAYOUT = set(
    [
        "ad",
        "na",
        "hy",
        "nh",
        "ne",
        "in",
        "ti",
        "ll",
        "ft",
        "ps",
        "vs",
        "ta",
        "ce",
        "ul",
        "cs",
        "ss",
        "lg",
        "fam",
        "mso",
        "pc",
        "tr",
        "nr",
        "rr",
        "rm",
        "rn",
        "am",
        "bp",
        "ev",
        "mk",
        "rt",
        "ns",
        "rs",
        "hw",
        "cu",
        "fl",
        "PD",
        "DT",
        "UC",
        "AT",
        "IX",
        "tm",
        "cc",
        "c2",
        "pl",
        "po",
        "pn",
        "wh",
        "ch",
        "dt",
        "it",
        "em",
        "lt",
        "pm",
        "ab",
        "ex",
        "so",
        "Dd",
        "Dt",
        "Os",
        "Bk",
        "Ek",
        "Bf",
        "Ef",
        "Ed",
        "El",
        "EQ",
        "EN",
        "PS",
        "PE",
        "RS",
        "RE",
        "Ve",
        "ftr",
        "hc",
        "ie",
        "if",
        "el",
        "nop",
        "kern",
        "sty",
        "ds1",
        "rj",
        "mc",
        "lf",
        "ec",
        "eo",
        '""',
    ]
)
PARA = {"PP", "P", "LP", "sp", "Sp", "HP", "Pp", "Lp", "Bl", "Bd", "YS", "Rs", "Re"}
ALT = {"BR", "RB", "IR", "RI", "BI", "IB"}
TCL_TEXT = {"QW", "PQ", "QR", "AP", "UL", "MT", "CS", "CE"}
JOINED = {"B", "I", "SM", "SB", "R", "Nm_"}

MDOC_MACROS = set(
    [
        "Ac",
        "Ad",
        "An",
        "Ao",
        "Ap",
        "Aq",
        "Ar",
        "At",
        "Bc",
        "Bf",
        "Bo",
        "Bq",
        "Brc",
        "Bro",
        "Brq",
        "Bsx",
        "Bt",
        "Bx",
        "Cd",
        "Cm",
        "D1",
        "Db",
        "Dc",
        "Dl",
        "Do",
        "Dq",
        "Dv",
        "Dx",
        "Ec",
        "Ef",
        "Em",
        "En",
        "Eo",
        "Er",
        "Es",
        "Ev",
        "Ex",
        "Fa",
        "Fc",
        "Fd",
        "Fl",
        "Fn",
        "Fo",
        "Fr",
        "Ft",
        "Fx",
        "Hf",
        "Ic",
        "In",
        "It",
        "Lb",
        "Li",
        "Lk",
        "Me",
        "Ms",
        "Mt",
        "Nd",
        "Nm",
        "No",
        "Ns",
        "Nx",
        "Oc",
        "Oo",
        "Op",
        "Ot",
        "Ox",
        "Pa",
        "Pc",
        "Pf",
        "Po",
        "Pq",
        "Qc",
        "Ql",
        "Qo",
        "Qq",
        "Re",
        "Rs",
        "Rv",
        "Sc",
        "Sm",
        "So",
        "Sq",
        "St",
        "Sx",
        "Sy",
        "Ta",
        "Tn",
        "Ux",
        "Va",
        "Vt",
        "Xc",
        "Xo",
        "Xr",
        "%A",
        "%B",
        "%C",
        "%D",
        "%I",
        "%J",
        "%N",
        "%O",
        "%P",
        "%Q",
        "%R",
        "%T",
        "%U",
        "%V",
    ]
)
# mdoc macros whose arguments are printed with surrounding punctuation.
MDOC_WRAP = {"Dq": ('"', '"'), "Qq": ('"', '"'), "Sq": ("'", "'"), "Pq": ("(", ")")}
MDOC_WRAP |= {"Op": ("[", "]"), "Bq": ("[", "]"), "Aq": ("<", ">"), "Brq": ("{", "}")}


@dataclass
class Section:
    name: str
    sub: str  # "" for the section's own text, else the .SS subsection title
    paragraphs: list[str] = field(default_factory=list)


@dataclass
class ManPage:
    name: str  # from .TH (or .Dt), lower-cased
    section: str  # "2", "3ssl", ...
    names: str  # the NAME line before the dash ("open, openat, creat")
    summary: str  # the NAME line after the dash ("open and possibly create a file")
    sections: list[Section]


_ESC_ARG = re.compile(r"""\\[hvwHSlLNXZboxDRCY]('[^']*'|"[^"]*"|\[[^\]]*\]|\|[^|]*\|)""")
_FONT = re.compile(r"\\f(\[[^\]]*\]|\([A-Za-z0-9]{2}|[A-Za-z0-9])")
_SIZE = re.compile(r"\\s(\[[^\]]*\]|\([+-]?[0-9]{2}|[+-]?[0-9]{1,2}|'[^']*')")
_REG = re.compile(r"\\n[+-]?(\[[^\]]*\]|\([^\s]{2}|\S)")
_STR = re.compile(r"\\\*(\[[^\]]*\]|\([^\s]{2}|[^\s(\[])")
_NAMED = re.compile(r"\\(\[[^\]]*\]|\([^\s]{2})")


class _Renderer:
    def __init__(self) -> None:
        self.strings = dict(DEFAULT_STRINGS)
        self.sections: list[Section] = []
        self.cur: Section | None = None
        self.buf: list[str] = []  # current paragraph's lines
        self.nofill = False
        self.th_name = ""
        self.th_sec = ""
        self.tag_pending = False
        self.next_line_heading: str | None = None
        self.mdoc_name = ""
        self.last_ie = True
        self.nofill_para = False

    # -------------------------------------------------------------- escapes
    def text(self, s: str) -> str:
        if "\\" not in s:
            return s
        s = s.replace("\\\\", "\x00")  # an escaped backslash (in macro bodies)
        s = re.sub(r'\\".*$', "", s)
        s = re.sub(r"\\#.*$", "", s)
        s = _ESC_ARG.sub("", s)
        s = _FONT.sub("", s)
        s = _SIZE.sub("", s)
        s = _REG.sub("", s)
        s = _STR.sub(lambda m: self.strings.get(m.group(1).strip("[]").lstrip("("), ""), s)

        def named(m: re.Match) -> str:
            key = m.group(1)
            key = key[1:-1] if key.startswith("[") else key[1:]
            if key.startswith("u") and re.fullmatch(r"u[0-9A-Fa-f]{4,6}", key):
                return chr(int(key[1:], 16))
            if key.startswith("char") and key[4:].isdigit():
                return chr(int(key[4:]))
            return NAMED_CHARS.get(key, "")

        s = _NAMED.sub(named, s)
        s = re.sub(r"\\[kz].", "", s)
        s = re.sub(r"\\\$[0-9*@]", "", s)
        simple = {
            "-": "-",
            "e": "\\",
            "E": "\\",
            "&": "",
            "|": "",
            "^": "",
            "~": " ",
            " ": " ",
            "0": " ",
            "c": "",
            "%": "",
            ":": "",
            "'": "'",
            "`": "`",
            ".": ".",
            "t": "\t",
            "{": "",
            "}": "",
            "d": "",
            "u": "",
            "r": "",
            "p": "",
            "a": "",
            "!": "",
            "/": "",
            ",": "",
            "?": "",
            "j": "",
        }
        s = re.sub(r"\\(.)", lambda m: simple.get(m.group(1), m.group(1)), s)
        s = s.replace("\\", "").replace("\x00", "\\")
        return s

    # -------------------------------------------------------------- output
    def para(self) -> None:
        if self.buf:
            joined = "\n".join(self.buf) if self.nofill_para else " ".join(self.buf)
            joined = joined.strip("\n")
            if not self.nofill_para:
                joined = re.sub(r"[ \t]+", " ", joined).strip()
            if joined.strip():
                if self.cur is None:
                    self.cur = Section("", "")
                    self.sections.append(self.cur)
                self.cur.paragraphs.append(joined)
        self.buf = []
        self.tag_pending = False

    def emit(self, s: str) -> None:
        if not self.buf:
            self.nofill_para = self.nofill
        if self.nofill:
            self.buf.append(s.rstrip())
        elif self.tag_pending:
            # .TP tag: the tag gets its own line before the body.
            self.buf.append(s)
            self.para()
        else:
            self.buf.append(s)

    def heading(self, name: str, sub: bool) -> None:
        self.para()
        name = re.sub(r"\s+", " ", name).strip().strip('"')
        if sub:
            top = self.cur.name if self.cur else ""
            self.cur = Section(top, name)
        else:
            self.cur = Section(name.upper(), "")
        self.sections.append(self.cur)

    # -------------------------------------------------------------- requests
    @staticmethod
    def split_args(s: str) -> list[str]:
        args, i, n = [], 0, len(s)
        while i < n:
            while i < n and s[i] in " \t":
                i += 1
            if i >= n:
                break
            if s[i] == '"':
                i += 1
                j = i
                out = []
                while j < n:
                    if s[j] == '"':
                        if j + 1 < n and s[j + 1] == '"':
                            out.append('"')
                            j += 2
                            continue
                        break
                    out.append(s[j])
                    j += 1
                args.append("".join(out))
                i = j + 1
            else:
                j = i
                while j < n and s[j] not in " \t":
                    j += 2 if s[j] == "\\" else 1
                args.append(s[i:j])
                i = j
        return args

    def cond(self, c: str) -> tuple[bool, str]:
        """Evaluate an ``.if`` condition as nroff would; return (value, rest of line)."""
        c = c.lstrip()
        neg = c.startswith("!")
        if neg:
            c = c[1:]
        m = re.match(r"""(n|t|v|e|o)(?=\s|\\\{)""", c)
        if m:
            val = m.group(1) in ("n", "o")
            rest = c[1:]
        elif c.startswith(("\\n(.g", "\\n[.g]")):
            val = True
            rest = c[5:] if c.startswith("\\n(.g") else c[6:]
        elif c[:1] in "'\"":
            q = c[0]
            end = c.find(q, 1)
            end = c.find(q, end + 1)
            val = False
            rest = c[end + 1 :] if end > 0 else ""
        else:
            m = re.match(r"\S+", c)
            val = False
            rest = c[m.end() :] if m else ""
        return (not val if neg else val), rest.lstrip()

    def run(self, src: str) -> None:
        lines = src.replace("\r\n", "\n").split("\n")
        # join continuation lines
        joined: list[str] = []
        acc = ""
        for ln in lines:
            if ln.endswith("\\") and not ln.endswith("\\\\"):
                acc += ln[:-1]
                continue
            joined.append(acc + ln)
            acc = ""
        if acc:
            joined.append(acc)
        self.nofill_para = False
        i = 0
        n = len(joined)
        skip_depth = 0
        while i < n:
            ln = joined[i]
            i += 1
            if skip_depth:
                skip_depth += ln.count("\\{") - ln.count("\\}")
                continue
            if ln.startswith(('.\\"', "'\\\"", '.\\"', '\\"')) or ln in (".", "'"):
                continue
            if ln.startswith(("'", ".")):
                i = self.request(ln[1:], joined, i)
                if isinstance(i, tuple):
                    i, skip_depth = i
                continue
            self.textline(ln)
        self.para()

    def textline(self, ln: str) -> None:
        if self.next_line_heading is not None:
            kind = self.next_line_heading
            self.next_line_heading = None
            self.heading(self.text(ln), kind == "SS")
            return
        if not self.nofill and not ln.strip():
            self.para()
            return
        self.emit(self.text(ln))

    def request(self, body: str, lines: list[str], i: int):
        body = body.lstrip(" \t")
        m = re.match(r"(\S+)\s*(.*)$", body)
        if not m:
            return i
        name, rest = m.group(1), m.group(2)
        if name.endswith("\\}"):
            name = name[:-2]
        if name.startswith('\\"'):
            return i
        if "\\}" in rest and name not in ("if", "ie", "el"):
            rest = rest.replace("\\}", "")
        if name == "do":
            return self.request(rest, lines, i)
        if name in ("if", "ie", "el"):
            if name == "el":
                val, rest2 = (not self.last_ie), rest.lstrip()
            else:
                val, rest2 = self.cond(rest)
                if name == "ie":
                    self.last_ie = val
            block = rest2.startswith("\\{")
            if block:
                rest2 = rest2[2:].lstrip()
            if not val:
                if block:
                    depth = 1 + rest2.count("\\{") - rest2.count("\\}")
                    return (i, depth) if depth > 0 else i
                return i
            rest2 = rest2.replace("\\}", "")
            if not rest2.strip():
                return i
            if rest2.startswith((".", "'")):
                return self.request(rest2[1:], lines, i)
            self.textline(rest2)
            return i
        if name in ("de", "de1", "am", "ig"):
            end = ".."
            args = self.split_args(rest)
            if name != "ig" and len(args) > 1:
                end = "." + args[1]
            elif name == "ig" and args:
                end = "." + args[0]
            while i < len(lines) and lines[i].strip() != end:
                i += 1
            return i + 1
        if name == "ds" or name == "ds1":
            parts = rest.split(None, 1)
            if parts:
                val = parts[1] if len(parts) > 1 else ""
                val = val[1:] if val.startswith('"') else val
                self.strings[parts[0]] = self.text(val)
            return i
        if name == "TS":
            return self.table(lines, i)
        if name in ("SH", "Sh", "SS", "Ss"):
            sub = name in ("SS", "Ss")
            args = self.split_args(rest)
            if args:
                txt = " ".join(args)
                if name in ("Sh", "Ss"):
                    txt = self.mdoc_line(rest)
                self.heading(self.text(txt), sub)
            else:
                self.next_line_heading = "SS" if sub else "SH"
            return i
        if name == "TH" or name == "Dt":
            args = self.split_args(rest)
            if args:
                self.th_name = self.text(args[0])
            if len(args) > 1:
                self.th_sec = self.text(args[1])
            return i
        if name in PARA:
            self.para()
            if (name == "Bd" and "-literal" in rest) or (name == "Bd" and "-unfilled" in rest):
                self.nofill = True
            return i
        if name in ("Ed",):
            self.para()
            self.nofill = False
            return i
        if name == "br":
            if self.nofill:
                return i
            if self.buf:
                self.buf[-1] += "\n"
                self.nofill_para = True
            return i
        if name in ("nf", "EX", "Vb"):
            self.para()
            self.nofill = True
            return i
        if name in ("fi", "EE", "Ve"):
            self.para()
            self.nofill = False
            return i
        if name == "TP":
            self.para()
            self.tag_pending = True
            return i
        if name == "TQ":
            self.para()
            self.tag_pending = True
            return i
        if name in ("IP", "Ip"):
            self.para()
            args = self.split_args(rest)
            if args and args[0].strip():
                tag = self.text(args[0]).strip()
                if tag not in ("•", "*", "-", "o", "·"):
                    self.emit(tag)
                    self.para()
            return i
        if name in ALT:
            args = self.split_args(rest)
            self.emit(self.text("".join(args)))
            return i
        if name in JOINED:
            args = self.split_args(rest)
            if args:
                self.emit(self.text(" ".join(args)))
            return i
        if name in ("UR", "MT"):
            return i
        if name in ("UE", "ME"):
            args = self.split_args(rest)
            if args and self.buf:
                self.buf[-1] += self.text(args[0])
            return i
        if name == "SY":
            self.para()
            self.emit(self.text(" ".join(self.split_args(rest))))
            return i
        if name == "OP":
            args = self.split_args(rest)
            self.emit("[" + self.text(" ".join(args)) + "]")
            return i
        if name == "Nm":
            args = self.split_args(rest)
            if args and not self.mdoc_name:
                self.mdoc_name = self.text(args[0])
            self.emit(self.mdoc_line(rest) if args else self.mdoc_name)
            return i
        if name == "Nd":
            self.emit("\\- " + self.mdoc_line(rest))
            return i
        if name == "It":
            self.para()
            if rest.strip():
                self.emit(self.mdoc_line(rest))
                self.para()
            return i
        if name in MDOC_MACROS:
            self.emit(self.mdoc_line(body))
            return i
        if name in TCL_TEXT:  # Tcl/Tk man page macros whose arguments are running text
            args = self.split_args(rest)
            if name == "QW" and args:
                args = [f'"{args[0]}"', *args[1:]]
            elif name == "PQ" and args:
                args = [f'("{args[0]}"', *args[1:], ")"]
            if args:
                self.emit(self.text(" ".join(args)))
            return i
        # LAYOUT requests, user-defined macros (.IX, .Vb args...) and unknown requests.
        return i

    def mdoc_line(self, s: str) -> str:
        toks = self.split_args(s)
        out: list[str] = []
        closers: list[str] = []
        no_space = False
        j = 0
        while j < len(toks):
            t = toks[j]
            j += 1
            if t in MDOC_MACROS:
                if t == "Fl":
                    nxt = toks[j] if j < len(toks) and toks[j] not in MDOC_MACROS else ""
                    if nxt:
                        j += 1
                    out.append(("" if not no_space else "\x01") + "-" + self.text(nxt))
                    no_space = False
                    continue
                if t == "Xr" and j + 1 < len(toks) + 1:
                    nm = toks[j] if j < len(toks) else ""
                    sec = toks[j + 1] if j + 1 < len(toks) else ""
                    j += 2
                    out.append(f"{self.text(nm)}({self.text(sec)})")
                    continue
                if t == "Nm" and (j >= len(toks) or toks[j] in MDOC_MACROS):
                    out.append(self.mdoc_name)
                    continue
                if t in ("Ns", "Ap", "No", "Pf"):
                    no_space = t in ("Ns", "Pf")
                    if t == "Ap":
                        out.append("\x01'")
                    continue
                if t in MDOC_WRAP:
                    o, c = MDOC_WRAP[t]
                    out.append(o + "\x01")
                    closers.append(c)
                    continue
                continue
            piece = self.text(t)
            if no_space:
                piece = "\x01" + piece
                no_space = False
            if piece in (".", ",", ";", ":", ")", "]", "?", "!"):
                piece = "\x01" + piece
            out.append(piece)
        res = " ".join(out)
        for c in reversed(closers):
            res += "\x01" + c
        return re.sub(r"\s*\x01", "", res)

    def table(self, lines: list[str], i: int) -> int:
        """Render a tbl(1) table as one line per row, cells separated by two spaces."""
        self.para()
        # options line(s) end with ';', format lines end with '.'
        tab = "\t"
        while i < len(lines):
            ln = lines[i].strip()
            i += 1
            m = re.search(r"tab\s*\((.)\)", ln)
            if m:
                tab = m.group(1)
            if ln.endswith("."):
                break
        rows: list[str] = []
        cell_block: list[str] | None = None
        cur: list[str] = []
        while i < len(lines):
            raw = lines[i]
            i += 1
            if raw.startswith(".TE"):
                break
            if raw.startswith(".T&"):
                while i < len(lines) and not lines[i].strip().endswith("."):
                    i += 1
                i += 1
                continue
            if cell_block is not None:
                if raw.startswith("T}"):
                    cur.append(" ".join(cell_block))
                    cell_block = None
                    tail = raw[2:]
                    if tail.startswith(tab):
                        parts = tail[1:].split(tab)
                        if parts and parts[-1].endswith("T{"):
                            cur.extend(self.text(p) for p in parts[:-1])
                            cell_block = []
                            continue
                        cur.extend(self.text(p) for p in parts)
                    rows.append("  ".join(c for c in cur if c.strip()))
                    cur = []
                elif raw.startswith((".", "'")):
                    continue
                else:
                    cell_block.append(self.text(raw))
                continue
            if raw.startswith((".", "'")) or raw.strip() in ("_", "=", ""):
                continue
            parts = raw.split(tab)
            if parts[-1].endswith("T{"):
                cur = [self.text(p) for p in parts[:-1]]
                cell_block = []
                continue
            rows.append("  ".join(self.text(p).strip() for p in parts if p.strip()))
        rows = [r for r in rows if r.strip() and r.strip() not in ("_", "=")]
        if rows:
            if self.cur is None:
                self.cur = Section("", "")
                self.sections.append(self.cur)
            self.cur.paragraphs.append("\n".join(rows))
        return i


def parse_manpage(src: str) -> ManPage | None:
    """Parse a man page; ``None`` for alias pages (``.so``) and pages without text."""
    head = src.lstrip()[:4000]
    if re.match(r"^\.so\s", head) or (re.search(r"^\.so\s", src, re.M) and len(src) < 400):
        return None
    r = _Renderer()
    r.run(src)
    sections = [s for s in r.sections if s.paragraphs or s.sub]
    names, summary = "", ""
    for s in sections:
        if s.name in ("NAME", "NOM", "NAMN") and not s.sub:
            line = " ".join(s.paragraphs)
            line = re.sub(r"\s+", " ", line).strip()
            m = re.match(r"(.*?)\s+(?:-|—|–|\\-)+\s+(.*)$", line)
            if m:
                names, summary = m.group(1).strip(), m.group(2).strip()
            else:
                names = line
            break
    if not sections:
        return None
    return ManPage(
        name=r.th_name.lower() or names.split(",")[0].strip(),
        section=r.th_sec.lower(),
        names=names,
        summary=summary,
        sections=sections,
    )


def decode(raw: bytes) -> str:
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        return raw.decode("latin-1")

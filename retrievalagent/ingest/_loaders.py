"""Turning what a caller hands to ``add_documents`` into source documents.

Accepted: paths to files or folders (Markdown, text/reST, HTML; PDF when ``pypdf`` is
installed), LangChain ``Document``\\ s and plain strings. A string that looks like a path
(one line starting with ``./``, ``../``, ``/`` or ``~``, or one word with a path separator
in it or ending in a file extension) must exist: a mistyped path is an error, never
indexed as text.

Files that cannot be text are refused with an ``IngestError`` naming them: a file with NUL
bytes in its first 8 KiB (binary), a FIFO, socket or device, a symlink loop, an unreadable
file. Inside a folder, entries that are not regular files (FIFOs, sockets, dangling or
looping symlinks) are skipped with a warning, and a subfolder that cannot be listed is an
error (its files must not look deleted to a mirroring ingest); an empty file is indexed as a
source with no chunks (listed in ``IngestReport.empty_sources``).
"""

from __future__ import annotations

import codecs
import hashlib
import json
import logging
import os
import re
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from langchain_core.documents import Document

from retrievalagent.errors import IngestError
from retrievalagent.ingest._chunking import Section, html_to_sections, split_sections

__all__ = [
    "SUFFIXES",
    "Inputs",
    "SourceDoc",
    "check_paths_exist",
    "decode_text",
    "expand_inputs",
    "read_inputs",
    "source_key",
]

logger = logging.getLogger(__name__)

SUFFIXES = {
    ".md": "markdown",
    ".markdown": "markdown",
    ".mdx": "markdown",
    ".txt": "text",
    ".text": "text",
    ".rst": "text",
    ".adoc": "text",
    ".html": "html",
    ".htm": "html",
    ".xhtml": "html",
    ".pdf": "pdf",
}
_SURROGATE = re.compile(r"[\ud800-\udfff]")
_SKIP_DIRS = {".git", ".hg", ".svn", "node_modules", "__pycache__", ".venv", "venv", ".tox"}


@dataclass
class SourceDoc:
    """One document to index: where it came from, its text, kind and the caller's metadata."""

    source: str
    kind: str  # markdown | text | html | pdf
    text: str
    metadata: dict[str, Any] = field(default_factory=dict)
    title: str | None = None

    def sections(self) -> list[Section]:
        if self.kind == "html":
            title, sections = html_to_sections(self.text)
            self.title = self.title or title
            return sections
        return split_sections(self.text, plain_headings=self.source.endswith((".txt", ".text")))

    def content_hash(self, chunking: str) -> str:
        digest = hashlib.sha256()
        for part in (
            self.kind,
            chunking,
            json.dumps(self.metadata, sort_keys=True, default=str),
            self.text,
        ):
            digest.update(part.encode("utf-8", "surrogatepass"))
            digest.update(b"\x00")
        # 40 hex digits: 32 would look like a UUID, which Qdrant rewrites in facet values.
        return digest.hexdigest()[:40]


def source_key(path: Path) -> str:
    """The stable source id of a file: its absolute path (POSIX separators)."""
    return path.expanduser().resolve().as_posix()


# One word ending in a file extension: a dot, then a letter and up to eight letters or
# digits (".markdown").
_EXTENSION = re.compile(r"\.[A-Za-z][A-Za-z0-9]{0,8}$")


def _looks_like_path(text: str) -> bool:
    """Whether a string that names nothing on disk was meant as a path (then it is an
    error, not text): one line that starts with ``./``, ``../``, ``/`` or ``~``, or one
    word with a ``/`` or ``\\`` in it or ending in a file extension (``notes.md``)."""
    # No path can hold a NUL byte: such a string is text, whatever it starts with.
    # No length limit: a long one-line path that does not exist is an error, not text.
    stripped = text.strip()  # a line break after a path is still a path ("notes.md\n")
    if "\n" in stripped or "\x00" in text or not stripped:
        return False
    if stripped.startswith(("./", "../", "/", "~", ".\\")) and " " not in stripped[:3]:
        return True
    if len(stripped.split()) > 1:
        return False
    return "/" in stripped or "\\" in stripped or _EXTENSION.search(stripped) is not None


def _unsupported(path: Path) -> IngestError:
    return IngestError(
        f"cannot ingest {path}: unsupported file type {path.suffix or '(none)'}; "
        f"supported: {', '.join(sorted(SUFFIXES))}"
    )


def _read_file(path: Path, metadata: Mapping[str, Any]) -> SourceDoc:
    kind = SUFFIXES.get(path.suffix.lower())
    if kind is None:
        raise _unsupported(path)
    if kind == "pdf":
        try:
            from pypdf import PdfReader
        except ImportError:
            raise IngestError(
                f"cannot ingest {path}: PDF support needs 'pip install pypdf'"
            ) from None
        try:
            pages = PdfReader(str(path)).pages
        except OSError as exc:
            raise IngestError(f"cannot read {path}: {exc.strerror or exc}") from exc
        text = "\n\n".join(page.extract_text() or "" for page in pages)
    else:
        try:
            raw = path.read_bytes()
        except OSError as exc:
            raise IngestError(f"cannot read {path}: {exc.strerror or exc}") from exc
        unicode = _decode_with_bom(raw)
        if unicode is None and b"\x00" in raw[:8192]:
            raise IngestError(
                f"cannot ingest {path}: it looks like a binary file (NUL bytes), not text"
            )
        if unicode is None and b"\x00" in raw:  # text, then NULs (a log cut by a crash)
            logger.warning("%s: dropped %d NUL bytes after its text", path, raw.count(b"\x00"))
            raw = raw.replace(b"\x00", b"")
        text = decode_text(raw, path) if unicode is None else unicode
    return SourceDoc(source_key(path), kind, text, dict(metadata), title=None)


_NOT_UTF8 = re.compile(r"[\udc80-\udcff]")

# UTF-32 first: its little-endian BOM starts with UTF-16's.
_BOMS = (
    (codecs.BOM_UTF32_LE, "utf-32"),
    (codecs.BOM_UTF32_BE, "utf-32"),
    (codecs.BOM_UTF16_LE, "utf-16"),
    (codecs.BOM_UTF16_BE, "utf-16"),
)


def _decode_with_bom(raw: bytes) -> str | None:
    """``raw`` decoded as UTF-16 or UTF-32 when it starts with that encoding's byte order
    mark (as Notepad writes) and decodes cleanly to text without NUL characters, else
    ``None`` (then it is read like any other file, and NUL bytes mean binary)."""
    encoding = next((enc for bom, enc in _BOMS if raw.startswith(bom)), None)
    if encoding is None:
        return None
    try:
        text = raw.decode(encoding)
    except UnicodeDecodeError:  # a BOM by chance: binary data, or not that encoding
        return None
    return None if "\x00" in text[:8192] else text


def _legacy_encoding(lines: list[bytes]) -> str:
    """The single-byte encoding of the lines that are not UTF-8: Windows-1252 when they
    use its printable bytes 0x80-0x9F (curly quotes, dashes, the euro sign), which Latin-1
    would read as invisible control characters; else Latin-1 (the same above 0x9F)."""
    if not any(0x80 <= byte <= 0x9F for line in lines for byte in line):
        return "latin-1"
    try:
        for line in lines:
            line.decode("cp1252")
    except UnicodeDecodeError:  # 0x81, 0x8D, 0x8F, 0x90 or 0x9D: not Windows-1252
        return "latin-1"
    return "cp1252"


_ENCODING_NAMES = {"latin-1": "Latin-1", "cp1252": "Windows-1252"}


def decode_text(raw: bytes, path: Path | str) -> str:
    """``raw`` as UTF-8, line by line where it is not: lines with no valid UTF-8 beyond
    ASCII are read in a legacy encoding (Windows-1252 or Latin-1, see
    :func:`_legacy_encoding`), stray bytes in an otherwise UTF-8 line become U+FFFD. A
    warning names the file, the encoding and counts the bytes that were not UTF-8."""
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        pass
    decoded: list[str | bytes] = []  # bytes: a legacy line, decoded once its encoding is known
    legacy_bytes, replaced = 0, 0
    for line in raw.splitlines(keepends=True):
        text = line.decode("utf-8", errors="surrogateescape")
        bad = len(_NOT_UTF8.findall(text))
        if not bad:
            decoded.append(text)
        elif bad == sum(1 for b in line if b >= 0x80):  # no valid multi-byte characters
            decoded.append(line)
            legacy_bytes += bad
        else:
            decoded.append(_NOT_UTF8.sub("\ufffd", text))
            replaced += bad
    encoding = _legacy_encoding([line for line in decoded if isinstance(line, bytes)])
    how = [f"{legacy_bytes} read as {_ENCODING_NAMES[encoding]}"] if legacy_bytes else []
    how += [f"{replaced} replaced by U+FFFD"] if replaced else []
    logger.warning(
        "%s is not valid UTF-8: %d byte(s) are not (%s)",
        path,
        legacy_bytes + replaced,
        ", ".join(how),
    )
    return "".join(x.decode(encoding) if isinstance(x, bytes) else x for x in decoded)


def _walk_error(exc: OSError) -> None:
    """Stop the walk at a folder that cannot be listed (mirroring would take its files
    for deleted ones); a folder removed while the walk runs is gone, so it is skipped."""
    if isinstance(exc, FileNotFoundError):
        return
    folder = exc.filename if exc.filename is not None else "a folder"
    raise IngestError(
        f"cannot read the folder {folder}: {exc.strerror or exc}; nothing was indexed or removed"
    ) from exc


def _not_a_file(path: Path) -> str:
    """Why a folder entry that is there is not a file to read."""
    if path.is_symlink():
        return "a broken symlink or a symlink loop"
    return "not a regular file (a FIFO, socket, device or folder)"


def _walk(folder: Path, unread: list[str]) -> Iterator[Path]:
    """The supported files under ``folder``, in a fixed order. A folder that cannot be
    listed is an ``IngestError``; an entry that is there but not a file is skipped with a
    warning, and one removed meanwhile silently (it is gone: mirroring drops it). A PDF
    that cannot be read now (no pypdf) goes to ``unread``: it is there, and mirroring must
    not take it for deleted."""
    pdfs: list[Path] = []
    reads_pdf = _has_pypdf()  # once: a failed import is not remembered, each one searches
    for root, dirs, files in os.walk(folder, onerror=_walk_error):
        dirs[:] = sorted(d for d in dirs if d not in _SKIP_DIRS and not d.startswith("."))
        for name in [d for d in dirs if os.path.islink(os.path.join(root, d))]:
            dirs.remove(name)  # os.walk does not enter it: say so (a link loop is possible)
            logger.warning(
                "skipped %s: a symlinked folder (give it as a path to index it)", Path(root) / name
            )
        for name in sorted(files):
            path = Path(root) / name
            if name.startswith(".") or path.suffix.lower() not in SUFFIXES:
                continue
            if _NOT_UTF8.search(str(path)):  # the index keeps names as UTF-8 text
                logger.warning(
                    "skipped %s: its name is not UTF-8 (rename it to index it)", ascii(str(path))
                )
                continue
            if path.suffix.lower() == ".pdf" and not reads_pdf:
                pdfs.append(path)
                unread.append(source_key(path))
                continue
            if path.is_file():
                yield path
            elif os.path.lexists(path):
                logger.warning("skipped %s: %s", path, _not_a_file(path))
    if pdfs:
        shown = ", ".join(str(p) for p in pdfs[:5]) + (
            f" and {len(pdfs) - 5} more" if len(pdfs) > 5 else ""
        )
        logger.warning(
            "skipped %d PDF file(s) (reading PDFs needs 'pip install pypdf'): %s", len(pdfs), shown
        )


def _read_folder(
    folder: Path, metadata: Mapping[str, Any], unread: list[str]
) -> Iterator[SourceDoc]:
    for path in _walk(folder, unread):
        try:
            yield _read_file(path, metadata)
        except IngestError as exc:
            if isinstance(exc.__cause__, FileNotFoundError) and not os.path.lexists(path):
                continue  # removed after the folder was listed: gone, like any deleted file
            raise


def _has_pypdf() -> bool:
    try:
        import pypdf  # noqa: F401
    except ImportError:
        return False
    return True


def _exists(text: str) -> bool:
    """Whether ``text`` names an existing file or folder (False for text no path can be)."""
    if not text.strip():  # Path("") is ".": blank text must never mean the current folder
        return False
    try:
        return Path(text.strip()).expanduser().exists()
    except (OSError, ValueError, RuntimeError):  # too long, a NUL byte, "~user" unknown
        return False


def _missing(path: Path) -> IngestError:
    return IngestError(f"cannot ingest {path}: no such file or folder")


def check_paths_exist(items: Any) -> None:
    """Raise the ``IngestError`` :func:`read_inputs` would for the first of ``items`` that
    names a path that does not exist, or a file it cannot read (an unsupported type, a
    FIFO, a broken symlink), without reading any file: a command can refuse such an ingest
    before it creates a collection."""
    for item in _item_list(items):
        if isinstance(item, str | os.PathLike):
            path = _as_path(item)
            if path is None:
                continue
            try:
                path = path.expanduser()
                exists, is_dir, is_file = os.path.lexists(path), path.is_dir(), path.is_file()
            except (OSError, ValueError, RuntimeError):  # read_inputs says what is wrong
                continue
            if not exists:
                raise _missing(path)
            if is_file and path.suffix.lower() not in SUFFIXES:
                raise _unsupported(path)
            if not is_dir and not is_file:
                list(_from_path(path, {}, []))  # the error naming what it is instead


def _from_path(path: Path, metadata: Mapping[str, Any], unread: list[str]) -> Iterator[SourceDoc]:
    try:
        path = path.expanduser()
        is_dir, is_file, exists = path.is_dir(), path.is_file(), os.path.lexists(path)
    except (OSError, ValueError, RuntimeError) as exc:  # too long, NUL byte, "~user" unknown
        raise IngestError(f"cannot ingest {str(path)[:200]!r}: {exc}") from exc
    if is_dir:
        yield from _read_folder(path, metadata, unread)
    elif is_file:
        yield _read_file(path, metadata)
    elif not exists:
        raise _missing(path)
    elif path.is_symlink():
        try:
            path.resolve(strict=True)
        except (OSError, RuntimeError) as exc:
            raise IngestError(f"cannot ingest {path}: a broken symlink or loop ({exc})") from exc
        raise IngestError(f"cannot ingest {path}: not a regular file or folder")
    else:
        raise IngestError(f"cannot ingest {path}: not a regular file (a FIFO, socket or device)")


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:16]


def _from_document(doc: Document, metadata: Mapping[str, Any]) -> SourceDoc:
    meta = {**metadata, **(doc.metadata or {})}
    content = _SURROGATE.sub("\ufffd", doc.page_content or "")
    source = str(meta.get("source") or f"document:{_digest(content)}")
    return SourceDoc(source, "markdown", content, meta, title=meta.get("title"))


def _from_text(text: str, metadata: Mapping[str, Any]) -> SourceDoc:
    text = _SURROGATE.sub("\ufffd", text)  # unpaired surrogates: no encoder takes them
    source = str(metadata.get("source") or f"text:{_digest(text)}")
    return SourceDoc(source, "markdown", text, dict(metadata))


@dataclass
class Inputs:
    """What ``add_documents`` was handed: its documents, and the folders among the items as
    source prefixes (``/abs/folder/``), the parts of the collection an ingest mirrors."""

    docs: list[SourceDoc]
    folders: list[str]
    #: Files of those folders that are there but were not read (a PDF without pypdf).
    unread: list[str] = field(default_factory=list)


def _as_path(item: str | os.PathLike[str]) -> Path | None:
    """The path ``item`` names, or None for a string that is text (not a path)."""
    if isinstance(item, str):
        return Path(item.strip()) if _looks_like_path(item) or _exists(item) else None
    return Path(item)


def _item_list(items: Any) -> Iterable[Any]:
    """``items`` as an iterable of items (one item becomes a list of one), or an error
    for what cannot hold documents."""
    if isinstance(items, str | os.PathLike | Document):
        return [items]
    if isinstance(items, bytes | bytearray | Mapping):  # iterable, but not of documents
        raise IngestError(
            f"add_documents takes paths, Documents or strings (or a list of them), not "
            f"{type(items).__name__}; decode bytes, pass a dict's values"
        )
    if not isinstance(items, Iterable):
        raise IngestError(
            f"add_documents takes paths, Documents or strings (or a list of them), "
            f"not {type(items).__name__}"
        )
    return items


def _read_item(
    item: Any, metadata: Mapping[str, Any], unread: list[str]
) -> tuple[list[SourceDoc], str | None]:
    """The source documents of one item, and its source prefix when it is a folder (the
    files in it that are there but cannot be read now go to ``unread``)."""
    if isinstance(item, Document):
        return [_from_document(item, metadata)], None
    if not isinstance(item, str | os.PathLike):
        raise IngestError(
            f"cannot ingest an item of type {type(item).__name__}; pass a path, a "
            "langchain Document or a string"
        )
    path = _as_path(item)
    if path is None:
        if not str(item).strip():
            raise IngestError("cannot ingest an empty string")
        return [_from_text(str(item), metadata)], None
    docs = list(_from_path(path, metadata, unread))
    if path.expanduser().is_dir():  # _from_path has checked that it can be read
        return docs, source_key(path).rstrip("/") + "/"
    return docs, None


def read_inputs(items: Any, metadata: Mapping[str, Any] | None = None) -> Inputs:
    """Source documents for ``items`` (one item or an iterable of them), in the order
    given, and the folders among them."""
    metadata = dict(metadata or {})
    docs: list[SourceDoc] = []
    folders: list[str] = []
    unread: list[str] = []
    seen: dict[str, int] = {}
    for item in _item_list(items):
        new, folder = _read_item(item, metadata, unread)
        if folder is not None:
            folders.append(folder)
        for doc in new:
            if doc.source in seen:  # the same source twice in one call: the last one wins
                docs[seen[doc.source]] = doc
            else:
                seen[doc.source] = len(docs)
                docs.append(doc)
    return Inputs(docs, folders, unread)


def expand_inputs(items: Any, metadata: Mapping[str, Any] | None = None) -> list[SourceDoc]:
    """Source documents for ``items`` (one item or an iterable of them), in the order given."""
    return read_inputs(items, metadata).docs

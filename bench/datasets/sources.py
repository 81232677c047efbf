"""Fetch pinned Debian and PyPI packages into the cache and read files out of them.

Debian packages are fetched with ``apt-get download NAME=VERSION`` and PyPI source
distributions with ``pip download --no-deps --no-binary :all: NAME==VERSION``: the
ordinary clients of both registries. Nothing else touches the network.
"""

from __future__ import annotations

import fnmatch
import gzip
import io
import logging
import os
import re
import subprocess
import sys
import tarfile
import zipfile
from collections.abc import Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

log = logging.getLogger("bench.datasets")

BENCH_DIR = Path(__file__).resolve().parents[1]
CACHE_DIR = Path(os.environ.get("BENCH_CACHE_DIR", BENCH_DIR / ".cache"))


def cache_dir() -> Path:
    """The cache root, created on first use with a ``.gitignore`` that ignores it all."""
    CACHE_DIR.mkdir(parents=True, exist_ok=True)
    ignore = CACHE_DIR / ".gitignore"
    if not ignore.exists():
        ignore.write_text("# build cache of bench/datasets: never commit\n*\n")
    return CACHE_DIR


@dataclass(frozen=True)
class Deb:
    """A pinned Debian package (bookworm) and the globs of the files we read from it.

    Globs are matched against the path inside the package (``usr/share/man/...``);
    ``exclude`` globs are removed afterwards.
    """

    name: str
    version: str
    globs: tuple[str, ...]
    exclude: tuple[str, ...] = ()

    @property
    def label(self) -> str:
        return f"{self.name}={self.version}"


@dataclass(frozen=True)
class Sdist:
    """A pinned PyPI source distribution and the globs of the files we read from it.

    Globs are matched against the path inside the archive with the top folder
    (``name-version/``) removed; ``exclude`` globs are removed afterwards.
    """

    name: str
    version: str
    globs: tuple[str, ...]
    exclude: tuple[str, ...] = ()

    @property
    def label(self) -> str:
        return f"{self.name}=={self.version}"


# --------------------------------------------------------------------------- Debian


def _deb_dir() -> Path:
    d = cache_dir() / "downloads" / "deb"
    d.mkdir(parents=True, exist_ok=True)
    return d


def _deb_file(pkg: Deb) -> Path | None:
    quoted = pkg.version.replace(":", "%3a")
    hits = sorted(_deb_dir().glob(f"{pkg.name}_{quoted}_*.deb"))
    return hits[0] if hits else None


def _apt_download(specs: list[str]) -> subprocess.CompletedProcess:
    return subprocess.run(
        ["apt-get", "download", *specs],
        cwd=_deb_dir(),
        capture_output=True,
        text=True,
    )


def fetch_debs(pkgs: Iterable[Deb]) -> dict[str, Path]:
    """Download every pinned package that is not cached yet; return label -> .deb path."""
    pkgs = list({p.label: p for p in pkgs}.values())
    missing = [p for p in pkgs if _deb_file(p) is None]
    if missing:
        log.info("apt-get download %s", " ".join(p.label for p in missing))
        res = _apt_download([p.label for p in missing])
        if res.returncode != 0 and os.geteuid() == 0:
            # Fresh machines have empty apt lists: update once and retry.
            log.info("apt-get download failed (%s); running apt-get update", res.stderr.strip())
            subprocess.run(["apt-get", "update", "-qq"], capture_output=True, check=False)
            still = [p for p in missing if _deb_file(p) is None]
            res = _apt_download([p.label for p in still])
        if res.returncode != 0:
            # One request fails as a whole: retry package by package to name the culprit.
            for p in missing:
                if _deb_file(p) is None:
                    r = _apt_download([p.label])
                    if r.returncode != 0:
                        raise RuntimeError(
                            f"cannot download Debian package {p.label}: {r.stderr.strip()}\n"
                            "The pinned version may have left the archive; pin the version "
                            "that `apt-cache policy` shows in bench/datasets/catalog.py "
                            "(the dataset then changes: rebuild and update README.md)."
                        )
    out = {}
    for p in pkgs:
        f = _deb_file(p)
        if f is None:
            raise RuntimeError(f"apt-get download gave no file for {p.label}")
        out[p.label] = f
    return out


def _ar_members(data: bytes) -> Iterator[tuple[str, bytes]]:
    if not data.startswith(b"!<arch>\n"):
        raise ValueError("not an ar archive")
    pos = 8
    while pos + 60 <= len(data):
        header = data[pos : pos + 60]
        name = header[:16].decode().strip().rstrip("/")
        size = int(header[48:58].decode().strip())
        pos += 60
        yield name, data[pos : pos + size]
        pos += size + (size & 1)


def _open_tar(name: str, payload: bytes) -> tarfile.TarFile:
    if name.endswith(".zst"):
        import zstandard

        payload = zstandard.ZstdDecompressor().decompressobj().decompress(payload)
        return tarfile.open(fileobj=io.BytesIO(payload), mode="r:")
    return tarfile.open(fileobj=io.BytesIO(payload), mode="r:*")


def _match(path: str, globs: Iterable[str]) -> bool:
    return any(fnmatch.fnmatchcase(path, g) for g in globs)


def read_deb(pkg: Deb, deb_path: Path) -> list[tuple[str, bytes]]:
    """Regular files of the package's data archive that match its globs, sorted by path.

    Symbolic links are skipped (for man pages they are aliases of another page).
    Gzip-compressed files are returned decompressed; the path keeps its ``.gz``.
    """
    data = [(n, b) for n, b in _ar_members(deb_path.read_bytes()) if n.startswith("data.tar")]
    if not data:
        raise ValueError(f"{deb_path} has no data.tar member")
    out = []
    with _open_tar(*data[0]) as tar:
        for m in tar.getmembers():
            if not m.isfile():
                continue
            path = m.name.removeprefix("./")
            if not _match(path, pkg.globs) or _match(path, pkg.exclude):
                continue
            raw = tar.extractfile(m).read()
            if path.endswith(".gz"):
                raw = gzip.decompress(raw)
            out.append((path, raw))
    out.sort()
    return out


# --------------------------------------------------------------------------- PyPI


def _pypi_dir() -> Path:
    d = cache_dir() / "downloads" / "pypi"
    d.mkdir(parents=True, exist_ok=True)
    return d


def _norm(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _sdist_file(pkg: Sdist) -> Path | None:
    want = f"{_norm(pkg.name)}-{pkg.version}"
    for f in sorted(_pypi_dir().iterdir()):
        stem = f.name
        for ext in (".tar.gz", ".zip", ".tar.bz2"):
            if stem.endswith(ext):
                stem = stem[: -len(ext)]
                break
        else:
            continue
        if _norm(stem.rsplit("-", 1)[0]) + "-" + stem.rsplit("-", 1)[-1] == want:
            return f
    return None


def _pip_download(pkg: Sdist) -> None:
    cmd = [
        sys.executable,
        "-m",
        "pip",
        "download",
        "--quiet",
        "--no-deps",
        "--no-binary",
        ":all:",
        "--dest",
        str(_pypi_dir()),
        f"{pkg.name}=={pkg.version}",
    ]
    res = subprocess.run(cmd, capture_output=True, text=True)
    if res.returncode != 0 or _sdist_file(pkg) is None:
        raise RuntimeError(f"cannot download sdist {pkg.label}: {res.stderr.strip()[-2000:]}")


def fetch_sdists(pkgs: Iterable[Sdist], workers: int = 4) -> dict[str, Path]:
    """Download every pinned sdist that is not cached yet; return label -> archive path."""
    pkgs = list({p.label: p for p in pkgs}.values())  # one download per name==version
    missing = [p for p in pkgs if _sdist_file(p) is None]
    if missing:
        log.info("pip download %s", " ".join(p.label for p in missing))
        with ThreadPoolExecutor(workers) as ex:
            list(ex.map(_pip_download, missing))
    return {p.label: _sdist_file(p) for p in pkgs}


def read_sdist(pkg: Sdist, archive: Path) -> list[tuple[str, bytes]]:
    """Files of the sdist matching its globs: ``(path inside the archive, bytes)``, sorted."""
    out = []

    def keep(full: str) -> bool:
        inner = full.split("/", 1)[1] if "/" in full else full
        return _match(inner, pkg.globs) and not _match(inner, pkg.exclude)

    if archive.name.endswith(".zip"):
        with zipfile.ZipFile(archive) as z:
            for info in z.infolist():
                if not info.is_dir() and keep(info.filename):
                    out.append((info.filename, z.read(info)))
    else:
        with tarfile.open(archive, "r:*") as tar:
            for m in tar.getmembers():
                if m.isfile() and keep(m.name):
                    out.append((m.name, tar.extractfile(m).read()))
    out.sort()
    return out

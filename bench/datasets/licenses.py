"""Print the licenses declared by every source package (from the cached downloads).

    python -m bench.datasets.licenses

Debian: the distinct ``License:`` short names of ``usr/share/doc/<pkg>/copyright``
(machine-readable format) or its first lines when it is free-form. PyPI: the sdist's
``PKG-INFO`` ``License-Expression``/``License`` field and its license classifiers.
"""

from __future__ import annotations

import re
import tarfile
import zipfile

from . import catalog
from .sources import Deb, Sdist, fetch_debs, fetch_sdists, read_deb


def deb_license(deb: Deb, path) -> str:
    probe = Deb(deb.name, deb.version, (f"usr/share/doc/{deb.name}/copyright",))
    files = read_deb(probe, path)
    if not files:  # a package whose doc folder is a symlink to another package's
        return "(see the copyright file of its source package)"
    text = files[0][1].decode("utf-8", errors="replace")
    names = re.findall(r"^License:\s*(.+)$", text, re.M)
    if names:
        return ", ".join(sorted(dict.fromkeys(n.strip() for n in names)))
    flat = " ".join(text.split())
    gfdl = re.search(r"GNU Free Documentation License,? Version ([\d.]+)( or any later)?", flat)
    if gfdl:  # FOLDOC's free-form file
        return f"GFDL-{gfdl.group(1)}{'+' if gfdl.group(2) else ''} (free-form copyright file)"
    first = " ".join(text.split()[:40])
    return f"free-form copyright file: {first} ..."


def sdist_license(sd: Sdist, path) -> str:
    if path.name.endswith(".zip"):
        with zipfile.ZipFile(path) as z:
            name = next(n for n in z.namelist() if n.count("/") == 1 and n.endswith("PKG-INFO"))
            info = z.read(name).decode("utf-8", errors="replace")
    else:
        with tarfile.open(path) as t:
            m = next(
                m for m in t.getmembers() if m.name.count("/") == 1 and m.name.endswith("PKG-INFO")
            )
            info = t.extractfile(m).read().decode("utf-8", errors="replace")
    head = info.split("\n\n", 1)[0]
    expr = re.findall(r"^License-Expression:\s*(.+)$", head, re.M)
    lic = re.findall(r"^License:\s*(.+)$", head, re.M)
    classifiers = re.findall(r"^Classifier:\s*License :: (.+)$", head, re.M)
    parts = expr or [v for v in lic if len(v) < 80] or classifiers
    return "; ".join(dict.fromkeys(p.strip() for p in parts)) or "(not declared in PKG-INFO)"


def main() -> None:
    debs = (
        catalog.MANPAGES_DEBS + catalog.WORDLIST_DEBS + catalog.GLOSSARY_DEBS + catalog.SCALE_DEBS
    )
    debs += catalog.SCALE_DEB_DOCS
    debs = tuple({d.label: d for d in debs}.values())
    sdists = catalog.PYDOCS_SDISTS + catalog.SCALE_SDISTS + catalog.SCALE_DOCSTRING_SDISTS
    sdists = tuple({s.label: s for s in sdists}.values())
    deb_paths = fetch_debs(debs)
    sd_paths = fetch_sdists(sdists)
    print("| package | version | license |\n|---|---|---|")
    for d in debs:
        print(f"| {d.name} (Debian) | {d.version} | {deb_license(d, deb_paths[d.label])} |")
    for s in sdists:
        print(f"| {s.name} (PyPI) | {s.version} | {sdist_license(s, sd_paths[s.label])} |")


if __name__ == "__main__":
    main()

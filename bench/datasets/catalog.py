"""Pinned sources of every dataset: package, exact version, and the files read from it.

Changing anything here changes the datasets: rebuild, re-run the baselines and update
README.md. Debian versions are from Debian 12 "bookworm" (main); PyPI versions are exact
sdist releases, which PyPI never replaces.
"""

from __future__ import annotations

from .sources import Deb, Sdist

MAN = ("usr/share/man/man*/*",)

# ---------------------------------------------------------------- manpages / aliases
MANPAGES_DEBS = (
    Deb("manpages", "6.03-2", MAN),
    Deb("manpages-dev", "6.03-2", MAN),
)

# ---------------------------------------------------------------- pydocs
DOC_EXCLUDE = (
    "*changes*",
    "*CHANGES*",
    "*changelog*",
    "*CHANGELOG*",
    "*history*",
    "*HISTORY*",
    "*/announce/*",
    "*whats_new*",
    "*whatsnew*",
    "*/releases/*",
    "*release-notes*",
    "*release_notes*",
    "*/news/*",
    "*NEWS*",
    "*license*",
    "*LICENSE*",
    "*authors*",
    "*AUTHORS*",
    "*contributors*",
    "*code_of_conduct*",
    "*code-of-conduct*",
    "*sponsor*",
    "*tidelift*",
    "*backers*",
    "*/_build/*",
    "*/_static/*",
    "*/_templates/*",
    "*requirements*.txt",
    "*/internals/reference/*",
)
RST_MD = ("docs/*.rst", "docs/*.md", "doc/*.rst", "doc/*.md")

PYDOCS_SDISTS = (
    Sdist("flask", "3.1.3", RST_MD, DOC_EXCLUDE),
    Sdist("click", "8.5.1", RST_MD, DOC_EXCLUDE),
    Sdist("jinja2", "3.1.6", RST_MD, DOC_EXCLUDE),
    Sdist("werkzeug", "3.1.9", RST_MD, DOC_EXCLUDE),
    Sdist("celery", "5.7.0", RST_MD, DOC_EXCLUDE),
    Sdist("scrapy", "2.19.0", RST_MD, DOC_EXCLUDE),
    Sdist("sphinx", "9.0.4", RST_MD, DOC_EXCLUDE),
    Sdist("pytest", "9.2.0", RST_MD, DOC_EXCLUDE),
    Sdist("pip", "26.3", ("docs/html/*.rst", "docs/html/*.md"), DOC_EXCLUDE),
    Sdist("attrs", "26.1.0", RST_MD, DOC_EXCLUDE),
    Sdist("black", "26.10.1", RST_MD, DOC_EXCLUDE),
    Sdist("aiohttp", "3.14.5", RST_MD, DOC_EXCLUDE),
)

# ---------------------------------------------------------------- aliases: spelling lists
WORDLIST_DEBS = (
    Deb("wamerican", "2020.12.07-2", ("usr/share/dict/american-english",)),
    Deb("wbritish", "2020.12.07-2", ("usr/share/dict/british-english",)),
)

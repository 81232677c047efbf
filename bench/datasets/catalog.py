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
    "*/news.*",
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

# ---------------------------------------------------------------- glossary (dictd databases)
# FOLDOC and the Jargon File are the corpus; V.E.R.A. only supplies acronym -> expansion facts.
GLOSSARY_DEBS = (
    Deb("dict-foldoc", "20230119-1", ("usr/share/dictd/foldoc.*",)),
    Deb("dict-jargon", "4.4.7-3.1", ("usr/share/dictd/jargon.*",)),
    Deb("dict-vera", "1:1.24-1", ("usr/share/dictd/vera.*",)),
)

# ---------------------------------------------------------------- scale (latency corpus)
MAN_ALL = ("usr/share/man/man*/*",)
SCALE_DEBS = (
    *MANPAGES_DEBS,
    Deb(
        "perl-doc",
        "5.36.0-7+deb12u4",
        ("usr/share/man/man1/*",),
        ("*/perltoc.1*", "*/perluniprops.1*", "*/perlunicook.1*"),
    ),
    Deb("libssl-doc", "3.0.22-1~deb12u2", MAN_ALL),
    Deb("git-man", "1:2.39.5-0+deb12u3", MAN_ALL),
    Deb("libx11-doc", "2:1.8.4-2+deb12u2", MAN_ALL),
    Deb("libcurl4-doc", "7.88.1-10+deb12u15", MAN_ALL),
    Deb("zsh-common", "5.9-4", MAN_ALL),
    Deb("systemd", "252.39-1~deb12u2", MAN_ALL),
    Deb("util-linux", "2.38.1-5+deb12u3", MAN_ALL),
    Deb("coreutils", "9.1-1", MAN_ALL),
    Deb("bash", "5.2.15-2+b13", MAN_ALL),
    Deb("openssh-client", "1:9.2p1-2+deb12u10", MAN_ALL),
    Deb("iproute2", "6.1.0-3", MAN_ALL),
    Deb("ffmpeg", "7:5.1.9-0+deb12u1", MAN_ALL),
    Deb("dpkg", "1.21.23", MAN_ALL),
    Deb("apt", "2.6.2", MAN_ALL),
    Deb("gpg", "2.2.40-1.1+deb12u2", MAN_ALL),
    Deb("curl", "7.88.1-10+deb12u15", MAN_ALL),
    Deb("rsync", "3.5.0+ds1-0+deb12u1", MAN_ALL),
    Deb("tar", "1.34+dfsg-1.2+deb12u1", MAN_ALL),
    Deb("findutils", "4.9.0-4", MAN_ALL),
    Deb("grep", "3.8-5", MAN_ALL),
    Deb("sed", "4.9-1+deb12u1", MAN_ALL),
    Deb("gawk", "1:5.2.1-2", MAN_ALL),
    Deb("lvm2", "2.03.16-2", MAN_ALL),
    Deb("make", "4.3-4.1", MAN_ALL),
    Deb("groff-base", "1.22.4-10", MAN_ALL),
    Deb("tmux", "3.3a-3", MAN_ALL),
    Deb("less", "590-2.1~deb12u2", MAN_ALL),
    Deb("procps", "2:4.0.2-3", MAN_ALL),
    Deb("openssl", "3.0.22-1~deb12u2", MAN_ALL),
    Deb("tcl8.6-doc", "8.6.13+dfsg-2", MAN_ALL),
    Deb("tk8.6-doc", "8.6.13-2", MAN_ALL),
    Deb("ncurses-doc", "6.4-4", MAN_ALL),
    Deb("ncurses-bin", "6.4-4", MAN_ALL),
    Deb("gnutls-doc", "3.7.9-2+deb12u7", MAN_ALL),
    Deb("libxt-dev", "1:1.2.1-1.1", MAN_ALL),
    Deb("postfix", "3.7.11-0+deb12u1", MAN_ALL),
    Deb("nmap", "7.93+dfsg1-1", MAN_ALL),
    Deb("mutt", "2.2.12-0.1~deb12u2", MAN_ALL),
    Deb("libpcre2-dev", "10.42-1+deb12u2", MAN_ALL),
    Deb("sudo", "1.9.13p3-1+deb12u4", MAN_ALL),
    Deb("nftables", "1.0.6-2+deb12u2", MAN_ALL),
    Deb("iptables", "1.8.9-2", MAN_ALL),
    Deb("strace", "6.1-0.1", MAN_ALL),
)
# non-man text of Debian packages: Perl's core-module POD, Vim's help, PostgreSQL's manual
SCALE_DEB_DOCS = (
    Deb("perl-modules-5.36", "5.36.0-7+deb12u4", ("usr/share/perl/*.pm", "usr/share/perl/*.pod")),
    Deb("vim-runtime", "2:9.0.1378-2+deb12u2", ("usr/share/vim/vim90/doc/*.txt",)),
    Deb("postgresql-doc-15", "15.20-0+deb12u1", ("usr/share/doc/postgresql-doc-15/html/*.html",)),
    Deb(
        "nodejs-doc",
        "18.20.4+dfsg-1~deb12u3",
        ("usr/share/doc/nodejs/api/*.md.gz",),
        ("*/all.md.gz", "*/index.md.gz"),
    ),
)
# (translated pages live under usr/share/man/<lang>/man*/ and are not matched)

ALL_DOCS = ("docs/*.rst", "docs/*.md", "docs/*.txt", "doc/*.rst", "doc/*.md", "doc/*.txt")
SCALE_DOC_EXCLUDE = (
    "*/_build/*",
    "*/_static/*",
    "*/_templates/*",
    "*requirements*.txt",
    "*robots.txt",
    "*/spelling_wordlist.txt",
    "*/man/*",
)
SCALE_SDISTS = (
    *(Sdist(s.name, s.version, ALL_DOCS, SCALE_DOC_EXCLUDE) for s in PYDOCS_SDISTS),
    Sdist("django", "5.2.8", ALL_DOCS, SCALE_DOC_EXCLUDE),
    Sdist("sqlalchemy", "2.1.9", ("doc/build/*.rst",), SCALE_DOC_EXCLUDE),
    Sdist("sympy", "1.14.0", ("doc/src/*.rst", "doc/src/*.md"), SCALE_DOC_EXCLUDE),
    Sdist("networkx", "3.6.1", ALL_DOCS, SCALE_DOC_EXCLUDE),
    Sdist("twisted", "26.10.0", ALL_DOCS, SCALE_DOC_EXCLUDE),
    Sdist("docutils", "0.23", ALL_DOCS, SCALE_DOC_EXCLUDE),
    Sdist("ipython", "9.18.1", ALL_DOCS, SCALE_DOC_EXCLUDE),
    Sdist("pygments", "2.21.0", ALL_DOCS, SCALE_DOC_EXCLUDE),
    Sdist("setuptools", "84.2.1", ALL_DOCS, SCALE_DOC_EXCLUDE),
    Sdist("kombu", "5.7.0", ALL_DOCS, SCALE_DOC_EXCLUDE),
    Sdist("alembic", "1.20.1", ALL_DOCS, SCALE_DOC_EXCLUDE),
    Sdist("pyramid", "2.1", ALL_DOCS, SCALE_DOC_EXCLUDE),
    Sdist("trio", "0.35.0", ALL_DOCS, SCALE_DOC_EXCLUDE),
    Sdist("tornado", "6.6.1", ALL_DOCS, SCALE_DOC_EXCLUDE),
    Sdist("mako", "1.4.3", ALL_DOCS, SCALE_DOC_EXCLUDE),
)
# API reference text: docstrings of the Python sources of these sdists
SCALE_DOCSTRING_SDISTS = (
    Sdist("django", "5.2.8", ("django/*.py",), ("*/tests/*", "*/migrations/*")),
    Sdist("sqlalchemy", "2.1.9", ("lib/sqlalchemy/*.py",), ("*/testing/*",)),
    Sdist("sympy", "1.14.0", ("sympy/*.py",), ("*/tests/*", "*/benchmarks/*")),
    Sdist("networkx", "3.6.1", ("networkx/*.py",), ("*/tests/*",)),
    Sdist("twisted", "26.10.0", ("src/twisted/*.py",), ("*/test/*", "*/newsfragments/*")),
    Sdist("celery", "5.7.0", ("celery/*.py",), ("*/tests/*",)),
    Sdist("scrapy", "2.19.0", ("scrapy/*.py",), ("*/tests/*",)),
    Sdist("sphinx", "9.0.4", ("sphinx/*.py",), ("*/tests/*", "*/testing/*")),
    Sdist("docutils", "0.23", ("docutils/*.py",), ("*/test/*",)),
    Sdist("ipython", "9.18.1", ("IPython/*.py",), ("*/tests/*", "*/testing/*")),
    Sdist("pip", "26.3", ("src/pip/*.py",), ("*/tests/*",)),
    Sdist("setuptools", "84.2.1", ("setuptools/*.py", "pkg_resources/*.py"), ("*/tests/*",)),
    Sdist("pytest", "9.2.0", ("src/_pytest/*.py", "src/pytest/*.py"), ()),
    Sdist("aiohttp", "3.14.5", ("aiohttp/*.py",), ()),
    Sdist("kombu", "5.7.0", ("kombu/*.py",), ("*/tests/*",)),
    Sdist("alembic", "1.20.1", ("alembic/*.py",), ("*/testing/*", "*/templates/*")),
    Sdist("pyramid", "2.1", ("src/pyramid/*.py",), ("*/tests/*",)),
    Sdist("trio", "0.35.0", ("src/trio/*.py",), ("*/_tests/*", "*/tests/*")),
    Sdist("tornado", "6.6.1", ("tornado/*.py",), ("*/test/*",)),
    Sdist("mako", "1.4.3", ("mako/*.py",), ("*/testing/*",)),
)

"""Pieces of the persistence / conversation tests: a tiny corpus and schema URLs.

The ``pg_schema_url``, ``saver`` and ``asaver`` fixtures built on them live in
``tests/conftest.py``.
"""

from __future__ import annotations

from urllib.parse import quote

__all__ = ["SMALL_DOCS", "schema_url"]

# A tiny corpus, quick to embed in every test.
SMALL_DOCS = [
    "# Snapshots\nA snapshot is a point-in-time copy of the Lanternfish database. Snapshots "
    "are taken every six hours and kept for fourteen days.",
    "# Restoring\nTo restore a snapshot, stop the ingest workers, run `lf restore <id>` and "
    "start the workers again. A restore takes about ten minutes per terabyte.",
    "# Quotas\nEach tenant may keep at most forty snapshots. Older snapshots are pruned "
    "first when the quota is reached.",
    "# Alerts\nThe on-call engineer is paged when replication lag exceeds thirty seconds "
    "for more than five minutes.",
]


def schema_url(url: str, schema: str) -> str:
    """``url`` with ``schema`` first on the search path (libpq ``options``)."""
    sep = "&" if "?" in url else "?"
    return f"{url}{sep}options={quote(f'-csearch_path={schema}')}"

"""The embedded index: the Qdrant engine in-process through qdrant-edge.

One on-disk shard per collection. A shard's write-ahead log can be held by one
``EdgeShard`` at a time, so shards are shared per path inside a process (reference
counted) and a second process gets a clear :class:`IndexLockedError`.

Dense search is exact (brute force): at the sizes an embedded index serves it is fast and
never misses, while building an HNSW graph takes minutes per 100k chunks on a small
machine. New shards say so in their config (an HNSW config with ``m=0``: no graph), which
also makes :meth:`EdgeIndex.optimize` cheap: after a bulk ingest it turns the big
appendable segment into an immutable one, whose BM25 index loads from disk instead of
being rebuilt in memory at every start (cold start at 100k chunks: seconds -> well under
one).
"""

from __future__ import annotations

import errno
import json
import re
import shutil
import tempfile
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import qdrant_edge as qe

from retrievalagent.errors import IndexLockedError, VectorIndexError
from retrievalagent.index._base import (
    DENSE,
    SPARSE,
    STAGED,
    STAGED_MARK,
    Conditions,
    DenseBatch,
    Embedding,
    Payloads,
)
from retrievalagent.index._dialect import Dialect, hit, records
from retrievalagent.index._types import Condition, Hit, Sparse

__all__ = ["EDGE_CONFIG", "EdgeIndex", "check_unlocked"]

#: the file the embedded engine writes when it creates an index: its presence means one exists
EDGE_CONFIG = "edge_config.json"

_registry_lock = threading.Lock()
_KEYWORD_FIELDS = ("source", "doc_hash")


class _Shared:
    """One open shard, the number of ``EdgeIndex`` objects using it, and whether it holds
    staged chunks (only this process can write the shard, so the flag is exact)."""

    def __init__(self, shard: qe.EdgeShard) -> None:
        self.shard = shard
        self.refs = 1
        self.staged = False


_open: dict[str, _Shared] = {}


def _acquire(path: Path) -> _Shared | None:
    key = str(path.resolve())
    with _registry_lock:
        shared = _open.get(key)
        if shared is not None:
            shared.refs += 1
        return shared


def _release(path: Path) -> None:
    key = str(path.resolve())
    with _registry_lock:
        shared = _open[key]
        shared.refs -= 1
        if shared.refs:
            return
        del _open[key]
    shared.shard.flush()
    shared.shard.close()


def check_unlocked(path: Path) -> None:
    """``IndexLockedError`` when another process has the index at ``path`` open (a server
    answering from it): what replaces the index must not pull it from under that process."""
    if not (path / EDGE_CONFIG).is_file():
        return
    if _acquire(path) is not None:  # an agent of this process has it open
        _release(path)
        raise IndexLockedError(f"the index at {path} is open in this process; close it first")
    try:
        with _engine_errors(path):
            shard = qe.EdgeShard.load(str(path))
    except VectorIndexError as exc:
        if _held_elsewhere(exc, path):
            raise IndexLockedError(
                f"the index at {path} is open in another process; close that process first"
            ) from None
        return  # damaged, not held: replacing it is what the caller is for
    shard.close()


def _held_elsewhere(exc: VectorIndexError, path: Path) -> bool:
    """Whether opening the index at ``path`` failed on another process's lock (not on a
    permission or a missing file, whose messages may also say "lock")."""
    cause = exc.__cause__ or exc
    text = str(cause)
    return ("WouldBlock" in text or "lock" in text.lower()) and _access_errno(cause, path) is None


_DIALECT = Dialect(
    qe.Filter,
    qe.FieldCondition,
    qe.MatchValue,
    qe.MatchAny,
    qe.RangeFloat,
    qe.Point,
    qe.SparseVector,
)


def _count(shard: qe.EdgeShard, flt: qe.Filter | None) -> int:
    return int(shard.count(qe.CountRequest(filter=flt, exact=True)))


#: OS errors that say the index cannot be reached where it is, not that it is damaged.
_ACCESS_ERRORS = {
    errno.EROFS: "the file system is read-only",
    errno.EACCES: "permission denied",
    errno.EPERM: "operation not permitted",
    errno.ENOTDIR: "a part of the path is a file, not a folder",
    errno.ENOENT: "a part of the path does not exist",
}
_OS_ERROR = re.compile(r"\(os error (\d+)\)")


def _access_errno(exc: BaseException, path: Path) -> int | None:
    """The errno of ``exc`` (an ``OSError`` or an engine error quoting "(os error N)") when
    it is a permission, read-only, not-a-folder or missing-path error, else ``None``. A
    file missing inside an index folder that is there is damage, not a missing path."""
    codes = [exc.errno] if isinstance(exc, OSError) else []
    codes += [int(code) for code in _OS_ERROR.findall(str(exc))]
    for code in codes:
        if code == errno.ENOENT and path.is_dir():
            continue
        if code in _ACCESS_ERRORS:
            return code
    return None


def _access_error(path: Path, code: int, detail: str) -> VectorIndexError:
    """The one-line error for an index that the OS will not let us open (``code``, an
    errno of :data:`_ACCESS_ERRORS`): it names the cause, the path and the setting, and
    says the index was left as it is (never "delete it": it is likely healthy)."""
    data_dir = path.parent.parent if path.name == "index" else path.parent
    return VectorIndexError(
        f"cannot open the index at {path}: {_ACCESS_ERRORS[code]} ({detail}); the embedded "
        f"index needs a folder it can read and write, even to answer: check the data dir "
        f"{data_dir} (--data-dir / RAG_DATA_DIR); nothing in it was changed"
    )


@contextmanager
def _engine_errors(path: Path) -> Iterator[None]:
    """The engine's Rust panics (``BaseException``\\ s, ~200-line backtraces) as one line."""
    try:
        yield
    except VectorIndexError:
        raise
    except BaseException as exc:
        if isinstance(exc, KeyboardInterrupt | SystemExit | GeneratorExit):
            raise
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0][:300]
        code = _access_errno(exc, path)
        error = (
            _access_error(path, code, first)
            if code is not None
            else VectorIndexError(
                f"the index at {path} cannot be opened or read ({first}); it may be damaged: "
                f"rebuild it (retrievalagent ingest ... --rebuild) or delete the folder {path}"
            )
        )
        error.__cause__ = exc  # kept for --debug, not printed as a chained traceback
        error.__suppress_context__ = True
        raise error from None


class EdgeIndex:
    """A collection stored by the embedded Qdrant engine under ``path``.

    Args:
        path: The shard directory, or ``None`` for a throwaway index in a temporary
            directory that is deleted on :meth:`close`.
    """

    #: Reading ``fetch_k`` payloads per list costs more than the search itself.
    search_without_payloads = True

    def __init__(self, path: Path | None) -> None:
        self._temporary = path is None
        self.path = Path(tempfile.mkdtemp(prefix="retrievalagent-")) if path is None else path
        self.location = ":memory:" if self._temporary else str(self.path)
        self._shared: _Shared | None = None
        self._write_lock = threading.Lock()
        self._closed = False

    # -- lifecycle -------------------------------------------------------------------
    def ensure(self, dimension: int) -> None:
        if self._shared is not None:
            return
        shared = _acquire(self.path)
        if shared is not None:
            self._check_dimension(dimension)
            self._shared = shared
            return
        config = qe.EdgeConfig(
            vectors={DENSE: qe.EdgeVectorParams(size=dimension, distance=qe.Distance.Cosine)},
            sparse_vectors={SPARSE: qe.EdgeSparseVectorParams(modifier=qe.Modifier.Idf)},
            # No HNSW graph (m=0): exact search, and optimizing a segment never builds one.
            hnsw_config=qe.HnswIndexConfig(m=0, ef_construct=100, full_scan_threshold=10),
        )
        exists = (self.path / EDGE_CONFIG).is_file()
        if exists:
            self._check_dimension(dimension)
        try:
            with _engine_errors(self.path):
                shard = (
                    qe.EdgeShard.load(str(self.path))
                    if exists
                    else qe.EdgeShard.create(str(self.path), config)
                )
        except VectorIndexError as exc:
            if _held_elsewhere(exc, self.path):
                raise IndexLockedError(
                    f"the index at {self.path} is open in another process; close that process "
                    "or use a Qdrant server (backend_url='http://...') to share an index"
                ) from None
            raise
        with _engine_errors(self.path):
            self._prepare(shard)
        with _registry_lock:
            key = str(self.path.resolve())
            if key in _open:  # another thread won the race: use its shard
                shard.close()
                _open[key].refs += 1
            else:
                _open[key] = _Shared(shard)
                _open[key].staged = _count(shard, _DIALECT.staged()) > 0
        self._shared = _open[key]

    @staticmethod
    def _prepare(shard: qe.EdgeShard) -> None:
        """Create the payload indexes a shard lacks (older shards have no ``staged`` one)."""
        schema = shard.info().payload_schema
        # Memory-mapped, not rebuilt in RAM at every start: loading in-memory keyword
        # indexes of 100k sources took ~0.4 s; a lookup costs ~0.2 ms either way.
        params = qe.KeywordIndexParams(memory=qe.Memory.Cold)
        for name in _KEYWORD_FIELDS:
            if name not in schema:
                shard.update(qe.UpdateOperation.create_field_index(name, params))
        if STAGED not in schema:
            shard.update(qe.UpdateOperation.create_field_index(STAGED, params))

    def _exact(self) -> bool:
        """Whether this shard was created without an HNSW graph (so optimizing is cheap)."""
        try:
            config = json.loads((self.path / EDGE_CONFIG).read_text())
        except (OSError, ValueError):
            return False
        return (config.get("hnsw_config") or {}).get("m") == 0

    def _check_dimension(self, dimension: int) -> None:
        config_file = self.path / EDGE_CONFIG
        try:
            stored = json.loads(config_file.read_text())["vectors"][DENSE]["size"]
        except (OSError, KeyError, ValueError) as exc:
            code = _access_errno(exc, self.path)
            if code is not None:
                raise _access_error(self.path, code, str(exc)) from exc
            raise VectorIndexError(
                f"the index at {self.path} is not a retrievalagent index: {exc}"
            ) from exc
        if stored != dimension:
            raise VectorIndexError(
                f"the index at {self.path} holds {stored}-d vectors but the embeddings give "
                f"{dimension}-d ones; use the embeddings it was built with or a new collection"
            )

    @property
    def shard(self) -> qe.EdgeShard:
        if self._shared is None:
            raise VectorIndexError("the index is not open (closed, or ensure() was not called)")
        return self._shared.shard

    def _live(self, conditions: Conditions = ()) -> qe.Filter | None:
        """A filter for ``conditions`` that hides staged chunks (only while there are any:
        the exclusion costs ~6x on an exact dense search of 50k chunks)."""
        staged = self._shared is not None and self._shared.staged
        return _DIALECT.visible(conditions, any_staged=staged)

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        if self._shared is not None:
            self._shared = None
            _release(self.path)
        if self._temporary:
            shutil.rmtree(self.path, ignore_errors=True)

    def flush(self) -> None:
        self.shard.flush()

    def optimize(self) -> bool:
        """Compact segments after bulk writes (merge, vacuum, make immutable); then flush.

        A no-op on a shard made before exact search was the default (optimizing it would
        build an HNSW graph: minutes per 100k chunks). Returns whether anything changed.
        """
        if not self._exact():
            return False
        with self._write_lock:
            changed = bool(self.shard.optimize())
            self.shard.flush()
        return changed

    # -- writes ----------------------------------------------------------------------
    def upsert(
        self, ids: Sequence[str], dense: DenseBatch, sparse: Sequence[Sparse], payloads: Payloads
    ) -> None:
        points = _DIALECT.points(ids, dense, sparse, payloads)
        with self._write_lock:
            if any(p.get(STAGED) == STAGED_MARK for p in payloads) and self._shared is not None:
                self._shared.staged = True  # hide them from searches before they exist
            self.shard.update(qe.UpdateOperation.upsert_points(points))

    def commit(self, source: str, doc_hash: str) -> int:
        """Make the staged ``doc_hash`` chunks of ``source`` its visible version, removing
        every other version first (a crash in between leaves the source absent, never
        partial or doubled). Returns the number of chunks removed."""
        source_is = Condition("source", "match", source)
        others = _DIALECT.deleting([source_is], [Condition("doc_hash", "match", doc_hash)])
        with self._write_lock:
            removed = _count(self.shard, others)
            if removed:
                self.shard.update(qe.UpdateOperation.delete_points_by_filter(others))
            mine = _DIALECT.staged([source_is, Condition("doc_hash", "match", doc_hash)])
            if _count(self.shard, mine):
                self.shard.update(qe.UpdateOperation.delete_payload_by_filter(mine, [STAGED]))
            if self._shared is not None:
                self._shared.staged = _count(self.shard, _DIALECT.staged()) > 0
        return removed

    def delete(self, conditions: Conditions, keep_doc_hash: str | None = None) -> int:
        keep = [Condition("doc_hash", "match", keep_doc_hash)] if keep_doc_hash else []
        flt = _DIALECT.deleting(conditions, keep)
        with self._write_lock:
            n = _count(self.shard, flt)
            if n:
                self.shard.update(qe.UpdateOperation.delete_points_by_filter(flt))
            if self._shared is not None and self._shared.staged:
                self._shared.staged = _count(self.shard, _DIALECT.staged()) > 0
        return n

    # -- reads -----------------------------------------------------------------------
    # ``with_payload=False`` returns ids and scores only: reading fetch_k payloads from the
    # payload storage costs more than the search itself, and fusion needs none of them.
    def dense_search(
        self, vector: Embedding, limit: int, conditions: Conditions = (), with_payload: bool = True
    ) -> list[Hit]:
        request = qe.QueryRequest(
            limit=limit,
            query=qe.Query.Nearest(list(map(float, vector)), using=DENSE),
            filter=self._live(conditions),
            with_payload=with_payload,
        )
        return [hit(p) for p in self.shard.query(request)]

    def sparse_search(
        self, vector: Sparse, limit: int, conditions: Conditions = (), with_payload: bool = True
    ) -> list[Hit]:
        if not vector:
            return []
        request = qe.QueryRequest(
            limit=limit,
            query=qe.Query.Nearest(_DIALECT.sparse(vector), using=SPARSE),
            filter=self._live(conditions),
            with_payload=with_payload,
        )
        return [hit(p) for p in self.shard.query(request)]

    def retrieve(self, ids: Sequence[str]) -> dict[str, dict[str, Any]]:
        if not ids:
            return {}
        records = self.shard.retrieve(list(ids), with_payload=True, with_vector=False)
        return {str(r.id): dict(r.payload or {}) for r in records}

    def chunks(self, conditions: Conditions = ()) -> Iterator[tuple[str, dict[str, Any]]]:
        yield from records(
            lambda offset: self.shard.scroll(
                qe.ScrollRequest(
                    offset=offset, limit=1024, filter=self._live(conditions), with_payload=True
                )
            )
        )

    def absent_terms(self, term_ids: Sequence[int]) -> set[int]:
        if not term_ids:
            return set()
        requests = [
            qe.QueryRequest(
                limit=1,
                query=qe.Query.Nearest(qe.SparseVector([t], [1.0]), using=SPARSE),
                filter=self._live(),
                with_payload=False,
            )
            for t in term_ids
        ]
        results = self.shard.query_batch(qe.QueryBatchRequest(requests))
        return {t for t, res in zip(term_ids, results, strict=True) if not res}

    def source_hashes(self, source: str, staged: bool = False) -> dict[str, int]:
        source_is = [Condition("source", "match", source)]
        flt = _DIALECT.staged(source_is) if staged else self._live(source_is)
        if staged and not (self._shared is not None and self._shared.staged):
            return {}
        response = self.shard.facet(
            qe.FacetRequest(key="doc_hash", limit=64, exact=True, filter=flt)
        )
        return {str(h.value): int(h.count) for h in response.hits if h.count}

    def count(self, conditions: Conditions = ()) -> int:
        flt = self._live(conditions)
        if flt is None:
            return int(self.shard.info().points_count)
        return _count(self.shard, flt)

    def sources(self, staged: bool = False) -> dict[str, int]:
        if staged and not (self._shared is not None and self._shared.staged):
            return {}
        total = int(self.shard.info().points_count)
        if not total:
            return {}
        flt = _DIALECT.staged() if staged else self._live()
        response = self.shard.facet(
            qe.FacetRequest(key="source", limit=total, exact=True, filter=flt)
        )
        return {str(h.value): int(h.count) for h in response.hits if h.count}

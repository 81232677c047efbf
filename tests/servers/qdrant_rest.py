"""A Qdrant REST API shim for tests, backed by qdrant-client's local mode.

``QdrantClient(url=shim.url)`` (and ``AsyncQdrantClient``, and mem0's qdrant vector store
configured with ``host``/``port`` or ``url``) talks to it over real HTTP exactly as to a Qdrant
server: request bodies are parsed into ``qdrant_client.http.models`` and executed by a
``QdrantClient(location=":memory:")`` (or ``path=...``), results are wrapped as the server
does: ``{"result": ..., "status": "ok", "time": ...}``; errors as
``{"status": {"error": "..."}, "time": ...}`` with 404 / 409 / 400 codes.

Covered: ``GET /`` (version), health probes, collections (list / get / exists / create /
update / delete), aliases, payload indexes, points (upsert, retrieve, get one, delete,
set / overwrite / delete / clear payload, update / delete vectors, batch), scroll, count,
facet, ``points/query`` (prefetch, fusion, formulas: whatever local mode supports),
``points/query/batch``, ``points/query/groups`` and the legacy ``points/search``.

Local mode is brute force and slow for large sets; it is meant for small test collections.
"""

from __future__ import annotations

import importlib.metadata
import threading
import time
from collections.abc import Callable
from typing import Any

from pydantic import TypeAdapter, ValidationError
from pydantic_core import to_jsonable_python
from qdrant_client import QdrantClient
from qdrant_client.http import models as m
from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response
from starlette.routing import Route

from tests.servers._thread_server import ThreadedUvicorn

__all__ = ["QdrantRestShim", "ShimError", "compatible_server_version"]


def compatible_server_version() -> str:
    """A server version qdrant-client's compatibility check accepts without a warning.

    The client (``check_compatibility=True`` by default) fetches ``GET /`` and warns unless
    the major versions match and the minors differ by at most one, so advertise the
    installed client's own ``major.minor.0``.
    """
    try:
        major, minor, *_ = importlib.metadata.version("qdrant-client").split(".")
        return f"{int(major)}.{int(minor)}.0"
    except Exception:  # pragma: no cover - metadata missing
        return "1.15.0"


def _join_compatibility_checks(timeout: float = 5.0) -> None:
    """Wait for qdrant-client's version-check threads that are still in flight.

    ``QdrantClient(url=...)`` fetches ``GET /`` from a background thread; a client created
    just before the shim stops would otherwise warn "Failed to obtain server version".
    """
    for thread in threading.enumerate():
        target = getattr(thread, "_target", None)
        if (
            thread is not threading.current_thread()
            and getattr(target, "__name__", "") == "_check_compatibility"
            and getattr(target, "__module__", "").startswith("qdrant_client")
        ):
            thread.join(timeout)


class ShimError(Exception):
    def __init__(self, status: int, message: str):
        super().__init__(message)
        self.status = status
        self.message = message


def _point_id(raw: str) -> int | str:
    return int(raw) if raw.isdigit() else raw


def _selector(
    points: list[Any] | None, filter_: m.Filter | None
) -> m.PointIdsList | m.FilterSelector:
    if points is not None:
        return m.PointIdsList(points=points)
    if filter_ is not None:
        return m.FilterSelector(filter=filter_)
    raise ShimError(400, "Bad request: either `points` or `filter` is required")


def _index_info(schema: Any, points: int) -> m.PayloadIndexInfo:
    if isinstance(schema, m.PayloadSchemaType):
        return m.PayloadIndexInfo(data_type=schema, params=None, points=points)
    data_type = m.PayloadSchemaType(getattr(schema, "type", "keyword"))
    return m.PayloadIndexInfo(data_type=data_type, params=schema, points=points)


_POINT_INSERT = TypeAdapter(m.PointInsertOperations)
_POINTS_SELECTOR = TypeAdapter(m.PointsSelector)


class QdrantRestShim:
    """Serve the Qdrant REST API on ``host:port`` (``port=0``: a free port).

    ``location`` / ``path`` choose the backing local-mode storage (default in memory).
    ``version`` is what ``GET /`` reports (default: compatible with the installed client).
    """

    def __init__(
        self,
        port: int = 0,
        host: str = "127.0.0.1",
        *,
        location: str | None = ":memory:",
        path: str | None = None,
        version: str | None = None,
    ):
        self.location = None if path else location
        self.path = path
        self.version = version or compatible_server_version()
        self.client = self._new_client()
        self.requests: list[tuple[str, str]] = []  # (method, path), for assertions
        self._lock = threading.RLock()
        self._payload_indexes: dict[str, dict[str, Any]] = {}
        self._uvicorn = ThreadedUvicorn(self._build_app(), host, port, name="qdrant-shim")

    def _new_client(self) -> QdrantClient:
        if self.path:
            return QdrantClient(path=self.path, force_disable_check_same_thread=True)
        return QdrantClient(location=self.location, force_disable_check_same_thread=True)

    # -- lifecycle ---------------------------------------------------------------------

    def start(self) -> QdrantRestShim:
        self._uvicorn.start()
        return self

    def stop(self) -> None:
        _join_compatibility_checks()
        self._uvicorn.stop()

    def close(self) -> None:
        """Stop serving and close the backing local client (releases a ``path`` lock)."""
        self.stop()
        self.client.close()

    def __enter__(self) -> QdrantRestShim:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def host(self) -> str:
        return self._uvicorn.host

    @property
    def port(self) -> int:
        if self._uvicorn.port is None:
            raise RuntimeError("shim not started")
        return self._uvicorn.port

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    def reset(self) -> None:
        """Delete every collection and alias (fast; keeps the server running)."""
        with self._lock:
            for alias in self.client.get_aliases().aliases:
                self.client.update_collection_aliases(
                    change_aliases_operations=[
                        m.DeleteAliasOperation(
                            delete_alias=m.DeleteAlias(alias_name=alias.alias_name)
                        )
                    ]
                )
            for col in self.client.get_collections().collections:
                self.client.delete_collection(col.name)
            self._payload_indexes.clear()
            self.requests.clear()

    # -- plumbing ------------------------------------------------------------------------

    def _build_app(self) -> Starlette:
        c = "/collections/{collection_name}"
        table: list[tuple[str, str, Callable[..., Any]]] = [
            ("GET", "/", self._root),
            ("GET", "/collections", self._list_collections),
            ("GET", "/aliases", self._all_aliases),
            ("POST", "/collections/aliases", self._update_aliases),
            ("GET", c, self._get_collection),
            ("PUT", c, self._create_collection),
            ("PATCH", c, self._update_collection),
            ("DELETE", c, self._delete_collection),
            ("GET", c + "/exists", self._collection_exists),
            ("GET", c + "/aliases", self._collection_aliases),
            ("PUT", c + "/index", self._create_index),
            ("DELETE", c + "/index/{field_name:path}", self._delete_index),
            ("PUT", c + "/points", self._upsert),
            ("POST", c + "/points", self._retrieve),
            ("POST", c + "/points/delete", self._delete_points),
            ("POST", c + "/points/payload", self._set_payload),
            ("PUT", c + "/points/payload", self._overwrite_payload),
            ("POST", c + "/points/payload/delete", self._delete_payload),
            ("POST", c + "/points/payload/clear", self._clear_payload),
            ("PUT", c + "/points/vectors", self._update_vectors),
            ("POST", c + "/points/vectors/delete", self._delete_vectors),
            ("POST", c + "/points/batch", self._batch_update),
            ("POST", c + "/points/scroll", self._scroll),
            ("POST", c + "/points/count", self._count),
            ("POST", c + "/points/query", self._query),
            ("POST", c + "/points/query/batch", self._query_batch),
            ("POST", c + "/points/query/groups", self._query_groups),
            ("POST", c + "/points/search", self._search),
            ("POST", c + "/points/search/batch", self._search_batch),
            ("POST", c + "/facet", self._facet),
            ("GET", c + "/points/{point_id}", self._get_point),
        ]
        routes: list[Route] = []
        by_path: dict[str, dict[str, Callable[..., Any]]] = {}
        for method, path, fn in table:
            by_path.setdefault(path, {})[method] = fn
        for path, handlers in by_path.items():
            routes.append(Route(path, self._endpoint(handlers), methods=list(handlers)))
        for probe in ("/healthz", "/livez", "/readyz"):
            routes.append(Route(probe, self._probe, methods=["GET"]))
        return Starlette(routes=routes)

    async def _probe(self, request: Request) -> Response:
        return PlainTextResponse(f"{request.url.path[1:]} check passed")

    def _endpoint(self, handlers: dict[str, Callable[..., Any]]):
        async def endpoint(request: Request) -> Response:
            started = time.perf_counter()
            fn = handlers[request.method]
            body = await request.body()
            params = dict(request.path_params)
            self.requests.append((request.method, request.url.path))

            def call() -> Any:
                with self._lock:
                    return fn(body, **params)

            try:
                result = await run_in_threadpool(call)
            except ShimError as exc:
                return self._error(exc.status, exc.message, started)
            except ValidationError as exc:
                return self._error(400, f"Format error in JSON body: {exc}", started)
            except ValueError as exc:
                text = str(exc)
                low = text.lower()
                if "not found" in low or "does not exist" in low or "doesn't exist" in low:
                    return self._error(404, f"Not found: {text}", started)
                if "already exists" in low:
                    return self._error(409, f"Wrong input: {text}", started)
                return self._error(400, f"Bad request: {text}", started)
            except Exception as exc:  # a bug in the shim or in local mode
                return self._error(500, f"Service internal error: {exc!r}", started)
            if isinstance(result, Response):
                return result
            return JSONResponse(
                {
                    "result": to_jsonable_python(result, exclude_none=True),
                    "status": "ok",
                    "time": time.perf_counter() - started,
                }
            )

        return endpoint

    @staticmethod
    def _error(status: int, message: str, started: float) -> JSONResponse:
        return JSONResponse(
            {"status": {"error": message}, "time": time.perf_counter() - started},
            status_code=status,
        )

    def _require(self, name: str) -> None:
        if not self.client.collection_exists(name):
            raise ShimError(404, f"Not found: Collection `{name}` doesn't exist!")

    # -- service / collections ----------------------------------------------------------

    def _root(self, body: bytes) -> Any:
        return JSONResponse(
            {"title": "qdrant - vector search engine", "version": self.version, "commit": None}
        )

    def _list_collections(self, body: bytes) -> Any:
        return self.client.get_collections()

    def _get_collection(self, body: bytes, collection_name: str) -> Any:
        self._require(collection_name)
        info = self.client.get_collection(collection_name)
        indexes = self._payload_indexes.get(collection_name) or {}
        if indexes:
            points = info.points_count or 0
            schema = {field: _index_info(s, points) for field, s in indexes.items()}
            info = info.model_copy(update={"payload_schema": schema})
        return info

    def _collection_exists(self, body: bytes, collection_name: str) -> Any:
        return m.CollectionExistence(exists=self.client.collection_exists(collection_name))

    def _create_collection(self, body: bytes, collection_name: str) -> Any:
        req = m.CreateCollection.model_validate_json(body or b"{}")
        if self.client.collection_exists(collection_name):
            raise ShimError(409, f"Wrong input: Collection `{collection_name}` already exists!")
        return self.client.create_collection(
            collection_name,
            vectors_config=req.vectors,
            sparse_vectors_config=req.sparse_vectors,
            metadata=req.metadata,
        )

    def _update_collection(self, body: bytes, collection_name: str) -> Any:
        req = m.UpdateCollection.model_validate_json(body or b"{}")
        self._require(collection_name)
        self.client.update_collection(
            collection_name,
            vectors_config=req.vectors,
            sparse_vectors_config=req.sparse_vectors,
            metadata=req.metadata,
        )
        return True

    def _delete_collection(self, body: bytes, collection_name: str) -> Any:
        self._payload_indexes.pop(collection_name, None)
        return self.client.delete_collection(collection_name)

    def _all_aliases(self, body: bytes) -> Any:
        return self.client.get_aliases()

    def _collection_aliases(self, body: bytes, collection_name: str) -> Any:
        return self.client.get_collection_aliases(collection_name)

    def _update_aliases(self, body: bytes) -> Any:
        req = m.ChangeAliasesOperation.model_validate_json(body)
        return self.client.update_collection_aliases(change_aliases_operations=req.actions)

    def _create_index(self, body: bytes, collection_name: str) -> Any:
        req = m.CreateFieldIndex.model_validate_json(body)
        self._require(collection_name)
        schema = req.field_schema
        if schema is None:
            raise ShimError(400, "Bad request: field_schema is required")
        if isinstance(schema, m.TextIndexParams) and schema.scoring:
            # the only kind of index local mode uses (text queries); others have no effect
            # there and make it warn, so they are only remembered for get_collection
            self.client.create_payload_index(collection_name, req.field_name, schema)
        self._payload_indexes.setdefault(collection_name, {})[req.field_name] = schema
        return m.UpdateResult(operation_id=0, status=m.UpdateStatus.COMPLETED)

    def _delete_index(self, body: bytes, collection_name: str, field_name: str) -> Any:
        self._require(collection_name)
        schema = self._payload_indexes.get(collection_name, {}).pop(field_name, None)
        if isinstance(schema, m.TextIndexParams) and schema.scoring:
            self.client.delete_payload_index(collection_name, field_name)
        return m.UpdateResult(operation_id=0, status=m.UpdateStatus.COMPLETED)

    # -- points: writes -------------------------------------------------------------------

    def _upsert(self, body: bytes, collection_name: str) -> Any:
        op = _POINT_INSERT.validate_json(body)
        self._require(collection_name)
        points: Any = op.batch if isinstance(op, m.PointsBatch) else op.points
        return self.client.upsert(
            collection_name,
            points=points,
            update_filter=op.update_filter,
            update_mode=op.update_mode,
        )

    def _delete_points(self, body: bytes, collection_name: str) -> Any:
        selector = _POINTS_SELECTOR.validate_json(body)
        self._require(collection_name)
        return self.client.delete(collection_name, points_selector=selector)

    def _set_payload(self, body: bytes, collection_name: str) -> Any:
        req = m.SetPayload.model_validate_json(body)
        self._require(collection_name)
        return self.client.set_payload(
            collection_name,
            payload=req.payload,
            points=_selector(req.points, req.filter),
            key=req.key,
        )

    def _overwrite_payload(self, body: bytes, collection_name: str) -> Any:
        req = m.SetPayload.model_validate_json(body)
        self._require(collection_name)
        return self.client.overwrite_payload(
            collection_name, payload=req.payload, points=_selector(req.points, req.filter)
        )

    def _delete_payload(self, body: bytes, collection_name: str) -> Any:
        req = m.DeletePayload.model_validate_json(body)
        self._require(collection_name)
        return self.client.delete_payload(
            collection_name, keys=req.keys, points=_selector(req.points, req.filter)
        )

    def _clear_payload(self, body: bytes, collection_name: str) -> Any:
        selector = _POINTS_SELECTOR.validate_json(body)
        self._require(collection_name)
        return self.client.clear_payload(collection_name, points_selector=selector)

    def _update_vectors(self, body: bytes, collection_name: str) -> Any:
        req = m.UpdateVectors.model_validate_json(body)
        self._require(collection_name)
        return self.client.update_vectors(
            collection_name, points=req.points, update_filter=req.update_filter
        )

    def _delete_vectors(self, body: bytes, collection_name: str) -> Any:
        req = m.DeleteVectors.model_validate_json(body)
        self._require(collection_name)
        return self.client.delete_vectors(
            collection_name, vectors=req.vector, points=_selector(req.points, req.filter)
        )

    def _batch_update(self, body: bytes, collection_name: str) -> Any:
        req = m.UpdateOperations.model_validate_json(body)
        self._require(collection_name)
        return self.client.batch_update_points(collection_name, update_operations=req.operations)

    # -- points: reads --------------------------------------------------------------------

    def _retrieve(self, body: bytes, collection_name: str) -> Any:
        req = m.PointRequest.model_validate_json(body)
        self._require(collection_name)
        return self.client.retrieve(
            collection_name,
            ids=req.ids,
            with_payload=req.with_payload if req.with_payload is not None else True,
            with_vectors=req.with_vector if req.with_vector is not None else False,
        )

    def _get_point(self, body: bytes, collection_name: str, point_id: str) -> Any:
        self._require(collection_name)
        found = self.client.retrieve(
            collection_name, ids=[_point_id(point_id)], with_payload=True, with_vectors=True
        )
        if not found:
            raise ShimError(404, f"Not found: No point with id {point_id} found")
        return found[0]

    def _scroll(self, body: bytes, collection_name: str) -> Any:
        req = m.ScrollRequest.model_validate_json(body or b"{}")
        self._require(collection_name)
        points, next_offset = self.client.scroll(
            collection_name,
            scroll_filter=req.filter,
            limit=req.limit if req.limit is not None else 10,
            order_by=req.order_by,
            offset=req.offset,
            with_payload=req.with_payload if req.with_payload is not None else True,
            with_vectors=req.with_vector if req.with_vector is not None else False,
        )
        return m.ScrollResult(points=points, next_page_offset=next_offset)

    def _count(self, body: bytes, collection_name: str) -> Any:
        req = m.CountRequest.model_validate_json(body or b"{}")
        self._require(collection_name)
        return self.client.count(collection_name, count_filter=req.filter, exact=True)

    def _facet(self, body: bytes, collection_name: str) -> Any:
        req = m.FacetRequest.model_validate_json(body)
        self._require(collection_name)
        return self.client.facet(
            collection_name,
            key=req.key,
            facet_filter=req.filter,
            limit=req.limit if req.limit is not None else 10,
            exact=bool(req.exact),
        )

    def _run_query(self, collection_name: str, req: m.QueryRequest) -> m.QueryResponse:
        return self.client.query_points(
            collection_name,
            query=req.query,
            using=req.using,
            prefetch=req.prefetch,
            query_filter=req.filter,
            search_params=req.params,
            limit=req.limit if req.limit is not None else 10,
            offset=req.offset,
            with_payload=req.with_payload if req.with_payload is not None else False,
            with_vectors=req.with_vector if req.with_vector is not None else False,
            score_threshold=req.score_threshold,
            lookup_from=req.lookup_from,
        )

    def _query(self, body: bytes, collection_name: str) -> Any:
        req = m.QueryRequest.model_validate_json(body or b"{}")
        self._require(collection_name)
        return self._run_query(collection_name, req)

    def _query_batch(self, body: bytes, collection_name: str) -> Any:
        req = m.QueryRequestBatch.model_validate_json(body)
        self._require(collection_name)
        return [self._run_query(collection_name, r) for r in req.searches]

    def _query_groups(self, body: bytes, collection_name: str) -> Any:
        req = m.QueryGroupsRequest.model_validate_json(body)
        self._require(collection_name)
        return self.client.query_points_groups(
            collection_name,
            group_by=req.group_by,
            query=req.query,
            using=req.using,
            prefetch=req.prefetch,
            query_filter=req.filter,
            search_params=req.params,
            limit=req.limit if req.limit is not None else 10,
            group_size=req.group_size if req.group_size is not None else 3,
            with_payload=req.with_payload if req.with_payload is not None else False,
            with_vectors=req.with_vector if req.with_vector is not None else False,
            score_threshold=req.score_threshold,
            with_lookup=req.with_lookup,
            lookup_from=req.lookup_from,
        )

    def _legacy_search(self, collection_name: str, raw: dict[str, Any]) -> list[m.ScoredPoint]:
        # The pre-query search API (removed from qdrant-client's models but still served):
        # "vector" is a list, {"name", "vector": list} or {"name", "vector": sparse}.
        vector = raw.get("vector")
        using = None
        if isinstance(vector, dict):
            using = vector.get("name")
            vector = vector.get("vector")
        if isinstance(vector, dict):
            vector = m.SparseVector.model_validate(vector)
        req = m.QueryRequest.model_validate(
            {
                "query": vector,
                "using": using,
                "filter": raw.get("filter"),
                "params": raw.get("params"),
                "limit": raw.get("limit"),
                "offset": raw.get("offset"),
                "with_payload": raw.get("with_payload"),
                "with_vector": raw.get("with_vector"),
                "score_threshold": raw.get("score_threshold"),
            }
        )
        return self._run_query(collection_name, req).points

    def _search(self, body: bytes, collection_name: str) -> Any:
        raw = TypeAdapter(dict[str, Any]).validate_json(body)
        self._require(collection_name)
        return self._legacy_search(collection_name, raw)

    def _search_batch(self, body: bytes, collection_name: str) -> Any:
        raw = TypeAdapter(dict[str, Any]).validate_json(body)
        self._require(collection_name)
        return [self._legacy_search(collection_name, s) for s in raw.get("searches") or []]

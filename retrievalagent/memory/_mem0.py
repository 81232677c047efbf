"""mem0 as the memory backend: ``Memory``, ``AsyncMemory`` or the hosted ``MemoryClient``.

mem0 2.x takes the user only inside ``filters`` when searching and calls the result size
``top_k``; older releases and some clients say ``limit``. The adapter asks the signature
once instead of guessing per call. Coroutine methods (``AsyncMemory``, or ``asearch`` /
``aadd`` where a client has them) are awaited; sync ones run in a worker thread under
``ainvoke`` so the event loop stays free.
"""

from __future__ import annotations

import functools
import inspect
import math
import threading
from collections.abc import Callable
from typing import Any

from retrievalagent._aio import in_thread, run_sync
from retrievalagent.memory._base import MemoryHit, MemoryRecord, fact_text, recall_text

__all__ = ["Mem0Backend"]

# mem0 vector stores whose native score is a distance (smaller = closer), per mem0's docs.
_DISTANCE_PROVIDERS = frozenset({"faiss", "chroma"})


def _pick(obj: Any, name: str) -> tuple[Callable[..., Any] | None, Callable[..., Any] | None]:
    """The sync and the coroutine flavour of ``name`` (``search`` / ``asearch``), if present."""
    plain, prefixed = getattr(obj, name, None), getattr(obj, "a" + name, None)
    sync = plain if callable(plain) and not inspect.iscoroutinefunction(plain) else None
    if callable(prefixed) and inspect.iscoroutinefunction(prefixed):
        return sync, prefixed
    if callable(plain) and inspect.iscoroutinefunction(plain):
        return sync, plain
    return sync, None


def _serialize_local_qdrant(memory: Any) -> None:
    """Give mem0's Qdrant *local mode* engine (``path=...``, what ``memory=True`` uses) one
    lock. That engine is not thread-safe: a search running while a write grows its arrays
    raises IndexError, and concurrent writes collide in its SQLite file. mem0 calls it
    from several threads (our write workers, ``AsyncMemory``'s to_thread), so each of its
    calls takes the lock; only the engine's calls, never mem0's LLM calls, are serialized.
    """
    client = getattr(getattr(memory, "vector_store", None), "client", None)
    local = getattr(client, "_client", None)
    if type(local).__name__ != "QdrantLocal" or getattr(local, "_retrievalagent_lock", None):
        return
    lock = threading.RLock()

    def locked(method: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(method)
        def call(*args: Any, **kwargs: Any) -> Any:
            with lock:
                return method(*args, **kwargs)

        return call

    for name in dir(type(local)):
        method = getattr(local, name, None)
        if not name.startswith("_") and inspect.ismethod(method):
            setattr(local, name, locked(method))
    local._retrievalagent_lock = lock


class Mem0Backend:
    """Adapter over a mem0 memory object.

    Args:
        memory: ``mem0.Memory``, ``mem0.AsyncMemory`` or anything with the same methods.
        infer: Let mem0's LLM extract facts on ``add`` (``False`` stores the fact as given).
        score_kind: ``"similarity"``, ``"distance"`` or ``"auto"`` (from mem0's vector store
            provider).
    """

    name = "mem0"

    def __init__(self, memory: Any, *, infer: bool = True, score_kind: str = "auto") -> None:
        self.memory = memory
        self.infer = infer
        self._search, self._asearch = _pick(memory, "search")
        self._add, self._aadd = _pick(memory, "add")
        if not (self._search or self._asearch) or not (self._add or self._aadd):
            raise TypeError(
                f"mem0_memory must have search() and add() methods (mem0 Memory or AsyncMemory), "
                f"got {type(memory).__name__}"
            )
        self.async_native = self._aadd is not None
        any_search = self._search or self._asearch
        params = inspect.signature(any_search).parameters
        self._limit_key = "top_k" if "top_k" in params else "limit"
        self._threshold = "threshold" in params
        any_add = self._add or self._aadd
        self._accepts_infer = "infer" in inspect.signature(any_add).parameters
        if score_kind == "auto":
            provider = getattr(
                getattr(getattr(memory, "config", None), "vector_store", None), "provider", None
            )
            score_kind = "distance" if provider in _DISTANCE_PROVIDERS else "similarity"
        if score_kind not in ("similarity", "distance"):
            raise ValueError(
                f"score_kind must be 'similarity', 'distance' or 'auto', not {score_kind!r}"
            )
        self.score_kind = score_kind
        _serialize_local_qdrant(memory)

    # -- search ----------------------------------------------------------------------
    def _search_kwargs(self, user_id: str, limit: int) -> dict[str, Any]:
        kwargs: dict[str, Any] = {"filters": {"user_id": user_id}, self._limit_key: limit}
        if self._threshold:
            kwargs["threshold"] = 0.0  # the relevance bar is the agent's, applied after
        return kwargs

    def _hits(self, raw: Any, user_id: str | None = None) -> tuple[list[MemoryHit], int]:
        # A malformed item (not a dict, a score that is not a finite number) is skipped,
        # not allowed to fail the whole recall; so is an item of another user (mem0
        # filters by user already: this guards against a backend that does not).
        items = raw.get("results", []) if isinstance(raw, dict) else raw
        items = items if isinstance(items, list | tuple) else []
        hits = []
        for item in items:
            if not isinstance(item, dict):
                continue
            if user_id is not None and str(item.get("user_id", user_id)) != user_id:
                continue
            try:
                score = float(item.get("score") or 0.0)
            except (TypeError, ValueError, OverflowError):
                continue
            if not math.isfinite(score):
                continue
            if self.score_kind == "distance":
                score = 1.0 / (1.0 + max(0.0, score))
            text = fact_text(str(item.get("memory") or item.get("text") or ""))
            metadata = item.get("metadata")
            hits.append(
                MemoryHit(
                    str(item.get("id", "")),
                    str(text),
                    score,
                    dict(metadata) if isinstance(metadata, dict) else {},
                )
            )
        hits.sort(key=lambda h: -h.score)
        return hits, len(items)

    def search(self, query: str, user_id: str, limit: int) -> tuple[list[MemoryHit], int]:
        kwargs = self._search_kwargs(user_id, limit)
        if self._search is not None:
            return self._hits(self._search(query, **kwargs), user_id)
        asearch = self._asearch
        assert asearch is not None
        return self._hits(run_sync(lambda: asearch(query, **kwargs)), user_id)

    async def asearch(self, query: str, user_id: str, limit: int) -> tuple[list[MemoryHit], int]:
        kwargs = self._search_kwargs(user_id, limit)
        if self._asearch is not None:
            return self._hits(await self._asearch(query, **kwargs), user_id)
        assert self._search is not None
        search = self._search
        # its own thread, not the loop's executor: a hung search cannot starve the graph
        return self._hits(await in_thread(lambda: search(query, **kwargs)), user_id)

    # -- add -------------------------------------------------------------------------
    def _add_call(self, record: MemoryRecord) -> tuple[list[dict[str, str]], dict[str, Any]]:
        # mem0's extractor sees the question and the mapping it led to; without inference
        # only the fact itself is stored (raw messages would store the question too).
        if self.infer:
            messages = [
                {"role": "user", "content": record.question},
                {
                    "role": "assistant",
                    "content": f"Search hint for these documents: {recall_text(record)}",
                },
            ]
        else:
            messages = [{"role": "user", "content": recall_text(record)}]
        metadata = {"kind": "search_hint", "question": record.question[:500], **record.metadata}
        kwargs: dict[str, Any] = {"user_id": record.user_id, "metadata": metadata}
        if self._accepts_infer:
            kwargs["infer"] = self.infer
        return messages, kwargs

    def add(self, record: MemoryRecord) -> None:
        messages, kwargs = self._add_call(record)
        if self._add is not None:
            self._add(messages, **kwargs)
        else:
            aadd = self._aadd
            assert aadd is not None
            run_sync(lambda: aadd(messages, **kwargs))

    async def aadd(self, record: MemoryRecord) -> None:
        messages, kwargs = self._add_call(record)
        if self._aadd is not None:
            await self._aadd(messages, **kwargs)
        else:
            assert self._add is not None
            add = self._add
            await in_thread(lambda: add(messages, **kwargs))

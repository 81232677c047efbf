"""The agent's graph for LangGraph Server (``langgraph dev``, ``langgraph up``, the platform).

``langgraph.json`` at the repository root points at `make_graph`. Everything about
the agent comes from the ``RAG_*`` environment variables (the same ones `init_agent`
reads: ``RAG_MODEL``, ``RAG_BACKEND_URL``, ``RAG_DATA_DIR``, ...). Two things may also be
chosen per assistant, through the assistant's ``configurable``:

* ``collection`` -- which corpus to answer from (default: ``RAG_COLLECTION``, else ``docs``);
  only a collection that exists (``collection_exists``) and that ``RAG_SERVE_COLLECTIONS``
  lists, when it is set, is served: any other name is refused before anything is opened,
  so a client cannot make the worker create folders or keep agents for names it makes up;
* ``memory`` -- ``True`` for the embedded mem0 long-term memory (default: off); a string
  must say true or false ("true", "false", "yes", "no", "on", "off", "1", "0").

The server brings its own checkpointer (threads) and passes ``user_id`` through the run's
``configurable`` (or the authenticated user), so the graph is built without a checkpointer.
One agent is built per (collection, memory) and reused by every run: opening an index and
loading the embedding model happen once, not per request. At most
``RAG_SERVE_MAX_AGENTS`` agents stay open; the least recently used one is closed when
another is needed, as soon as the runs using it have finished.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections import OrderedDict
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

from langchain_core.runnables import RunnableConfig
from langgraph.graph.state import CompiledStateGraph

from retrievalagent.agent import RetrievalAgent, collection_exists, init_agent
from retrievalagent.config import Settings, check_collection
from retrievalagent.errors import (
    ConfigError,
    EmbeddingModelError,
    IndexLockedError,
    VectorIndexError,
)

__all__ = ["agent_for", "close_agents", "make_graph"]

logger = logging.getLogger(__name__)

_Key = tuple[str, bool]
_TRUE, _FALSE = ("1", "true", "yes", "on", "mem0"), ("0", "false", "no", "off", "")


@dataclass(eq=False)
class _Served:
    """An open agent and the runs using it; an evicted one is closed by its last run."""

    key: _Key
    agent: RetrievalAgent
    runs: int = 0
    evicted: bool = False


_lock = threading.Lock()
_agents: OrderedDict[_Key, _Served] = OrderedDict()  # least recently used first
_retiring: dict[_Key, _Served] = {}  # evicted while runs still used them
#: One lock per collection being opened: its first runs wait for one build, while runs on
#: collections already open go on (an agent takes seconds to open).
_building: dict[_Key, threading.Lock] = {}


def _memory(value: Any) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.strip().lower() in (*_TRUE, *_FALSE):
        return value.strip().lower() in _TRUE  # assistants set from JSON or a form send strings
    raise ConfigError(f"configurable.memory must be true or false, not {value!r}")


def _choice(config: RunnableConfig | Mapping[str, Any] | None) -> _Key:
    configurable = dict((config or {}).get("configurable") or {})
    collection = configurable.get("collection")
    if collection is None:
        collection = Settings.load().default_collection
    return check_collection(collection), _memory(configurable.get("memory", False))


def _served_names(settings: Settings) -> frozenset[str] | None:
    """The collections ``RAG_SERVE_COLLECTIONS`` lists (None: unset, every existing one)."""
    if settings.serve_collections is None:
        return None
    names = [n.strip() for n in settings.serve_collections.split(",") if n.strip()]
    try:
        return frozenset(check_collection(n) for n in names)
    except ConfigError as exc:
        raise ConfigError(f"RAG_SERVE_COLLECTIONS: {exc}") from None


def _check_servable(collection: str, settings: Settings) -> None:
    allowed = _served_names(settings)
    if allowed is not None and collection not in allowed:
        raise ConfigError(
            f"collection {collection!r} is not served here; RAG_SERVE_COLLECTIONS lists "
            f"{', '.join(sorted(allowed)) or 'none'}"
        )
    if not collection_exists(collection):
        raise ConfigError(
            f"collection {collection!r} does not exist; index it first "
            f"(retrievalagent ingest PATH --collection {collection})"
        )


def _evict(limit: int) -> list[RetrievalAgent]:
    """Drop the least recently used agents beyond ``limit`` (caller holds the lock); returns
    those no run uses, to close now."""
    idle = []
    while len(_agents) > limit:
        _, old = _agents.popitem(last=False)
        if old.runs:
            old.evicted = True
            _retiring[old.key] = old
        else:
            idle.append(old.agent)
    return idle


def _lease(key: _Key) -> _Served:
    """The served agent for ``key``, counted as used by one more run until `_release`."""
    settings = Settings.load()
    limit, idle = settings.serve_max_agents, list[RetrievalAgent]()
    with _lock:
        served = _use(key, limit, idle)
        building = _building.setdefault(key, threading.Lock()) if served is None else None
    if building is not None:
        with building:  # the first run opens the agent; others for the key wait for it
            with _lock:
                served = _use(key, limit, idle)
            if served is None:
                _check_servable(key[0], settings)
                agent = _opened(key)  # not under the global lock
                with _lock:
                    _agents[key] = _Served(key, agent)
                    served = _use(key, limit, idle)
                    _building.pop(key, None)
    for agent in idle:  # closing drains writes: not under the lock either
        agent.close()
    assert served is not None
    return served


def _opened(key: _Key) -> RetrievalAgent:
    """``init_agent`` for a served collection. Its index errors name the server's files: a
    client gets what happened, the server's log gets where."""
    try:
        return init_agent(key[0], memory=key[1])
    except (VectorIndexError, EmbeddingModelError) as exc:
        logger.warning("cannot open collection %r: %s", key[0], exc)
        if isinstance(exc, IndexLockedError):
            raise IndexLockedError(
                f"collection {key[0]!r} is busy: another process has its index open (an "
                "ingest?); try again when it is done"
            ) from None
        raise type(exc)(
            f"collection {key[0]!r} cannot be opened ({type(exc).__name__}); the server's "
            "log says why"
        ) from None


def _use(key: _Key, limit: int, idle: list[RetrievalAgent]) -> _Served | None:
    """The open agent for ``key`` as the most recently used, counted for one more run
    (None when it is not open); those evicted past ``limit`` that no run uses go to
    ``idle``, to close. The caller holds the lock."""
    served = _agents.pop(key, None) or _retiring.pop(key, None)
    if served is None:
        return None
    served.evicted = False
    served.runs += 1
    _agents[key] = served  # now the most recently used
    idle += _evict(limit)
    return served


def _release(served: _Served) -> RetrievalAgent | None:
    """One run less; the agent to close when it was evicted and this was its last run."""
    with _lock:
        served.runs -= 1
        if served.evicted and not served.runs:
            _retiring.pop(served.key, None)
            return served.agent
    return None


def agent_for(config: RunnableConfig | Mapping[str, Any] | None = None) -> RetrievalAgent:
    """The served agent for ``config`` (built on first use, then shared).

    It stays open while it is among the ``RAG_SERVE_MAX_AGENTS`` most recently used; a run
    that must keep it open goes through `make_graph`.

    Args:
        config: A run or assistant config; ``configurable.collection`` and
            ``configurable.memory`` select the agent, everything else comes from ``RAG_*``.

    Raises:
        ConfigError: the collection does not exist or is not served
            (``RAG_SERVE_COLLECTIONS``), or ``configurable.memory`` is not true or false.
    """
    served = _lease(_choice(config))
    closing = _release(served)
    if closing is not None:  # evicted by another thread in between
        closing.close()
    return served.agent


@asynccontextmanager
async def make_graph(
    config: RunnableConfig,
) -> AsyncIterator[CompiledStateGraph[Any, Any, Any, Any]]:
    """Graph factory for ``langgraph.json``: the compiled graph of the served agent, held
    open for as long as the server uses it (one run, or one state read).

    The first use of a collection opens its index off the event loop; an agent evicted
    while runs use it is closed when the last of them ends.

    Raises:
        ConfigError: as `agent_for`.
    """
    served = await asyncio.to_thread(_lease, _choice(config))
    try:
        yield served.agent.graph
    finally:
        closing = _release(served)
        if closing is not None:
            await asyncio.to_thread(closing.close)


def close_agents() -> None:
    """Close every served agent (waits for their pending memory writes)."""
    with _lock:
        agents = [s.agent for s in (*_agents.values(), *_retiring.values())]
        _agents.clear()
        _retiring.clear()
    for agent in agents:
        agent.close()

"""The agent's graph for LangGraph Server (``langgraph dev``, ``langgraph up``, the platform).

``langgraph.json`` at the repository root points at `make_graph`. Everything about
the agent comes from the ``RAG_*`` environment variables (the same ones `init_agent`
reads: ``RAG_MODEL``, ``RAG_BACKEND_URL``, ``RAG_DATA_DIR``, ...). Two things may also be
chosen per assistant, through the assistant's ``configurable``:

* ``collection`` -- which corpus to answer from (default: ``RAG_COLLECTION``, else ``docs``);
* ``memory`` -- ``True`` for the embedded mem0 long-term memory (default: off).

The server brings its own checkpointer (threads) and passes ``user_id`` through the run's
``configurable`` (or the authenticated user), so the graph is built without a checkpointer.
One agent is built per (collection, memory) and reused by every run: opening an index and
loading the embedding model happen once per server process, not per request.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Mapping
from typing import Any

from langchain_core.runnables import RunnableConfig
from langgraph.graph.state import CompiledStateGraph

from retrievalagent.agent import RetrievalAgent, init_agent
from retrievalagent.config import Settings
from retrievalagent.errors import ConfigError

__all__ = ["agent_for", "close_agents", "make_graph"]

_lock = threading.Lock()
_agents: dict[tuple[str, bool], RetrievalAgent] = {}


def _choice(config: RunnableConfig | Mapping[str, Any] | None) -> tuple[str, bool]:
    configurable = dict((config or {}).get("configurable") or {})
    collection = configurable.get("collection") or Settings.load().default_collection
    memory = configurable.get("memory", False)
    if isinstance(memory, str):  # assistants configured from JSON or a form send strings
        memory = memory.strip().lower() in ("1", "true", "yes", "on", "mem0")
    if not isinstance(memory, bool):
        raise ConfigError(f"configurable.memory must be true or false, not {memory!r}")
    return str(collection), memory


def agent_for(config: RunnableConfig | Mapping[str, Any] | None = None) -> RetrievalAgent:
    """The served agent for ``config`` (built on first use, then shared).

    Args:
        config: A run or assistant config; ``configurable.collection`` and
            ``configurable.memory`` select the agent, everything else comes from ``RAG_*``.
    """
    key = _choice(config)
    with _lock:
        agent = _agents.get(key)
        if agent is None:
            collection, memory = key
            agent = init_agent(collection, memory=memory)
            _agents[key] = agent
    return agent


async def make_graph(config: RunnableConfig) -> CompiledStateGraph[Any, Any, Any, Any]:
    """Graph factory for ``langgraph.json``: the compiled graph of `agent_for`.

    The first call for a collection opens its index off the event loop; later calls
    return the cached graph at once.
    """
    agent = _agents.get(_choice(config))
    if agent is None:
        agent = await asyncio.to_thread(agent_for, config)
    return agent.graph


def close_agents() -> None:
    """Close every served agent (waits for their pending memory writes)."""
    with _lock:
        agents = list(_agents.values())
        _agents.clear()
    for agent in agents:
        agent.close()

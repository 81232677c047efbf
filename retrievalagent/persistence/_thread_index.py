"""Conversations kept by a checkpointer: list a user's threads, read one, delete one, and
branch a thread to answer its last question again.

The thread index is the checkpointer's own metadata, not a table of ours. Every checkpoint
an agent writes carries ``user_id`` and ``collection`` (the agent puts them in
``config["metadata"]``), and a thread's very first checkpoint has ``source="input"`` and
``step=-1``. Listing asks the checkpointer for exactly those checkpoints — one per thread,
matched inside the database for SQLite and PostgreSQL — then reads each thread's latest
state for its title and message count. ``delete_thread`` removes a thread's checkpoints
and, with them, its index entry. Any ``BaseCheckpointSaver`` works.

Regeneration branches from the checkpoint the last turn started from (the end of the turn
before it, or an empty root for a thread's first turn) and asks the same question again;
the thread's head is then the new branch, whose messages do not contain the replaced
answer. It deliberately does not resume from a checkpoint *inside* the last turn: with
LangGraph's default ``durability="async"``, such checkpoints can be saved after a later
step has already changed the graph's fan-in barrier (langgraph issue #8748), and a run
resumed from one can stop before ``fuse``. Checkpoints at turn boundaries are always whole.
"""

from __future__ import annotations

import builtins
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any, cast

from langchain_core.messages import AnyMessage, HumanMessage
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import (
    BaseCheckpointSaver,
    Checkpoint,
    CheckpointMetadata,
    CheckpointTuple,
    empty_checkpoint,
)
from langgraph.graph.state import CompiledStateGraph
from langgraph.types import StateSnapshot

from retrievalagent.errors import ConfigError
from retrievalagent.persistence._titles import question_title

__all__ = ["ThreadInfo", "Threads"]

#: how many checkpoints back ``regenerate`` looks for the start of the last turn
_MAX_WALK = 1000


def _ts(value: str | None) -> datetime:
    if not value:
        return datetime.fromtimestamp(0, timezone.utc)
    return datetime.fromisoformat(value.replace("Z", "+00:00"))


@dataclass(frozen=True)
class ThreadInfo:
    """One conversation, as :meth:`RetrievalAgent.list_threads` reports it."""

    thread_id: str
    title: str
    created_at: datetime
    updated_at: datetime
    message_count: int
    user_id: str | None = None

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready: times as ISO 8601 strings."""
        return {
            "thread_id": self.thread_id,
            "title": self.title,
            "created_at": self.created_at.isoformat(),
            "updated_at": self.updated_at.isoformat(),
            "message_count": self.message_count,
            "user_id": self.user_id,
        }


class _Seen:
    """Thread ids met while scanning first checkpoints, with their oldest timestamp."""

    def __init__(self) -> None:
        self.created: dict[str, str] = {}

    def add(self, tup: CheckpointTuple) -> None:
        thread_id = str(tup.config["configurable"]["thread_id"])
        ts = tup.checkpoint.get("ts") or ""
        if thread_id not in self.created or ts < self.created[thread_id]:
            self.created[thread_id] = ts


def _thread_config(thread_id: str) -> RunnableConfig:
    return {"configurable": {"thread_id": thread_id, "checkpoint_ns": ""}}


def _info(thread_id: str, created: str, snap: StateSnapshot) -> ThreadInfo | None:
    if snap.config is None or not snap.created_at:
        return None
    values = snap.values if isinstance(snap.values, dict) else {}
    messages = list(values.get("messages") or [])
    title = values.get("title") or ""
    if not title:
        first = next((m for m in messages if isinstance(m, HumanMessage)), None)
        title = question_title(str(first.content if first else values.get("question") or ""))
    return ThreadInfo(
        thread_id=thread_id,
        title=title,
        created_at=_ts(created),
        updated_at=_ts(snap.created_at),
        message_count=len(messages),
        user_id=_user_of(snap.metadata),
    )


def _metadata(metadata: CheckpointMetadata | None) -> Mapping[str, object]:
    """A checkpoint's metadata with the keys LangGraph's TypedDict does not list (the
    agent's ``user_id`` and ``collection``) readable."""
    return metadata or {}


def _user_of(metadata: CheckpointMetadata | None) -> str | None:
    user = _metadata(metadata).get("user_id")
    return None if user is None else str(user)


def _ranked(infos: Iterable[ThreadInfo | None], limit: int | None) -> list[ThreadInfo]:
    out = sorted((i for i in infos if i is not None), key=lambda i: i.updated_at, reverse=True)
    return out if limit is None else out[:limit]


# -- regeneration: pure parts shared by the sync and async paths ------------------------------
def _thread_of(config: RunnableConfig) -> str:
    return str(config["configurable"]["thread_id"])


def _head_config(config: RunnableConfig) -> RunnableConfig:
    """The checkpoint to regenerate from: the one named in ``config``, else the latest."""
    configurable = config.get("configurable") or {}
    head = _thread_config(_thread_of(config))
    if configurable.get("checkpoint_id"):
        head["configurable"]["checkpoint_id"] = configurable["checkpoint_id"]
    return head


def _is_turn_input(tup: CheckpointTuple) -> bool:
    return _metadata(tup.metadata).get("source") == "input"


def _root(turn: CheckpointTuple) -> tuple[RunnableConfig, Checkpoint, CheckpointMetadata]:
    """What to ``put`` for an empty root when the last turn is the thread's first."""
    meta = _metadata(turn.metadata)
    metadata: dict[str, Any] = {"source": "fork", "step": -2, "parents": {}}
    metadata.update({k: meta[k] for k in ("user_id", "collection") if k in meta})
    # the agent's own keys ride along: checkpointers store whatever metadata they get
    return (
        _thread_config(_thread_of(turn.config)),
        empty_checkpoint(),
        cast(CheckpointMetadata, metadata),
    )


def _plan(
    config: RunnableConfig, head: StateSnapshot, turn: CheckpointTuple, base: RunnableConfig
) -> tuple[dict[str, Any], RunnableConfig]:
    question = (head.values or {}).get("question")
    if not question:
        raise _no_turn(_thread_of(config))
    configurable = dict(config.get("configurable") or {})
    configurable.update(base["configurable"])  # thread_id, checkpoint_ns, checkpoint_id
    user = _metadata(turn.metadata).get("user_id")
    if user and not configurable.get("user_id"):
        configurable["user_id"] = user
    run: RunnableConfig = {**config, "configurable": configurable}
    values = head.values or {}
    payload = {"question": question, "filter": values.get("filter")}
    if values.get("title"):  # a regenerated first turn keeps its title (no second model call)
        payload["title"] = values["title"]
    return payload, run


def _no_turn(thread_id: str) -> ConfigError:
    return ConfigError(f"thread {thread_id!r} has no answered question to regenerate")


class Threads:
    """The conversations of one agent (its graph, checkpointer and collection)."""

    def __init__(self, graph: CompiledStateGraph[Any, Any, Any, Any], collection: str) -> None:
        self.graph = graph
        self.collection = collection

    @property
    def checkpointer(self) -> BaseCheckpointSaver[Any]:
        saver = self.graph.checkpointer
        if not isinstance(saver, BaseCheckpointSaver):
            raise ConfigError(
                "conversations need a checkpointer: init_agent(..., checkpointer=MemorySaver()) "
                "or SqliteSaver / PostgresSaver"
            )
        return saver

    def _filter(self, user_id: str | None) -> dict[str, Any]:
        wanted: dict[str, Any] = {"collection": self.collection, "source": "input", "step": -1}
        if user_id is not None:
            wanted["user_id"] = user_id
        return wanted

    def _mine(self, tup: CheckpointTuple | None) -> bool:
        if tup is None:
            return False
        owner = _metadata(tup.metadata).get("collection")
        return owner in (None, self.collection)

    # -- sync --------------------------------------------------------------------------
    def list(
        self, user_id: str | None = None, limit: int | None = None
    ) -> builtins.list[ThreadInfo]:
        seen = _Seen()
        for tup in self.checkpointer.list(None, filter=self._filter(user_id)):
            seen.add(tup)
        return _ranked(
            (
                _info(tid, created, self.graph.get_state(_thread_config(tid)))
                for tid, created in seen.created.items()
            ),
            limit,
        )

    def history(self, thread_id: str) -> builtins.list[AnyMessage]:
        snap = self.graph.get_state(_thread_config(thread_id))
        return list((snap.values or {}).get("messages") or [])

    def delete(self, thread_id: str) -> bool:
        saver = self.checkpointer
        if not self._mine(saver.get_tuple(_thread_config(thread_id))):
            return False
        saver.delete_thread(thread_id)
        return True

    def _turn_input(self, config: RunnableConfig) -> CheckpointTuple:
        saver = self.checkpointer
        tup = saver.get_tuple(_head_config(config))
        for _ in range(_MAX_WALK):
            if tup is None or _is_turn_input(tup):
                break
            tup = saver.get_tuple(tup.parent_config) if tup.parent_config else None
        if tup is None:
            raise _no_turn(_thread_of(config))
        return tup

    def branch(self, config: RunnableConfig) -> tuple[dict[str, Any], RunnableConfig]:
        """The input and config that answer the last question again on a new branch."""
        head = self.graph.get_state(_head_config(config))
        turn = self._turn_input(config)
        base = turn.parent_config or self.checkpointer.put(*_root(turn), {})
        return _plan(config, head, turn, base)

    # -- async -------------------------------------------------------------------------
    async def alist(
        self, user_id: str | None = None, limit: int | None = None
    ) -> builtins.list[ThreadInfo]:
        seen = _Seen()
        async for tup in self.checkpointer.alist(None, filter=self._filter(user_id)):
            seen.add(tup)
        infos = [
            _info(tid, created, await self.graph.aget_state(_thread_config(tid)))
            for tid, created in seen.created.items()
        ]
        return _ranked(infos, limit)

    async def ahistory(self, thread_id: str) -> builtins.list[AnyMessage]:
        snap = await self.graph.aget_state(_thread_config(thread_id))
        return list((snap.values or {}).get("messages") or [])

    async def adelete(self, thread_id: str) -> bool:
        saver = self.checkpointer
        if not self._mine(await saver.aget_tuple(_thread_config(thread_id))):
            return False
        await saver.adelete_thread(thread_id)
        return True

    async def _aturn_input(self, config: RunnableConfig) -> CheckpointTuple:
        saver = self.checkpointer
        tup = await saver.aget_tuple(_head_config(config))
        for _ in range(_MAX_WALK):
            if tup is None or _is_turn_input(tup):
                break
            tup = await saver.aget_tuple(tup.parent_config) if tup.parent_config else None
        if tup is None:
            raise _no_turn(_thread_of(config))
        return tup

    async def abranch(self, config: RunnableConfig) -> tuple[dict[str, Any], RunnableConfig]:
        head = await self.graph.aget_state(_head_config(config))
        turn = await self._aturn_input(config)
        base = turn.parent_config or await self.checkpointer.aput(*_root(turn), {})
        return _plan(config, head, turn, base)

"""``memory=True``: a mem0 built from the agent's own model and embeddings, kept on disk.

Everything stays local: mem0's ``langchain`` providers wrap the agent's chat model and
embeddings, its vector store is Qdrant in local mode under the agent's data dir, and its
history database sits beside it. Telemetry is switched off before mem0 is imported (unless
the user chose otherwise), since mem0 otherwise calls out to the network. Memories are
stored as the agent's grader phrased them (``infer=False``): the grader already did the
extraction, and mem0's own would drop the kind and key every recall relies on.
"""

from __future__ import annotations

import atexit
import logging
import os
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from langchain_core.embeddings import Embeddings
from langchain_core.language_models import BaseChatModel
from langchain_core.language_models.fake_chat_models import FakeListChatModel

from retrievalagent.index import LexicalEncoder
from retrievalagent.memory._background import drain_all_at_exit
from retrievalagent.memory._mem0 import Mem0Backend

__all__ = [
    "EmbeddedMem0Backend",
    "close_embedded_at_exit",
    "embedded_mem0",
    "embedded_mem0_path",
    "offline_mem0_config",
    "prepare_mem0_import",
]

logger = logging.getLogger("retrievalagent.memory")


@dataclass
class _Shared:
    memory: Any
    users: int = 0


_lock = threading.Lock()
_instances: dict[str, _Shared] = {}
# Notes mem0 logs when optional extras are missing; irrelevant to the embedded instance.
_EXTRAS_NOTES = ("spaCy is not installed", "fastembed not installed")
_NOISY_LOGGERS = ("mem0.utils.spacy_models", "mem0.vector_stores.qdrant")


class _DropExtrasNotes(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        return not any(note in message for note in _EXTRAS_NOTES)


def _quiet_extras_notes() -> None:
    for name in _NOISY_LOGGERS:
        log = logging.getLogger(name)
        if not any(isinstance(f, _DropExtrasNotes) for f in log.filters):
            log.addFilter(_DropExtrasNotes())


def _close_memory(memory: Any) -> None:
    """Close what a mem0 ``Memory`` holds open: Qdrant clients and the history database."""
    clients: list[Any] = []
    for attr in ("vector_store", "_entity_store", "_telemetry_vector_store"):
        client = getattr(getattr(memory, attr, None), "client", None)
        if client is not None and all(client is not c for c in clients):
            clients.append(client)
    for client in clients:
        try:
            client.close()
        except Exception as exc:  # closing is best effort; never mask the caller's work
            logger.debug("closing mem0's Qdrant client failed: %s", exc)
    close = getattr(memory, "close", None)
    if callable(close):
        # mem0 closes its SQLite connection without the lock its writes hold: a write still
        # running (one past its timeout) would then use a closed connection and crash the
        # process. Closing under that lock makes such a write fail cleanly instead.
        lock = getattr(getattr(memory, "db", None), "_lock", None)
        locked = lock.acquire(timeout=5) if lock is not None else False
        try:
            close()
        except Exception as exc:
            logger.debug("closing mem0's history database failed: %s", exc)
        finally:
            if locked and lock is not None:
                lock.release()


def prepare_mem0_import(data_dir: Path | None = None) -> None:
    """Environment mem0 reads at import time: no telemetry, and its home in our data dir."""
    os.environ.setdefault("MEM0_TELEMETRY", "False")
    if data_dir is not None:
        os.environ.setdefault("MEM0_DIR", str(data_dir / "mem0-home"))


class EmbeddedMem0Backend(Mem0Backend):
    """The ``memory=True`` backend: a shared embedded mem0, released by ``close()``."""

    def __init__(self, memory: Any, *, key: str, **options: Any) -> None:
        super().__init__(memory, **options)
        self._key: str | None = key

    def close(self) -> None:
        """Release this agent's use; the last user closes the mem0 instance (idempotent)."""
        with _lock:
            key, self._key = self._key, None
            shared = _instances.get(key) if key is not None else None
            if key is None or shared is None:
                return
            shared.users -= 1
            if shared.users > 0:
                return
            del _instances[key]
        _close_memory(shared.memory)


@atexit.register
def close_embedded_at_exit() -> None:
    """Drain pending memory writes, then close every embedded mem0 still open."""
    with _lock:
        if not _instances:
            return
    drain_all_at_exit()  # writes first: they need the Qdrant client this closes
    with _lock:
        shared = list(_instances.values())
        _instances.clear()
    for item in shared:
        _close_memory(item.memory)


class _NoExtraction(FakeListChatModel):
    """Stands in for mem0's LLM when the agent has none; mem0 never calls it (infer=False)."""

    def __init__(self) -> None:
        super().__init__(responses=["{}"])


def offline_mem0_config(
    root: Path,
    llm: BaseChatModel,
    embeddings: Embeddings,
    dimension: int,
    *,
    collection_name: str = "search_hints",
) -> dict[str, Any]:
    """A mem0 config under ``root`` that never leaves the machine: LangChain's LLM and
    embeddings, Qdrant in local mode on disk, the history in SQLite."""
    return {
        "llm": {"provider": "langchain", "config": {"model": llm}},
        "embedder": {"provider": "langchain", "config": {"model": embeddings}},
        "vector_store": {
            "provider": "qdrant",
            "config": {
                "collection_name": collection_name,
                "path": str(root / "qdrant"),
                "embedding_model_dims": dimension,
                "on_disk": True,
            },
        },
        "history_db_path": str(root / "history.db"),
    }


def embedded_mem0_path(data_dir: Path, collection: str) -> Path:
    """Where ``memory=True`` keeps a collection's memories under ``data_dir``."""
    return data_dir / collection / "mem0"


def embedded_mem0(
    data_dir: Path,
    collection: str,
    model: BaseChatModel | None,
    embeddings: Embeddings,
    dimension: int,
    encoder: LexicalEncoder | None = None,
) -> EmbeddedMem0Backend:
    """The embedded mem0 for ``collection`` (one per data dir and process); ``close()`` the
    returned backend when done with it. Conversation memory goes through mem0's own
    extraction when the agent has a model, as raw exchanges when it has none."""
    root = embedded_mem0_path(data_dir, collection)
    key = str(root.resolve())
    with _lock:
        shared = _instances.get(key)
        if shared is None:
            root.mkdir(parents=True, exist_ok=True)
            prepare_mem0_import(data_dir)
            _quiet_extras_notes()
            from mem0 import Memory

            memory = Memory.from_config(
                offline_mem0_config(root, model or _NoExtraction(), embeddings, dimension)
            )
            shared = _instances[key] = _Shared(memory)
        shared.users += 1
        return EmbeddedMem0Backend(
            shared.memory,
            key=key,
            infer=False,
            infer_conversations=model is not None,
            encoder=encoder,
        )

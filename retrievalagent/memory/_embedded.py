"""``memory=True``: a mem0 built from the agent's own model and embeddings, kept on disk.

Everything stays local: mem0's ``langchain`` providers wrap the agent's chat model and
embeddings, its vector store is Qdrant in local mode under the agent's data dir, and its
history database sits beside it. Telemetry is switched off before mem0 is imported (unless
the user chose otherwise), since mem0 otherwise calls out to the network. Without a chat
model mem0 cannot extract facts, so facts are stored as given (``infer=False``).
"""

from __future__ import annotations

import os
import threading
from pathlib import Path
from typing import Any

from langchain_core.embeddings import Embeddings
from langchain_core.language_models import BaseChatModel
from langchain_core.language_models.fake_chat_models import FakeListChatModel

from retrievalagent.memory._mem0 import Mem0Backend

__all__ = ["embedded_mem0", "prepare_mem0_import"]

_lock = threading.Lock()
_instances: dict[str, Any] = {}


def prepare_mem0_import(data_dir: Path | None = None) -> None:
    """Environment mem0 reads at import time: no telemetry, and its home in our data dir."""
    os.environ.setdefault("MEM0_TELEMETRY", "False")
    if data_dir is not None:
        os.environ.setdefault("MEM0_DIR", str(data_dir / "mem0-home"))


class _NoExtraction(FakeListChatModel):
    """Stands in for mem0's LLM when the agent has none; mem0 never calls it (infer=False)."""

    def __init__(self) -> None:
        super().__init__(responses=["{}"])


def embedded_mem0(
    data_dir: Path,
    collection: str,
    model: BaseChatModel | None,
    embeddings: Embeddings,
    dimension: int,
) -> Mem0Backend:
    """The embedded mem0 for ``collection`` (one per data dir and process)."""
    root = data_dir / collection / "mem0"
    key = str(root.resolve())
    with _lock:
        memory = _instances.get(key)
        if memory is None:
            root.mkdir(parents=True, exist_ok=True)
            prepare_mem0_import(data_dir)
            from mem0 import Memory

            memory = Memory.from_config(
                {
                    "llm": {"provider": "langchain", "config": {"model": model or _NoExtraction()}},
                    "embedder": {"provider": "langchain", "config": {"model": embeddings}},
                    "vector_store": {
                        "provider": "qdrant",
                        "config": {
                            "collection_name": "search_hints",
                            "path": str(root / "qdrant"),
                            "embedding_model_dims": dimension,
                            "on_disk": True,
                        },
                    },
                    "history_db_path": str(root / "history.db"),
                }
            )
            _instances[key] = memory
    return Mem0Backend(memory, infer=model is not None)

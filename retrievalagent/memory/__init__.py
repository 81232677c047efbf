"""Long-term memory: recall before retrieval, fire-and-forget writes after grading.

Two backends share one Protocol: mem0 (``mem0_memory=`` or ``memory=True``) and any
LangGraph store (``memory_store=``). mem0 wins when both are given.
"""

from __future__ import annotations

from retrievalagent.memory._background import BackgroundWrites
from retrievalagent.memory._base import (
    DEFAULT_USER,
    MemoryBackend,
    MemoryHit,
    MemoryRecord,
    Recall,
    RecallRequest,
    memory_info,
    user_id_from_config,
)
from retrievalagent.memory._embedded import embedded_mem0, prepare_mem0_import
from retrievalagent.memory._mem0 import Mem0Backend
from retrievalagent.memory._store import NAMESPACE, StoreBackend

__all__ = [
    "DEFAULT_USER",
    "NAMESPACE",
    "BackgroundWrites",
    "Mem0Backend",
    "MemoryBackend",
    "MemoryHit",
    "MemoryRecord",
    "Recall",
    "RecallRequest",
    "StoreBackend",
    "embedded_mem0",
    "memory_info",
    "prepare_mem0_import",
    "user_id_from_config",
]

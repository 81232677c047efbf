"""Conversations and persistence: checkpointers, stores, threads."""

from retrievalagent.persistence._resolve import resolve_checkpointer, resolve_store

__all__ = ["resolve_checkpointer", "resolve_store"]

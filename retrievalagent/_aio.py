"""Bridging sync callers and coroutine-only backends (kept for the memory backends'
imports; the helpers live in :mod:`retrievalagent._threads`)."""

from __future__ import annotations

from retrievalagent._threads import in_thread, run_sync

__all__ = ["in_thread", "run_sync"]

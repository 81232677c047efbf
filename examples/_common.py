"""Shared by the examples: a scratch data directory unless the user chose one."""

from __future__ import annotations

import atexit
import os
import shutil
import tempfile


def scratch_data_dir() -> str:
    """Use ``RAG_DATA_DIR`` if set, else a temporary folder removed at exit.

    The examples create collections; this keeps them out of your real data directory.
    """
    if os.environ.get("RAG_DATA_DIR"):
        return os.environ["RAG_DATA_DIR"]
    path = tempfile.mkdtemp(prefix="retrievalagent-example-")
    os.environ["RAG_DATA_DIR"] = path
    atexit.register(shutil.rmtree, path, ignore_errors=True)
    return path


HANDBOOK = [
    "# Snapshots\n\nA snapshot is taken every six hours. Each snapshot is kept for thirty "
    "days, as long as the retention job is enabled, and then expired.",
    "# Restore\n\nRun `lantern restore SNAPSHOT PATH` to bring files from a snapshot back "
    "into PATH. Restoring never changes the snapshot itself.",
    "# Vault\n\nThe vault is the encrypted folder that holds all snapshots. It is unlocked "
    "with a passphrase; error LF-409 means another process holds the vault lock.",
]

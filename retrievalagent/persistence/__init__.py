"""Conversations and persistence: checkpointers, stores, threads.

Importing this package (which ``import retrievalagent`` does) makes LangGraph's
``from_conn_string`` helpers usable without ``with`` — see
:mod:`retrievalagent.persistence._compat` for exactly what is patched. The PostgreSQL
helpers, ``ThreadInfo`` and ``unpatch_from_conn_string`` are the documented API; the rest
is what the agent keeps its threads and titles with.
"""

from retrievalagent.persistence._compat import (
    AsyncLazyConnection,
    LazyConnection,
    patch_from_conn_string,
    unpatch_from_conn_string,
)
from retrievalagent.persistence._postgres import (
    apostgres_checkpointer,
    apostgres_store,
    postgres_checkpointer,
    postgres_store,
)
from retrievalagent.persistence._resolve import resolve_checkpointer, resolve_store
from retrievalagent.persistence._thread_index import ThreadInfo, Threads
from retrievalagent.persistence._titles import TITLE_CHARS, ThreadTitler, question_title

patch_from_conn_string()

__all__ = [
    "TITLE_CHARS",
    "AsyncLazyConnection",
    "LazyConnection",
    "ThreadInfo",
    "ThreadTitler",
    "Threads",
    "apostgres_checkpointer",
    "apostgres_store",
    "patch_from_conn_string",
    "postgres_checkpointer",
    "postgres_store",
    "question_title",
    "resolve_checkpointer",
    "resolve_store",
    "unpatch_from_conn_string",
]

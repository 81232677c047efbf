"""``retrievalagent memory list|forget USER``: see and erase what the agent remembers.

A user must be able to see what the agent keeps about them and have it erased. The memory
read is the collection's embedded mem0 (``memory=True``, under the data dir) unless
``--store`` names a PostgreSQL store (the ``memory_store=PostgresStore`` of a deployment).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.markup import escape

from retrievalagent.cli._app import CollectionOpt, DataDirOpt, UrlOpt, _agent, _errors
from retrievalagent.errors import ConfigError

__all__ = ["memory_app"]

memory_app = typer.Typer(
    help="See and erase what the agent remembers about a user.", no_args_is_help=True
)
console = Console()

UserArg = Annotated[str, typer.Argument(help="The user id (configurable.user_id).")]
StoreOpt = Annotated[
    str | None,
    typer.Option(
        "--store",
        help="A postgresql:// URL of the PostgresStore holding the memories "
        "(default: the collection's embedded mem0, as memory=True keeps it).",
    ),
]


@contextmanager
def _memory_agent(
    collection: str | None, store: str | None, backend_url: str | None, data_dir: Path | None
) -> Iterator[Any]:
    if store is None:
        with _agent(collection, None, backend_url, data_dir, must_exist=True, memory=True) as rag:
            yield rag
        return
    if not store.startswith(("postgresql://", "postgres://")):
        raise ConfigError(f"--store must be a postgresql:// URL, not {store!r}")
    from langgraph.store.postgres import PostgresStore

    with PostgresStore.from_conn_string(store) as pg:
        pg.setup()
        with _agent(
            collection, None, backend_url, data_dir, must_exist=True, memory_store=pg
        ) as rag:
            yield rag


@memory_app.command("list")
def list_memories(
    user: UserArg,
    collection: CollectionOpt = None,
    store: StoreOpt = None,
    backend_url: UrlOpt = None,
    data_dir: DataDirOpt = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
) -> None:
    """Everything remembered about USER, newest first."""
    with _errors(), _memory_agent(collection, store, backend_url, data_dir) as rag:
        memories = rag.list_memories(user)
    if as_json:
        console.print_json(json.dumps(memories))
        return
    if not memories:
        console.print(f"nothing is remembered about {escape(user)!r}")
        return
    for m in memories:
        kind = "preference" if m["kind"] == "preference" else "search fact"
        console.print(
            f"{escape(m['id'])}  {escape(f'[{kind}]')}  {escape(m['text'])}", soft_wrap=True
        )


@memory_app.command("forget")
def forget(
    user: UserArg,
    memory_id: Annotated[
        str | None, typer.Option("--id", help="Erase only this memory (an id from 'list').")
    ] = None,
    collection: CollectionOpt = None,
    store: StoreOpt = None,
    backend_url: UrlOpt = None,
    data_dir: DataDirOpt = None,
    yes: Annotated[bool, typer.Option("--yes", "-y", help="Do not ask for confirmation.")] = False,
) -> None:
    """Erase one memory of USER (--id), or all of them."""
    if memory_id is None and not yes:
        typer.confirm(f"Erase everything remembered about {user!r}?", abort=True)
    with _errors(), _memory_agent(collection, store, backend_url, data_dir) as rag:
        erased = rag.forget(user, memory_id)
        if memory_id is not None and erased == 0:
            raise ConfigError(f"user {user!r} has no memory with id {memory_id!r}")
    console.print(f"erased {erased} memor{'y' if erased == 1 else 'ies'} of {escape(user)!r}")

"""What the ``retrievalagent`` commands share: the consoles, the common options, one-line
errors, and opening the agent a command works on.

Every command module imports this one and nothing else of ``cli``; ``cli/_app.py`` wires
the commands into the app. Options not given fall back to the ``RAG_*`` environment
variables, exactly as ``init_agent`` does.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated, Any, Literal

import typer
from rich.console import Console
from rich.markup import escape

from retrievalagent.errors import ConfigError

__all__ = [
    "HELP_MARKUP",
    "CollectionOpt",
    "DataDirOpt",
    "ModelOpt",
    "UrlOpt",
    "collection_name",
    "console",
    "debugging",
    "display_path",
    "err",
    "handle_errors",
    "open_agent",
    "print_error",
    "set_debugging",
    "working",
]

#: Help texts are plain text: typer's default reads them as Rich markup, where a bracketed
#: phrase such as ``[ids]`` is a style tag and vanishes from ``--help``.
HELP_MARKUP: Literal["markdown", "rich"] | None = None

console = Console()
err = Console(stderr=True)
_debug = {"on": False}  # --debug, set by the app's callback

CollectionOpt = Annotated[
    str | None,
    typer.Option(
        "--collection", "-c", help="Collection (corpus) name (default: RAG_COLLECTION, else docs)."
    ),
]
ModelOpt = Annotated[
    str | None,
    typer.Option(
        "--model",
        "-m",
        help="Chat model, e.g. 'openai:gpt-5.4' (default: RAG_MODEL, else offline).",
    ),
]
UrlOpt = Annotated[
    str | None,
    typer.Option(
        "--backend-url", help="':memory:' or http(s):// Qdrant URL (default: embedded on disk)."
    ),
]
DataDirOpt = Annotated[Path | None, typer.Option("--data-dir", help="Where embedded indexes live.")]


def set_debugging(on: bool) -> None:
    """``--debug``: errors raise with their traceback instead of printing one line."""
    _debug["on"] = on


def debugging() -> bool:
    """Whether ``--debug`` was given."""
    return _debug["on"]


@contextmanager
def handle_errors() -> Iterator[None]:
    """Any error inside prints as one line and exits with status 1 (``--debug``: raised)."""
    try:
        yield
    except (KeyboardInterrupt, SystemExit, GeneratorExit, typer.Exit, typer.Abort):
        raise
    except BaseException as exc:  # also a native extension's panic (a BaseException)
        if debugging():
            raise
        print_error(exc)
        err.print(
            "[dim](for the traceback, put --debug before the command: "
            "retrievalagent --debug COMMAND ...)[/]",
            soft_wrap=True,
        )
        raise typer.Exit(1) from None


def print_error(exc: BaseException) -> None:
    """``error: <message>`` on stderr, on one line."""
    message = " ".join((str(exc) or type(exc).__name__).split())  # one line, always
    err.print(f"[bold red]error:[/] {escape(message)}", soft_wrap=True)


@contextmanager
def working(message: str) -> Iterator[None]:
    """A spinner on stderr while something slow runs (only on a terminal)."""
    if not err.is_terminal:
        yield
        return
    with err.status(f"[dim]{escape(message)}[/]", spinner="dots"):
        yield


def collection_name(collection: str | None) -> str:
    """``--collection`` as given, else the default collection of the settings."""
    if collection is not None:  # given, even as "": checked by name, never the default
        return collection
    from retrievalagent import Settings

    return Settings.load().default_collection


def open_agent(
    collection: str | None,
    model: str | None,
    backend_url: str | None,
    data_dir: Path | None,
    *,
    must_exist: bool = False,
    **settings: Any,
) -> Any:
    """The agent of a command (options left ``None`` fall back to the settings);
    ``must_exist``: a collection that is not on disk yet is an error, not created."""
    from retrievalagent import Settings, init_agent
    from retrievalagent._build import embedded_index_exists
    from retrievalagent.config import check_collection

    name = check_collection(collection_name(collection))
    if must_exist:  # reading commands must not create an empty embedded index as a side effect
        resolved = Settings.load(backend_url=backend_url, data_dir=data_dir)
        if resolved.backend_url is None and not embedded_index_exists(resolved, name):
            raise ConfigError(
                f"collection {name!r} does not exist in {resolved.data_dir}; run "
                f"'retrievalagent ingest PATH --collection {name}' first"
            )
    return init_agent(
        name,
        model=model,
        backend_url=backend_url,
        data_dir=data_dir,
        **{k: v for k, v in settings.items() if v is not None},
    )


def display_path(source: str, root: str | None = None) -> str:
    """``source`` relative to ``root`` or the current folder when it is under one."""
    for base in (root, os.getcwd()):
        if base and source.startswith(base.rstrip("/") + "/"):
            return source[len(base.rstrip("/")) + 1 :]
    return source

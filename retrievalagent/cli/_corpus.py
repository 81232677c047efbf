"""``retrievalagent ingest|sources|delete``: what a collection holds, added, listed and
removed."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.markup import escape

from retrievalagent.cli._common import (
    CollectionOpt,
    DataDirOpt,
    UrlOpt,
    collection_name,
    console,
    display_path,
    err,
    handle_errors,
    open_agent,
)
from retrievalagent.errors import ConfigError

__all__ = ["delete", "ingest", "sources"]


def ingest(
    paths: Annotated[
        list[str],
        typer.Argument(help="Files or folders (Markdown, text, HTML); each must exist."),
    ],
    collection: CollectionOpt = None,
    backend_url: UrlOpt = None,
    data_dir: DataDirOpt = None,
    meta: Annotated[
        list[str] | None, typer.Option("--meta", help="key=value metadata for every chunk.")
    ] = None,
    keep_missing: Annotated[
        bool,
        typer.Option(
            "--keep-missing",
            help="Keep indexed files that are no longer in a given folder (default: remove).",
        ),
    ] = False,
    rebuild: Annotated[
        bool,
        typer.Option(
            "--rebuild", help="Delete the collection's embedded index first and index anew."
        ),
    ] = False,
) -> None:
    """Index documents into a collection (unchanged files are skipped; a folder is mirrored)."""
    from retrievalagent import IngestInterrupted
    from retrievalagent.ingest import check_paths_exist

    with handle_errors():
        metadata = {}
        for item in meta or []:
            key, sep, value = item.partition("=")
            if not sep or not key:
                raise typer.BadParameter(f"--meta expects key=value, got {item!r}")
            metadata[key] = value
        files = _paths(paths)
        check_paths_exist(files)  # before the collection is created: a typo creates nothing
        if rebuild:
            _drop_embedded_index(collection, backend_url, data_dir)
        report = None
        try:
            with open_agent(collection, None, backend_url, data_dir) as rag:
                err.print(
                    f"[dim]Indexing {escape(', '.join(paths))} into collection "
                    f"{escape(repr(rag.collection))}...[/]",
                    soft_wrap=True,
                )
                try:
                    report = rag.add_documents(
                        files, metadata=metadata or None, keep_missing=keep_missing
                    )
                except IngestInterrupted as stop:
                    err.print(f"[yellow]{escape(str(stop))}[/]", soft_wrap=True)
                    raise typer.Exit(130) from None
                for source in report.removed_sources:
                    err.print(f"[dim]removed (no longer in the folder): {escape(source)}[/]")
                count = rag.count()
                console.print(
                    f"{escape(str(report))}; collection {rag.collection!r} holds {count} chunks"
                )
        except KeyboardInterrupt:
            if report is None:  # before the ingest began: nothing was written
                raise
            # after it: every source was finished, only the summary or the closing was cut
            err.print(
                f"[yellow]interrupted after the ingest finished: {escape(str(report))}[/]",
                soft_wrap=True,
            )
            raise typer.Exit(130) from None


def _paths(arguments: list[str]) -> list[Path]:
    """The command line's PATH arguments as paths: never text, however they read (a
    mistyped folder must be an error, not a sentence in the index)."""
    for argument in arguments:
        if not argument.strip():  # Path("") is the current folder: "$UNSET" must not be
            raise typer.BadParameter("PATH is empty (an unset shell variable?)")
    return [Path(argument) for argument in arguments]


def _drop_embedded_index(
    collection: str | None, backend_url: str | None, data_dir: Path | None
) -> None:
    import shutil

    from retrievalagent import Settings

    settings = Settings.load(backend_url=backend_url, data_dir=data_dir)
    if settings.backend_url is not None:
        raise ConfigError(
            "--rebuild drops the embedded index; on a Qdrant server, delete the collection "
            "there (or 'retrievalagent delete' its sources) instead"
        )
    index = settings.index_dir(collection_name(collection))
    if index.exists():
        shutil.rmtree(index)
        err.print(f"[dim]removed the index at {escape(str(index))}[/]", soft_wrap=True)


def sources(
    collection: CollectionOpt = None, backend_url: UrlOpt = None, data_dir: DataDirOpt = None
) -> None:
    """List the indexed sources and their chunk counts."""
    with (
        handle_errors(),
        open_agent(collection, None, backend_url, data_dir, must_exist=True) as rag,
    ):
        indexed = rag.sources()
        for source, count in sorted(indexed.items()):
            console.print(f"{count:6d}  {escape(display_path(source))}", soft_wrap=True)
        if not indexed:
            err.print(f"[dim]collection {rag.collection!r} holds no sources yet[/]")


def delete(
    source: Annotated[str, typer.Argument(help="A file or folder path, or a source id.")],
    collection: CollectionOpt = None,
    backend_url: UrlOpt = None,
    data_dir: DataDirOpt = None,
) -> None:
    """Remove a source's chunks from a collection (a folder: every file indexed under it)."""
    with (
        handle_errors(),
        open_agent(collection, None, backend_url, data_dir, must_exist=True) as rag,
    ):
        names = rag.sources_under(source)
        if not names:
            raise ConfigError(
                f"nothing indexed in collection {rag.collection!r} is named {source!r}; "
                "'retrievalagent sources' lists what is"
            )
        if len(names) > 1:
            err.print(f"[dim]removing {len(names)} sources under {escape(source)}[/]")
        console.print(f"deleted {rag.delete_documents(source)} chunk(s) of {len(names)} source(s)")

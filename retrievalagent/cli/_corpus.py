"""``retrievalagent ingest|sources|delete``: what a collection holds, added, listed and
removed."""

from __future__ import annotations

import os
import shutil
import signal
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Annotated, Any

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
        typer.Argument(
            metavar="PATH",
            help="Files or folders (Markdown, text, HTML; PDF with pypdf); each must exist.",
        ),
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
        with (
            _rebuilding(collection, backend_url, data_dir, rebuild) as indexed,
            _terminate_as_interrupt(),
        ):
            index = partial(open_agent, collection, None, backend_url, data_dir)
            _ingest_files(index, paths, files, metadata, keep_missing, indexed)


def _ingest_files(
    index: Callable[[], Any],
    paths: list[str],
    files: list[Path],
    metadata: dict[str, str],
    keep_missing: bool,
    indexed: Callable[[], None],
) -> None:
    """The ingest itself into the agent ``index`` opens, with what it says on the terminal;
    ``indexed`` is called once every source is in (a Ctrl-C after it cuts only the summary)."""
    from retrievalagent import IngestInterrupted

    report = None
    try:
        with index() as rag:
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
            indexed()
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


@dataclass(frozen=True)
class _SetAside:
    """An index moved aside by ``--rebuild`` (see ``_rebuilding``)."""

    index: Path
    old: Path

    def drop(self) -> None:
        shutil.rmtree(self.old, ignore_errors=True)
        err.print(f"[dim]replaced the index at {escape(str(self.index))}[/]", soft_wrap=True)

    def put_back(self) -> None:
        shutil.rmtree(self.index, ignore_errors=True)
        self.old.rename(self.index)
        err.print("[yellow]the rebuild did not finish: the previous index is back[/]")


@contextmanager
def _terminate_as_interrupt() -> Iterator[None]:
    """SIGTERM (``docker stop``, ``timeout``, systemd) stops an ingest as Ctrl-C does:
    the sources finished stay, and a rebuild puts the old index back."""

    def interrupt(signum: int, frame: Any) -> None:
        raise KeyboardInterrupt

    try:
        previous = signal.signal(signal.SIGTERM, interrupt)
    except ValueError:  # not the main thread: leave the signal as it is
        yield
        return
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


@contextmanager
def _rebuilding(
    collection: str | None, backend_url: str | None, data_dir: Path | None, rebuild: bool
) -> Iterator[Callable[[], None]]:
    """With ``--rebuild``, the old index moved aside for the block: dropped once the block
    calls what it yields (every source is in), else put back (a failed or interrupted
    rebuild must not leave less than a failed ingest does)."""
    replaced = _set_aside_embedded_index(collection, backend_url, data_dir) if rebuild else None
    built: list[bool] = []
    try:
        yield lambda: built.append(True)
    finally:
        if replaced is not None and built:
            replaced.drop()
        elif replaced is not None:
            replaced.put_back()


def _set_aside_embedded_index(
    collection: str | None, backend_url: str | None, data_dir: Path | None
) -> _SetAside | None:
    from retrievalagent import Settings
    from retrievalagent.index import check_unlocked

    settings = Settings.load(backend_url=backend_url, data_dir=data_dir)
    if settings.backend_url is not None:
        raise ConfigError(
            "--rebuild drops the embedded index; on a Qdrant server, delete the collection "
            "there (or 'retrievalagent delete' its sources) instead"
        )
    index = settings.index_dir(collection_name(collection))
    for left in sorted(index.parent.glob(f"{index.name}.replaced-*")):
        err.print(  # a rebuild killed outright (kill -9) before it finished
            f"[yellow]{escape(str(left))} is the index a stopped rebuild replaced; move it "
            f"back to {escape(index.name)!r} to restore it, or delete it[/]",
            soft_wrap=True,
        )
    if not index.exists():
        return None
    check_unlocked(index)  # a server answering from it keeps it
    old = index.with_name(f"{index.name}.replaced-{os.getpid()}-{time.time_ns()}")
    index.rename(old)
    return _SetAside(index, old)


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

"""The ``retrievalagent`` command: demo, ingest, ask, chat, graph, sources, delete, tune, eval,
memory.

Errors print one line (``--debug`` shows the traceback). Options not given fall back to
the ``RAG_*`` environment variables, exactly as ``init_agent`` does.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.markup import escape
from rich.tree import Tree

from retrievalagent.errors import ConfigError

__all__ = ["app", "main"]

app = typer.Typer(
    name="retrievalagent",
    help="Retrieval agents with long-term memory: hybrid search, cited answers, offline by default.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
console = Console()
err = Console(stderr=True)
_state: dict[str, Any] = {"debug": False}

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

DEMO_COLLECTION = "retrievalagent-demo"


@app.callback()
def _root(
    debug: Annotated[bool, typer.Option("--debug", help="Show tracebacks on errors.")] = False,
) -> None:
    _state["debug"] = debug


@contextmanager
def _errors() -> Iterator[None]:
    try:
        yield
    except (KeyboardInterrupt, SystemExit, GeneratorExit, typer.Exit, typer.Abort):
        raise
    except BaseException as exc:  # also a native extension's panic (a BaseException)
        if _state["debug"]:
            raise
        message = " ".join((str(exc) or type(exc).__name__).split())  # one line, always
        err.print(f"[bold red]error:[/] {escape(message)}", soft_wrap=True)
        err.print(
            "[dim](for the traceback, put --debug before the command: "
            "retrievalagent --debug COMMAND ...)[/]",
            soft_wrap=True,
        )
        raise typer.Exit(1) from None


@contextmanager
def _working(message: str) -> Iterator[None]:
    """A spinner on stderr while something slow runs (only on a terminal)."""
    if not err.is_terminal:
        yield
        return
    with err.status(f"[dim]{escape(message)}[/]", spinner="dots"):
        yield


def _collection(collection: str | None) -> str:
    if collection is not None:  # given, even as "": checked by name, never the default
        return collection
    from retrievalagent import Settings

    return Settings.load().default_collection


def _agent(
    collection: str | None,
    model: str | None,
    backend_url: str | None,
    data_dir: Path | None,
    *,
    must_exist: bool = False,
    **settings: Any,
) -> Any:
    from retrievalagent import Settings, init_agent
    from retrievalagent._build import embedded_index_exists
    from retrievalagent.config import check_collection

    name = check_collection(_collection(collection))
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


def _display_path(source: str, root: str | None = None) -> str:
    for base in (root, os.getcwd()):
        if base and source.startswith(base.rstrip("/") + "/"):
            return source[len(base.rstrip("/")) + 1 :]
    return source


def _print_answer(result: Any, root: str | None = None, trace: bool = False) -> None:
    console.print(escape(result.answer), soft_wrap=True)
    if result.sources:
        console.print("[dim]Sources:[/]")
        for number, src in enumerate(result.sources, 1):
            where = _display_path(src["source"], root)
            heading = " > ".join(src.get("headings") or [])
            suffix = f" — {heading}" if heading else ""
            console.print(
                f"  [cyan][{number}][/] {escape(where)}{escape(suffix)} "
                f"[dim](score {src['score']:.3f})[/]",
                soft_wrap=True,
            )
    grade = result.get("grade") or {}
    if grade.get("sufficient") is False:
        confidence = grade.get("confidence")
        how = f" (confidence {confidence:.2f})" if isinstance(confidence, (int, float)) else ""
        console.print(
            f"[yellow]the agent judged this answer insufficient{how}: your documents may not "
            "cover the question[/]",
            soft_wrap=True,
        )
    if not result.get("llm_used"):
        console.print(
            "[dim]offline mode: an extractive answer from the passages; no LLM was used[/]"
        )
    if trace:
        _print_trace(result.trace)


def _print_trace(events: Sequence[dict[str, Any]]) -> None:
    tree = Tree("[bold]trace[/]")
    for event in events:
        node = event.get("node", "?")
        style = "red" if "error" in event else ("yellow" if "skipped" in event else "green")
        branch = tree.add(f"[{style}]{escape(str(node))}[/]")
        for key, value in event.items():
            if key == "node":
                continue
            text = json.dumps(value, default=str) if not isinstance(value, str) else value
            branch.add(f"[dim]{escape(key)}[/]: {escape(text[:300])}")
    console.print(tree)


@app.command()
def demo(
    question: Annotated[
        list[str] | None,
        typer.Option("--question", "-q", help="Ask this instead of the bundled questions."),
    ] = None,
    data_dir: DataDirOpt = None,
    trace: Annotated[bool, typer.Option("--trace", help="Show each turn's trace.")] = False,
) -> None:
    """Index the bundled sample docs and answer a few questions about them, offline."""
    from retrievalagent import sample_docs_path

    with _errors():
        root = sample_docs_path()
        rag = _agent(DEMO_COLLECTION, None, None, data_dir)
        with rag:
            console.print(f"[bold]Indexing[/] the sample docs in {escape(root)}")
            report = rag.add_documents(root)
            console.print(f"  {escape(str(report))}; the collection holds {rag.count()} chunks\n")
            if not question:
                bundled = json.loads((Path(root) / "questions.json").read_text())
                picks = [q for q in bundled if q.get("demo")] or bundled[:5]
                question = [q["question"] for q in picks]
            for text in question:
                console.rule(f"[bold]{escape(text)}")
                with _working("Searching and answering..."):
                    result = rag.invoke(text)
                _print_answer(result, root, trace)
                console.print()


@app.command()
def ingest(
    paths: Annotated[list[str], typer.Argument(help="Files or folders (Markdown, text, HTML).")],
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

    with _errors():
        metadata = {}
        for item in meta or []:
            key, sep, value = item.partition("=")
            if not sep or not key:
                raise typer.BadParameter(f"--meta expects key=value, got {item!r}")
            metadata[key] = value
        check_paths_exist(paths)  # before the collection is created: a typo creates nothing
        if rebuild:
            _drop_embedded_index(collection, backend_url, data_dir)
        with _agent(collection, None, backend_url, data_dir) as rag:
            err.print(
                f"[dim]Indexing {escape(', '.join(paths))} into collection "
                f"{escape(repr(rag.collection))}...[/]",
                soft_wrap=True,
            )
            try:
                report = rag.add_documents(
                    paths, metadata=metadata or None, keep_missing=keep_missing
                )
            except IngestInterrupted as stop:
                err.print(f"[yellow]{escape(str(stop))}[/]", soft_wrap=True)
                raise typer.Exit(130) from None
            for source in report.removed_sources:
                err.print(f"[dim]removed (no longer in the folder): {escape(source)}[/]")
            console.print(
                f"{escape(str(report))}; collection {rag.collection!r} holds {rag.count()} chunks"
            )


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
    index = settings.index_dir(_collection(collection))
    if index.exists():
        shutil.rmtree(index)
        err.print(f"[dim]removed the index at {escape(str(index))}[/]", soft_wrap=True)


@app.command()
def ask(
    question: Annotated[str, typer.Argument(help="The question.")],
    collection: CollectionOpt = None,
    model: ModelOpt = None,
    backend_url: UrlOpt = None,
    data_dir: DataDirOpt = None,
    top_k: Annotated[int | None, typer.Option("--top-k", help="Passages to answer from.")] = None,
    user: Annotated[
        str | None, typer.Option("--user", help="user_id for long-term memory.")
    ] = None,
    memory: Annotated[bool, typer.Option("--memory", help="Use the embedded mem0 memory.")] = False,
    trace: Annotated[bool, typer.Option("--trace", help="Show the trace as a tree.")] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print the result as JSON.")] = False,
) -> None:
    """Answer one question with citations."""
    with _errors():
        with _agent(
            collection, model, backend_url, data_dir, must_exist=True, top_k=top_k, memory=memory
        ) as rag:
            if rag.count() == 0:
                raise ConfigError(
                    f"collection {rag.collection!r} is empty; run "
                    f"'retrievalagent ingest PATH --collection {rag.collection}' first"
                )
            config = {"configurable": {"user_id": user}} if user else None
            with _working("Searching and answering..."):
                result = rag.invoke(question, config=config)
            if as_json:
                out = {
                    k: v
                    for k, v in result.items()
                    if k
                    in (
                        "question",
                        "answer",
                        "sources",
                        "trace",
                        "memory_context",
                        "memory_fact",
                        "generated_by",
                        "grade",
                    )
                }
                console.print_json(json.dumps(out, default=str))
            else:
                _print_answer(result, trace=trace)


@app.command()
def chat(
    collection: CollectionOpt = None,
    model: ModelOpt = None,
    backend_url: UrlOpt = None,
    data_dir: DataDirOpt = None,
    trace: Annotated[bool, typer.Option("--trace", help="Show each turn's trace.")] = False,
) -> None:
    """Talk with your documents (multi-turn; empty line or Ctrl-D to quit)."""
    from langchain_core.messages import AIMessage, HumanMessage

    with _errors(), _agent(collection, model, backend_url, data_dir, must_exist=True) as rag:
        history: list[Any] = []
        console.print("[dim]Ask a question (empty line to quit).[/]")
        while True:
            try:
                question = console.input("[bold green]you>[/] ").strip()
            except EOFError:
                break
            if not question:
                break
            with _working("Searching and answering..."):
                result = rag.invoke({"messages": [*history, HumanMessage(question)]})
            _print_answer(result, trace=trace)
            history += [HumanMessage(question), AIMessage(result.answer)]


@app.command()
def graph(
    collection: CollectionOpt = None,
    backend_url: Annotated[str, typer.Option("--backend-url")] = ":memory:",
    memory: Annotated[
        bool,
        typer.Option(
            "--memory/--no-memory",
            help="Draw it with a memory backend (recall in parallel) or without one.",
        ),
    ] = True,
) -> None:
    """Print the agent's graph as a Mermaid diagram."""
    from langgraph.store.memory import InMemoryStore

    store: dict[str, Any] = {"memory_store": InMemoryStore()} if memory else {}
    with _errors(), _agent(collection, None, backend_url, None, **store) as rag:
        # raw text (tabs kept), so it can be piped into a .mmd file or a Markdown page
        typer.echo(rag.graph.get_graph().draw_mermaid().rstrip("\n"))


@app.command()
def sources(
    collection: CollectionOpt = None, backend_url: UrlOpt = None, data_dir: DataDirOpt = None
) -> None:
    """List the indexed sources and their chunk counts."""
    with _errors(), _agent(collection, None, backend_url, data_dir, must_exist=True) as rag:
        indexed = rag.sources()
        for source, count in sorted(indexed.items()):
            console.print(f"{count:6d}  {escape(_display_path(source))}", soft_wrap=True)
        if not indexed:
            err.print(f"[dim]collection {rag.collection!r} holds no sources yet[/]")


@app.command()
def delete(
    source: Annotated[str, typer.Argument(help="A file or folder path, or a source id.")],
    collection: CollectionOpt = None,
    backend_url: UrlOpt = None,
    data_dir: DataDirOpt = None,
) -> None:
    """Remove a source's chunks from a collection (a folder: every file indexed under it)."""
    with _errors(), _agent(collection, None, backend_url, data_dir, must_exist=True) as rag:
        names = rag.sources_under(source)
        if not names:
            raise ConfigError(
                f"nothing indexed in collection {rag.collection!r} is named {source!r}; "
                "'retrievalagent sources' lists what is"
            )
        if len(names) > 1:
            err.print(f"[dim]removing {len(names)} sources under {escape(source)}[/]")
        console.print(f"deleted {rag.delete_documents(source)} chunk(s) of {len(names)} source(s)")


from retrievalagent.cli._tune import tune as _tune  # noqa: E402 (memory threshold tuning)

app.command("tune")(_tune)

from retrievalagent.cli._eval import eval_command as _eval  # noqa: E402 (retrieval quality)

app.command("eval")(_eval)

from retrievalagent.cli._memory import memory_app as _memory_app  # noqa: E402

app.add_typer(_memory_app, name="memory")


def main(argv: Sequence[str] | None = None) -> None:
    """Console-script entry point."""
    app(args=list(argv) if argv is not None else None, prog_name="retrievalagent")


if __name__ == "__main__":  # pragma: no cover
    main(sys.argv[1:])

"""``retrievalagent demo|ask|chat|graph``: questions answered from a collection, with
their sources (and the trace on request), and the graph that answers them."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.markup import escape
from rich.tree import Tree

from retrievalagent.cli._common import (
    CollectionOpt,
    DataDirOpt,
    ModelOpt,
    UrlOpt,
    console,
    debugging,
    display_path,
    err,
    handle_errors,
    open_agent,
    print_error,
    working,
)
from retrievalagent.errors import ConfigError

__all__ = ["ask", "chat", "demo", "graph"]

DEMO_COLLECTION = "retrievalagent-demo"


def _print_answer(result: Any, root: str | None = None, trace: bool = False) -> None:
    console.print(escape(result.answer), soft_wrap=True)
    if result.sources:
        console.print("[dim]Sources:[/]")
        for number, src in enumerate(result.sources, 1):
            where = display_path(src["source"], root)
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

    with handle_errors():
        root = sample_docs_path()
        rag = open_agent(DEMO_COLLECTION, None, None, data_dir)
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
                with working("Searching and answering..."):
                    result = rag.invoke(text)
                _print_answer(result, root, trace)
                console.print()


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
    from retrievalagent._inputs import check_id

    with handle_errors():
        with open_agent(
            collection, model, backend_url, data_dir, must_exist=True, top_k=top_k, memory=memory
        ) as rag:
            if rag.count() == 0:
                raise ConfigError(
                    f"collection {rag.collection!r} is empty; run "
                    f"'retrievalagent ingest PATH --collection {rag.collection}' first"
                )
            config = {"configurable": {"user_id": check_id(user, "--user")}} if user else None
            with working("Searching and answering..."):
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


def chat(
    collection: CollectionOpt = None,
    model: ModelOpt = None,
    backend_url: UrlOpt = None,
    data_dir: DataDirOpt = None,
    trace: Annotated[bool, typer.Option("--trace", help="Show each turn's trace.")] = False,
) -> None:
    """Talk with your documents (multi-turn; empty line or Ctrl-D to quit).

    A line that cannot be asked (no words, too long) or a model call that fails is reported,
    and the session goes on; the failed turn is not part of the conversation.
    """
    from langchain_core.messages import AIMessage, HumanMessage

    from retrievalagent.errors import ModelError

    with (
        handle_errors(),
        open_agent(collection, model, backend_url, data_dir, must_exist=True) as rag,
    ):
        history: list[Any] = []
        console.print("[dim]Ask a question (empty line to quit).[/]")
        while True:
            try:
                question = console.input("[bold green]you>[/] ").strip()
            except EOFError:
                break
            if not question:
                break
            try:
                with working("Searching and answering..."):
                    result = rag.invoke({"messages": [*history, HumanMessage(question)]})
            except (ConfigError, ModelError) as exc:  # this turn only: the session goes on
                if debugging():
                    err.print_exception()
                print_error(exc)
                continue
            _print_answer(result, trace=trace)
            history += [HumanMessage(question), AIMessage(result.answer)]


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
    with handle_errors(), open_agent(collection, None, backend_url, None, **store) as rag:
        # raw text (tabs kept), so it can be piped into a .mmd file or a Markdown page
        typer.echo(rag.graph.get_graph().draw_mermaid().rstrip("\n"))

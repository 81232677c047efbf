"""mkdocs hook: fill the generated parts of the docs from the code, at build time.

Pages mark where generated content goes with an HTML comment:

* ``<!-- generated:graph -->`` -- the agent's graph as a Mermaid diagram, drawn from the
  compiled LangGraph of a real agent (``rag.graph.get_graph().draw_mermaid()``);
* ``<!-- generated:env-table -->`` -- the configuration table, from
  ``retrievalagent.config.env_table()``;
* ``<!-- generated:cli-help -->`` -- the command list of ``retrievalagent --help``.

Nothing generated is committed, so the docs cannot drift from the code.
"""

from __future__ import annotations

import functools
import os
import tempfile
from typing import Any

os.environ.setdefault("MEM0_TELEMETRY", "False")

MARKERS = ("graph", "env-table", "cli-help")


@functools.cache
def graph_mermaid() -> str:
    from langgraph.store.memory import InMemoryStore

    from retrievalagent import init_agent

    with tempfile.TemporaryDirectory() as tmp:
        # With a memory backend: the graph as most deployments run it, recall in parallel.
        rag = init_agent(
            "graph", backend_url=":memory:", data_dir=tmp, memory_store=InMemoryStore()
        )
        try:
            return rag.graph.get_graph().draw_mermaid()
        finally:
            rag.close()


def _cell(text: str) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


@functools.cache
def env_table_markdown() -> str:
    from retrievalagent.config import env_table

    lines = [
        "| Environment variable | `init_agent` argument | Default | Accepted | Meaning |",
        "|---|---|---|---|---|",
    ]
    for row in env_table():
        lines.append(
            f"| `{row['env']}` | `{row['setting']}` | `{_cell(row['default'])}` | "
            f"{_cell(row['accepted'])} | {_cell(row['meaning'])} |"
        )
    return "\n".join(lines)


@functools.cache
def cli_help_markdown() -> str:
    import typer.main

    from retrievalagent.cli import app

    group: Any = typer.main.get_command(app)  # typer's own click-compatible group
    ctx = group.make_context("retrievalagent", [], resilient_parsing=True)
    lines = ["| Command | What it does |", "|---|---|"]
    for name in group.list_commands(ctx):
        command = group.get_command(ctx, name)
        if command is None or command.hidden:
            continue
        summary = command.get_short_help_str(limit=200)
        lines.append(f"| `retrievalagent {name}` | {_cell(summary)} |")
    return "\n".join(lines)


def render(marker: str) -> str:
    if marker == "graph":
        return "```mermaid\n" + graph_mermaid().strip() + "\n```"
    if marker == "env-table":
        return env_table_markdown()
    if marker == "cli-help":
        return cli_help_markdown()
    raise ValueError(f"unknown generated marker {marker!r}")


def fill(markdown: str) -> str:
    """Replace every ``<!-- generated:NAME -->`` marker in ``markdown``."""
    for marker in MARKERS:
        tag = f"<!-- generated:{marker} -->"
        if tag in markdown:
            markdown = markdown.replace(tag, render(marker))
    return markdown


def on_page_markdown(markdown: str, page: Any, config: Any, files: Any) -> str:
    return fill(markdown)

"""mkdocs hook: fill the generated parts of the docs from the code, at build time.

Pages mark where generated content goes with an HTML comment:

* ``<!-- generated:graph -->`` -- the agent's graph as a Mermaid diagram, drawn from the
  compiled LangGraph of a real agent (``rag.graph.get_graph().draw_mermaid()``);
* ``<!-- generated:env-table -->`` -- the configuration table, from
  ``retrievalagent.config.env_table()``;
* ``<!-- generated:cli-help -->`` -- the command list of ``retrievalagent --help``;
* ``<!-- generated:trace-table -->`` -- every key of every node's trace event, from the
  TypedDicts of ``retrievalagent.trace`` (``<!-- generated:trace-usage -->``: the keys of
  ``usage``, which several events share).

Nothing generated is committed, so the docs cannot drift from the code.
"""

from __future__ import annotations

import functools
import os
import re
import tempfile
import types
import typing
from typing import Any

os.environ.setdefault("MEM0_TELEMETRY", "False")

MARKERS = ("graph", "env-table", "cli-help", "trace-table", "trace-usage")


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
        also = " ([also per call](#per-call-settings))" if row["per_call"] == "yes" else ""
        lines.append(
            f"| `{row['env']}` | `{row['setting']}`{also} | `{_cell(row['default'])}` | "
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


def _is_typeddict(tp: Any) -> bool:
    return isinstance(tp, type) and hasattr(tp, "__required_keys__")


def _type_text(tp: Any) -> str:
    """An annotation as a reader knows it: ``str``, ``float | None``, ``"thread" | "task"``."""
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if tp is type(None):
        return "None"
    if origin is typing.Literal:
        return " | ".join(f'"{a}"' for a in args)
    if origin in (typing.Union, getattr(types, "UnionType", None)):
        return " | ".join(_type_text(a) for a in args)
    if _is_typeddict(tp):
        return "dict"
    if origin is list:
        return f"list[{_type_text(args[0])}]"
    if origin is dict:
        return f"dict[{_type_text(args[0])}, {_type_text(args[1])}]"
    return getattr(tp, "__name__", str(tp))


def _md(text: str) -> str:
    """A docstring's ``code`` as Markdown's `code`."""
    return re.sub(r"``(.+?)``", r"`\1`", text)


def _shared_types() -> set[Any]:
    """The dicts more than one event holds (``usage``): a table of their own, once."""
    from retrievalagent.trace import EVENTS, fields

    seen: dict[Any, int] = {}
    for event in EVENTS.values():
        for field in fields(event):
            if _is_typeddict(field.type):
                seen[field.type] = seen.get(field.type, 0) + 1
    return {tp for tp, n in seen.items() if n > 1}


def _key_rows(tp: Any, prefix: str, shared: set[Any]) -> list[tuple[str, str, bool, str]]:
    """(key, type, always, meaning) for each key of ``tp``, the keys of the dicts it holds
    following their key (``items[].kind``, ``conversation.exchanges``)."""
    from retrievalagent.trace import fields

    rows = []
    for field in fields(tp):
        key, inner = prefix + field.key, field.type
        if typing.get_origin(inner) is list and _is_typeddict(typing.get_args(inner)[0]):
            inner, suffix, kind = typing.get_args(inner)[0], "[].", "list of dicts"
        else:
            suffix, kind = ".", _type_text(inner)
        if inner in shared:
            kind = f"dict (`{field.key}`, below)"
        rows.append((key, kind, field.always, field.doc))
        if _is_typeddict(inner) and inner not in shared:
            rows += _key_rows(inner, key + suffix, shared)
    return rows


@functools.cache
def trace_table_markdown() -> str:
    from retrievalagent.trace import EVENTS

    shared = _shared_types()
    lines = ["| node | key | type | always | meaning |", "|---|---|---|---|---|"]
    for node, event in EVENTS.items():
        what = _md(" ".join((event.__doc__ or "").split("\n\n")[0].split()))
        what = what.removeprefix(f"`{node}`: ")
        lines.append(f"| `{node}` | `node` | `\"{node}\"` | yes | {_cell(what)} |")
        for key, kind, always, doc in _key_rows(event, "", shared):
            if key == "node":
                continue
            lines.append(
                f"|  | `{key}` | {_cell(kind)} | {'yes' if always else ''} | {_cell(doc)} |"
            )
    return "\n".join(lines)


@functools.cache
def trace_usage_markdown() -> str:
    shared = sorted(_shared_types(), key=lambda tp: tp.__name__)
    lines = ["| key | type | always | meaning |", "|---|---|---|---|"]
    for tp in shared:
        for key, kind, always, doc in _key_rows(tp, "", set()):
            lines.append(f"| `{key}` | {_cell(kind)} | {'yes' if always else ''} | {_cell(doc)} |")
    return "\n".join(lines)


def render(marker: str) -> str:
    if marker == "graph":
        return "```mermaid\n" + graph_mermaid().strip() + "\n```"
    if marker == "env-table":
        return env_table_markdown()
    if marker == "cli-help":
        return cli_help_markdown()
    if marker == "trace-table":
        return trace_table_markdown()
    if marker == "trace-usage":
        return trace_usage_markdown()
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

"""The ``retrievalagent`` command: demo, ingest, ask, chat, graph, sources, delete, tune, eval,
memory.

This module only wires the commands (each lives in its own module and imports the shared
helpers of ``cli/_common.py``, never another command module or this one). Errors print one
line (``--debug`` shows the traceback). Options not given fall back to the ``RAG_*``
environment variables, exactly as ``init_agent`` does.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from typing import Annotated

import typer

from retrievalagent.cli._answer import ask, chat, demo, graph
from retrievalagent.cli._common import HELP_MARKUP, set_debugging
from retrievalagent.cli._corpus import delete, ingest, sources
from retrievalagent.cli._eval import eval_command
from retrievalagent.cli._memory import memory_app
from retrievalagent.cli._tune import tune

__all__ = ["app", "main"]

app = typer.Typer(
    name="retrievalagent",
    help="Retrieval agents with long-term memory: hybrid search, cited answers, offline by default.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode=HELP_MARKUP,
)


@app.callback()
def _root(
    debug: Annotated[bool, typer.Option("--debug", help="Show tracebacks on errors.")] = False,
) -> None:
    set_debugging(debug)


# in this order in --help
for _command in (demo, ingest, ask, chat, graph, sources, delete, tune):
    app.command()(_command)
app.command("eval")(eval_command)  # retrieval quality
app.add_typer(memory_app, name="memory")


def main(argv: Sequence[str] | None = None) -> None:
    """Console-script entry point."""
    app(args=list(argv) if argv is not None else None, prog_name="retrievalagent")


if __name__ == "__main__":  # pragma: no cover
    main(sys.argv[1:])

"""Command-line interface (``retrievalagent --help``)."""

from retrievalagent.cli._app import app, main

__all__ = ["app", "main"]

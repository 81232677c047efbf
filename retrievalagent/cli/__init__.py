"""Command-line interface (``retrievalagent --help``): ``main`` is the console script,
``app`` the Typer app it runs (the docs build reads its commands)."""

from retrievalagent.cli._app import app, main

__all__ = ["app", "main"]

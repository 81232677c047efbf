"""``python -m retrievalagent`` runs the command-line interface."""

from retrievalagent.cli import main

main()

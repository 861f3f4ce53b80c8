"""The `greenspec` command line: a thin shell over `orchestrator.run`, `orchestrator.checks` and `workers`."""

from orchestrator.cli.commands import main

__all__ = ["main"]

"""`python -m orchestrator.cli`: the `greenspec` console script."""

from orchestrator.cli import main

main()

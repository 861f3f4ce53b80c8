"""The `greenspec` command line: a thin shell over `orchestrator.run`, `analysis.checks` and `workers`."""

import os

# One OpenBLAS thread per process, set before numpy loads (the dashboard's server, the driver and its Ray workers
# inherit it): the summaries' bootstrap is thousands of small matrix products, whose BLAS threads spin against each
# other and every other process on a shared machine (a demo database's summary: 10.4 s with them on 2 busy cores,
# 1.2 s without). The work greenspec parallelises, it spreads over processes.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

from orchestrator.cli.commands import main  # noqa: E402 (after the environment it reads)

__all__ = ["main"]

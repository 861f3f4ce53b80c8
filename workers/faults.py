"""Fault injection for the fault-tolerance tests, through the worker's environment (test seam, off by default).

The tests start the accelerator worker with these variables (`RunOptions.worker_env`) to exercise the
driver's crash, retry and kill paths with the real worker; unset, `inject` returns at once.
- `GREENSPEC_FAULT_SLOW=<s>`: sleep before each job (lets a test kill the driver mid-sweep);
- `GREENSPEC_FAULT_CRASH_ONCE=<marker file>`: the worker process dies on its first sweep job;
- `GREENSPEC_FAULT_RAISE=<strategy>`: every job of that strategy raises;
- `GREENSPEC_FAULT_CRASH_ALWAYS=<strategy>`: the worker process dies on every job of that strategy.
"""

from __future__ import annotations

import os
import time

from workers.contracts import SweepJob


def inject(job: SweepJob) -> None:
    """Apply the faults the environment asks for to this job."""
    if slow := os.environ.get("GREENSPEC_FAULT_SLOW"):
        time.sleep(float(slow))
    marker = os.environ.get("GREENSPEC_FAULT_CRASH_ONCE")
    if marker and job.kind == "sweep" and not os.path.exists(marker):
        open(marker, "w").close()
        os._exit(17)  # the worker process dies mid-job, as a segfault or OOM kill would
    if os.environ.get("GREENSPEC_FAULT_CRASH_ALWAYS") == job.strategy and job.strategy:
        os._exit(18)
    if (bad := os.environ.get("GREENSPEC_FAULT_RAISE")) and job.strategy == bad:
        raise RuntimeError(f"injected failure for strategy {bad}")

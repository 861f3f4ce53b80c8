"""Fault injection for the fault-tolerance tests, through the worker's environment (test seam, off by default).

The tests start the accelerator worker with these variables (`RunOptions.worker_env`) to exercise the
driver's crash, retry and kill paths with the real worker; unset, `inject` returns at once.
- `GREENSPEC_FAULT_SLOW=<s>`: sleep before each job (lets a test kill the driver mid-sweep);
- `GREENSPEC_FAULT_CRASH_ONCE=<marker file>`: the worker process dies on its first sweep job;
- `GREENSPEC_FAULT_RAISE=<strategy>`: every job of that strategy raises;
- `GREENSPEC_FAULT_CRASH_ALWAYS=<strategy>`: the worker process dies on every job of that strategy;
- `GREENSPEC_FAULT_CORRUPT=<strategy>`: after decoding, the last token of that strategy's generations is
  flipped (id XOR 1), so a deliberately wrong generation is stored (its text is left as decoded); the tests
  use it to see exact match turn false and the summary figures move.
- `GREENSPEC_FAULT_TRAIN_HANG=<marker file>` (in a node's environment, `ray start`): the first training task on
  that node creates the marker and trains; every later one creates `<marker>.hanging` and sleeps (lets a test kill
  the node mid-training).
"""

from __future__ import annotations

import os
import time
from dataclasses import replace

from workers.contracts import JobOutcome, SweepJob

CRASH_DELAY_S = 0.5  # before a crash: Ray sends the previous batch's reply after it returns, from its own thread


def _crash(code: int) -> None:
    """Die as a segfault or OOM kill would, once the previous batch's result has left: Ray replies to a finished
    actor call asynchronously, so an `os._exit` in the very next call could lose that reply, and the driver would
    charge the finished batch the crash (the oldest unfinished batch is the one charged)."""
    time.sleep(CRASH_DELAY_S)
    os._exit(code)


def inject(job: SweepJob) -> None:
    """Apply the faults the environment asks for to this job."""
    if slow := os.environ.get("GREENSPEC_FAULT_SLOW"):
        time.sleep(float(slow))
    marker = os.environ.get("GREENSPEC_FAULT_CRASH_ONCE")
    if marker and job.kind == "sweep" and not os.path.exists(marker):
        open(marker, "w").close()
        _crash(17)  # the worker process dies mid-job
    if os.environ.get("GREENSPEC_FAULT_CRASH_ALWAYS") == job.strategy and job.strategy:
        _crash(18)
    if (bad := os.environ.get("GREENSPEC_FAULT_RAISE")) and job.strategy == bad:
        raise RuntimeError(f"injected failure for strategy {bad}")


def corrupt(job: SweepJob, outcome: JobOutcome) -> JobOutcome:
    """The outcome with its generation's last token flipped when `GREENSPEC_FAULT_CORRUPT` names the strategy."""
    g = outcome.generation
    if g is None or not g.tokens or not job.strategy or os.environ.get("GREENSPEC_FAULT_CORRUPT") != job.strategy:
        return outcome
    tokens = (*g.tokens[:-1], g.tokens[-1] ^ 1)  # XOR 1 stays a valid id: 31999 -> 31998
    return replace(outcome, generation=replace(g, tokens=tokens))


def inject_training() -> None:
    """Apply `GREENSPEC_FAULT_TRAIN_HANG` to a training task about to start on this node."""
    marker = os.environ.get("GREENSPEC_FAULT_TRAIN_HANG")
    if not marker:
        return
    try:
        os.close(os.open(marker, os.O_CREAT | os.O_EXCL | os.O_WRONLY))  # the first training here goes on
    except FileExistsError:
        open(f"{marker}.hanging", "w").close()
        time.sleep(600)

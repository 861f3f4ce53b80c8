"""Fault injection for the fault-tolerance tests, installed in Ray's workers by the suite (never by production code).

`tests/conftest.py` sets `GREENSPEC_WORKER_SETUP=tests.faults.install`, which every run passes to Ray as its
`worker_process_setup_hook` (`orchestrator.run.ray_startup`): each Ray worker of the tests' runs calls `install` as
it starts. Where none of the variables below is set, `install` does nothing; where one is, it patches the seam once
that module is imported in the worker (never importing torch itself):

- `GREENSPEC_FAULT_SLOW=<s>`: sleep before each accelerator job (lets a test kill the driver mid-sweep);
- `GREENSPEC_FAULT_CRASH_ONCE=<marker file>`: the worker process dies on its first sweep job;
- `GREENSPEC_FAULT_RAISE=<strategy>`: every job of that strategy raises;
- `GREENSPEC_FAULT_CRASH_ALWAYS=<strategy>`: the worker process dies on every job of that strategy;
- `GREENSPEC_FAULT_CORRUPT=<strategy>`: after decoding, the last token of that strategy's generations is flipped
  (id XOR 1), so a deliberately wrong generation is stored (its text is left as decoded); the tests use it to see
  exact match turn false and the summary figures move.
- `GREENSPEC_FAULT_TRAIN_HANG=<marker file>` (in a node's environment, `ray start`): the first training task on that
  node creates the marker and trains; every later one creates `<marker>.hanging` and sleeps (lets a test kill the
  node mid-training).

The tests start the accelerator worker with these variables (`RunOptions.worker_env`), or give them to a driver
process, whose greenspec settings reach its workers (`ray_startup.driver_settings`).
"""

from __future__ import annotations

import functools
import importlib.abc
import os
import sys
import time
from dataclasses import replace

CRASH_DELAY_S = 0.5  # before a crash: Ray sends the previous batch's reply after it returns, from its own thread
RUNNER_FAULTS = ("SLOW", "CRASH_ONCE", "RAISE", "CRASH_ALWAYS", "CORRUPT")
RUNNER = "workers.accelerator.runner"
TRAINING = "workers.training.ray_tasks"


def _crash(code: int) -> None:
    """Die as a segfault or OOM kill would, once the previous batch's result has left: Ray replies to a finished
    actor call asynchronously, so an `os._exit` in the very next call could lose that reply, and the driver would
    charge the finished batch the crash (the oldest unfinished batch is the one charged)."""
    time.sleep(CRASH_DELAY_S)
    os._exit(code)


def _strategy(job) -> str | None:
    """The strategy of a sweep job's cell (None for a reference, label or cost-model job)."""
    return getattr(getattr(job, "cell", None), "strategy", None)


def inject(job) -> None:
    """Apply the faults the environment asks for to this accelerator job (a sweep, label or cost-model job)."""
    strategy = _strategy(job)
    if slow := os.environ.get("GREENSPEC_FAULT_SLOW"):
        time.sleep(float(slow))
    marker = os.environ.get("GREENSPEC_FAULT_CRASH_ONCE")
    if marker and job.kind == "sweep" and not os.path.exists(marker):
        open(marker, "w").close()
        _crash(17)  # the worker process dies mid-job
    if strategy and os.environ.get("GREENSPEC_FAULT_CRASH_ALWAYS") == strategy:
        _crash(18)
    if (bad := os.environ.get("GREENSPEC_FAULT_RAISE")) and strategy == bad:
        raise RuntimeError(f"injected failure for strategy {bad}")


def corrupt(job, outcome):
    """The outcome with its generation's last token flipped when `GREENSPEC_FAULT_CORRUPT` names the strategy."""
    g = outcome.generation
    strategy = _strategy(job)
    if g is None or not g.tokens or not strategy or os.environ.get("GREENSPEC_FAULT_CORRUPT") != strategy:
        return outcome
    tokens = (*g.tokens[:-1], g.tokens[-1] ^ 1)  # XOR 1 stays a valid id: 31999 -> 31998
    return replace(outcome, generation=g.replaced(tokens=tokens))


def hang_training() -> None:
    """Apply `GREENSPEC_FAULT_TRAIN_HANG` to a training task about to start on this node."""
    marker = os.environ["GREENSPEC_FAULT_TRAIN_HANG"]
    try:
        os.close(os.open(marker, os.O_CREAT | os.O_EXCL | os.O_WRONLY))  # the first training here goes on
    except FileExistsError:
        open(f"{marker}.hanging", "w").close()
        time.sleep(600)


def _faulty_runner(module) -> None:
    """`SweepRunner.run` with the faults around it: injected before the job, the corruption after."""
    run = module.SweepRunner.run

    @functools.wraps(run)
    def faulty(self, job):
        inject(job)
        return corrupt(job, run(self, job))

    module.SweepRunner.run = faulty


def _hanging_training(module) -> None:
    """`train_with_energy` (what the training task calls) behind `hang_training`."""
    train = module.train_with_energy

    @functools.wraps(train)
    def hanging(*args, **kwargs):
        hang_training()
        return train(*args, **kwargs)

    module.train_with_energy = hanging


class _AfterImport(importlib.abc.MetaPathFinder):
    """Patch a module the moment it is first imported (so a worker that never imports it never pays for it)."""

    def __init__(self, patches: dict):
        self.patches = patches

    def find_spec(self, name, path, target=None):
        if name not in self.patches:
            return None
        patch = self.patches.pop(name)
        if not self.patches:
            sys.meta_path.remove(self)
        spec = next(s for f in sys.meta_path if f is not self and (s := f.find_spec(name, path, target)))
        exec_module = spec.loader.exec_module

        def exec_and_patch(module):
            exec_module(module)
            patch(module)

        spec.loader.exec_module = exec_and_patch
        return spec


def install() -> None:
    """Ray's worker setup hook: arm the seams the environment's fault variables ask for (none: nothing)."""
    patches = {}
    if any(os.environ.get(f"GREENSPEC_FAULT_{name}") for name in RUNNER_FAULTS):
        patches[RUNNER] = _faulty_runner
    if os.environ.get("GREENSPEC_FAULT_TRAIN_HANG"):
        patches[TRAINING] = _hanging_training
    for name in [n for n in patches if n in sys.modules]:
        patches.pop(name)(sys.modules[name])
    if patches:
        sys.meta_path.insert(0, _AfterImport(patches))

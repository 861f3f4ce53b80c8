"""Starting (or joining) Ray, and the signals around it: SIGTERM stops a run as Ctrl-C does, and a signal that
comes during Ray's start-up lands once it is up (Ray's start-up, interrupted half-way, leaves processes that no
shutdown finds; Ray's core worker, connecting, takes SIGTERM over below Python's handlers, so the signals are
blocked for the whole of `ray.init`, in every thread it starts, and taken from the pending set after it)."""

from __future__ import annotations

import os
import signal
import sys
import threading
from contextlib import contextmanager

from orchestrator.run.options import RunOptions


def ray_initialized() -> bool:
    import ray  # deferred: the CLI imports this module for its signal handling, and most commands need no Ray

    return ray.is_initialized()


_PENDING: list[int] = []  # signals whose KeyboardInterrupt no handler has taken yet


def _interrupt(signum, frame):
    _PENDING.append(signum)
    raise KeyboardInterrupt


@contextmanager
def sticky_interrupts(*signals: int):
    """The given signals raise KeyboardInterrupt, and it stays pending until `interrupt_handled()`: one raised inside
    a gc callback or `__del__` (where Python only prints "Exception ignored") is raised again by the next
    `check_interrupt()`. Main thread only; the previous handlers come back after the block."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = {sig: signal.signal(sig, _interrupt) for sig in signals}
    hook = sys.unraisablehook

    def quiet(unraisable):  # the swallowed interrupt is not lost, so no "Exception ignored" traceback for it
        if not isinstance(unraisable.exc_value, KeyboardInterrupt):
            hook(unraisable)

    sys.unraisablehook = quiet
    try:
        yield
    finally:
        sys.unraisablehook = hook
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def check_interrupt() -> None:
    """Raise KeyboardInterrupt if a signal came whose interrupt was swallowed on the way."""
    if _PENDING:
        raise KeyboardInterrupt


def interrupt_pending() -> bool:
    return bool(_PENDING)


def interrupt_handled() -> None:
    """The interrupt was taken (the run stopped, cells put back): nothing is pending any more."""
    _PENDING.clear()


@contextmanager
def interrupts_deferred():
    """Hold SIGINT and SIGTERM while the block runs and raise KeyboardInterrupt after it if one came (main thread
    only): Ray's start-up, interrupted half-way, leaves processes that no shutdown finds. The signals are blocked
    (not just handled), so the threads the block starts inherit the block and no handler installed inside it (Ray's
    core worker's, Ray's own `sys.exit`) sees them; one that came waits in the pending set and is taken after."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    held = {signal.SIGINT, signal.SIGTERM}
    came: list[int] = []
    previous = {sig: signal.signal(sig, lambda signum, frame: came.append(signum)) for sig in held}
    mask = signal.pthread_sigmask(signal.SIG_BLOCK, held)
    try:
        yield
    finally:
        for sig in sorted(signal.sigpending() & held):
            signal.sigtimedwait([sig], 0)  # taken here, never delivered to whatever handler the block left
            came.append(sig)
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        signal.pthread_sigmask(signal.SIG_SETMASK, mask)
    if came:
        _PENDING.extend(came)
    check_interrupt()


def ray_up(opts: RunOptions) -> bool:
    """Connect to `opts.address` or start a local Ray with the one `accelerator` resource; True if started here."""
    import ray  # deferred (see ray_initialized)

    if ray.is_initialized():
        return False
    os.environ.setdefault("RAY_AUTH_MODE", "disabled")
    # Ray's workers at the driver's own priority (Ray's default: 15 nicer); `nice` greenspec to yield
    os.environ.setdefault("RAY_worker_niceness", "0")
    if opts.address:
        ray.init(address=opts.address, log_to_driver=False, configure_logging=False, runtime_env=worker_runtime_env())
    else:
        # "local": a new Ray here, never a `ray start` cluster that a bare ray.init() would join
        ray.init(
            address="local",
            num_cpus=opts.num_cpus or os.cpu_count(),
            resources={"accelerator": 1},
            include_dashboard=False,
            log_to_driver=False,
            configure_logging=False,
            runtime_env=setup_hook(),
        )  # its workers inherit this process's environment, GREENSPEC_CACHE included
    return True


SETTINGS_PREFIX = "GREENSPEC_"  # greenspec's settings: GREENSPEC_CACHE (workers.files.cache_dir), GREENSPEC_LEASE_S...
SETUP_HOOK = "GREENSPEC_WORKER_SETUP"  # "module.function" every Ray worker of a run calls as it starts


def driver_settings() -> dict[str, str]:
    """The driver's greenspec settings (every GREENSPEC_* variable of its environment), for workers that do not
    inherit it: the accelerator worker (a runtime environment of its own) and the workers of a cluster started
    elsewhere, which then use the driver's cache."""
    return {k: v for k, v in os.environ.items() if k.startswith(SETTINGS_PREFIX) and v}


def setup_hook() -> dict | None:
    """Ray's `worker_process_setup_hook` from `GREENSPEC_WORKER_SETUP` ("module.function", importable where the
    workers run: logging, a profiler, the test suite's fault injection in tests/faults.py), or None."""
    hook = os.environ.get(SETUP_HOOK)
    return {"worker_process_setup_hook": hook} if hook else None


def worker_runtime_env() -> dict | None:
    """The runtime environment of every Ray worker of the driver's job when it joins a cluster started elsewhere
    (whose workers inherit another environment): the driver's settings and setup hook (None: neither is set)."""
    env = setup_hook() or {}
    if settings := driver_settings():
        env["env_vars"] = settings
    return env or None

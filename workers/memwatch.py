"""Resident memory of a training, sampled over its whole process tree, and its share of the machine's CPU time.

`PeakRss` samples, every `interval_s`, the summed RSS of this process and its descendants (a Ray started here
brings its workers), leaving out Ray's own daemons (gcs_server, raylet, dashboard, agents) and idle workers:
"Ray's own ~1 GB" aside. Run inside a Ray worker, it adds the busy workers of the same raylet (the tasks the
training started; on a shared node also any other busy task there: an upper bound).

`CpuShare` measures the CPU seconds the machine spent (all cores, busy time) over a window, so a training that
knows its own CPU seconds (its process plus the tasks it ran) can claim that share of the measured energy.

Example:
    >>> with PeakRss() as peak:
    ...     train()
    >>> peak.peak_bytes
    812_345_344
"""

from __future__ import annotations

import logging
import os
import threading
import time

import psutil

logger = logging.getLogger(__name__)

_RAY_DAEMONS = ("gcs_server", "raylet", "dashboard", "log_monitor", "monitor.py", "runtime_env", "agent")


def _is_ray_daemon(cmdline: list[str]) -> bool:
    text = " ".join(cmdline[:3])
    return any(name in text for name in _RAY_DAEMONS) or text.startswith("ray::IDLE")


def tree_rss_bytes(pid: int | None = None) -> int:
    """Summed RSS of a process, its descendants (Ray daemons and idle workers left out) and busy Ray workers."""
    return sum(_rss(p) for p in _tree_processes(pid))


def _tree_processes(pid: int | None = None) -> list[psutil.Process]:
    """The processes whose memory counts: this one, its non-daemon descendants, busy Ray workers (one scan); none
    once a watched process has exited."""
    try:
        root = psutil.Process(pid or os.getpid())
    except psutil.NoSuchProcess:
        return []
    try:
        procs = [root] + root.children(recursive=True)
    except psutil.Error:
        procs = [root]
    seen, out = set(), []
    for p in procs + list(_busy_sibling_workers(root)):
        try:
            if p.pid in seen or (p.pid != root.pid and _is_ray_daemon(p.cmdline())):
                continue
        except psutil.Error:
            continue
        seen.add(p.pid)
        out.append(p)
    return out


def _rss(p: psutil.Process) -> int:
    try:
        return p.memory_info().rss
    except psutil.Error:
        return 0


def pss_bytes(pid: int) -> int:
    """A process's proportional set size (`Pss:` of /proc/<pid>/smaps_rollup): each shared page divided among the
    processes sharing it, so PSS sums over processes without counting a shared page twice (0 if unreadable)."""
    try:
        with open(f"/proc/{pid}/smaps_rollup") as fh:
            for line in fh:
                if line.startswith("Pss:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return 0


def tree_pss_bytes(pid: int | None = None) -> int:
    """Summed PSS over the processes `tree_rss_bytes` counts."""
    return sum(pss_bytes(p.pid) for p in _tree_processes(pid))


def _busy_sibling_workers(root: psutil.Process):
    """Inside a Ray worker: the other busy workers of the same raylet (the tasks this training started run there)."""
    try:
        parent = root.parent()
        if parent is None or "raylet" not in parent.name():
            return
        for p in parent.children():
            cmd = p.cmdline()
            if p.pid != root.pid and cmd and cmd[0].startswith("ray::") and not cmd[0].startswith("ray::IDLE"):
                yield p
    except psutil.Error:
        return


class PeakRss:
    """A context manager sampling `tree_rss_bytes` in a thread; `peak_bytes` is the largest sample. With `pss`,
    also the tree's PSS (`peak_pss_bytes`; reading smaps_rollup costs more, so only where asked)."""

    RESCAN_S = 2.0  # finding the processes (a scan of the whole process table) is costly: only this often

    def __init__(self, interval_s: float = 0.2, pid: int | None = None, pss: bool = False):
        self.interval_s = interval_s
        self.pid = pid
        self.pss = pss
        self.peak_bytes = 0
        self.peak_pss_bytes = 0
        self._procs: list[psutil.Process] = []
        self._scanned_s = 0.0
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def sample(self, rescan: bool = False) -> int:
        """Take one sample now (also done by the thread); returns it."""
        now = time.monotonic()
        if rescan or now - self._scanned_s >= self.RESCAN_S:
            self._procs, self._scanned_s = _tree_processes(self.pid), now
        rss = sum(_rss(p) for p in self._procs)
        self.peak_bytes = max(self.peak_bytes, rss)
        if self.pss:
            self.peak_pss_bytes = max(self.peak_pss_bytes, sum(pss_bytes(p.pid) for p in self._procs))
        return rss

    def _run(self) -> None:
        while not self._stop.wait(self.interval_s):
            self.sample()

    def __enter__(self) -> PeakRss:
        self.sample(rescan=True)
        self._thread = threading.Thread(target=self._run, name="peak-rss", daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        self.sample(rescan=True)


def machine_busy_cpu_s() -> float:
    """CPU seconds all cores of this machine have spent busy since boot (total minus idle and iowait; guest time is
    already inside user on Linux, so it is not counted twice, as in the estimate's utilisation)."""
    t = psutil.cpu_times()
    return sum(t) - t.idle - getattr(t, "iowait", 0.0) - getattr(t, "guest", 0.0) - getattr(t, "guest_nice", 0.0)

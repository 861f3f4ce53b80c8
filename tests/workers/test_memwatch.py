"""Peak RSS over a process tree (a real child process allocating memory) and the machine's busy CPU seconds."""

from __future__ import annotations

import subprocess
import sys
import time
from collections import namedtuple

import psutil

from workers.memwatch import PeakRss, machine_busy_cpu_s, tree_rss_bytes

HOLD_MB = 200


def test_a_child_process_memory_is_counted():
    # the watched tree: a small parent process and the child it starts, which holds HOLD_MB; measured on its own
    # tree, not the test process's (whose own resident memory moves by more than that on a loaded machine)
    code = f"b = bytearray({HOLD_MB} << 20); import time; time.sleep(4)"  # bytearray pages are written: resident
    parent = subprocess.Popen(
        [sys.executable, "-c", f"import subprocess, sys; subprocess.run([sys.executable, '-c', {code!r}])"]
    )
    with PeakRss(interval_s=0.05, pid=parent.pid) as peak:
        parent.wait()
    assert peak.peak_bytes >= (HOLD_MB << 20) * 0.9


def test_machine_busy_cpu_seconds_grow_with_work():  # the share itself: tests/workers/power/test_power_attribution.py
    before, start = machine_busy_cpu_s(), time.process_time()
    while time.process_time() - start < 0.1:  # ten of the kernel's 10 ms ticks: the counters move by whole ticks
        sum(i * i for i in range(10_000))
    assert machine_busy_cpu_s() - before >= 0.05


def test_pss_divides_pages_shared_with_a_forked_child():
    import os

    from workers.memwatch import pss_bytes, tree_pss_bytes

    shared = bytearray(HOLD_MB << 20)  # written: resident, then shared copy-on-write with the child
    alone = pss_bytes(os.getpid())
    pid = os.fork()
    if pid == 0:
        time.sleep(3)
        os._exit(0)
    try:
        time.sleep(0.5)
        both = pss_bytes(os.getpid())
        assert 0 < both < alone - (HOLD_MB << 20) * 0.4  # half of each shared page is the child's now
        assert tree_pss_bytes() < tree_rss_bytes()  # RSS counts the shared pages in both processes
    finally:
        os.waitpid(pid, 0)
    del shared


def test_machine_busy_cpu_seconds_count_guest_time_once(monkeypatch):
    times = namedtuple("LinuxTimes", "user nice system idle iowait irq softirq steal guest guest_nice")
    # user 10 (3 of them guest, 1 guest_nice), system 2, idle 50, iowait 5: 12 busy CPU s
    monkeypatch.setattr(psutil, "cpu_times", lambda: times(10.0, 0.0, 2.0, 50.0, 5.0, 0.0, 0.0, 0.0, 3.0, 1.0))
    assert machine_busy_cpu_s() == 12.0

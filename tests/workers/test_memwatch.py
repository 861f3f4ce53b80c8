"""Peak RSS over a process tree (a real child process allocating memory) and the CPU-time share."""

from __future__ import annotations

import subprocess
import sys
import time

from workers.memwatch import PeakRss, cpu_share, machine_busy_cpu_s, tree_rss_bytes

HOLD_MB = 200


def test_a_child_process_memory_is_counted():
    alone = tree_rss_bytes()
    code = f"b = bytearray({HOLD_MB} << 20); import time; time.sleep(4)"  # bytearray pages are written: resident
    with PeakRss(interval_s=0.05) as peak:
        child = subprocess.Popen([sys.executable, "-c", code])
        time.sleep(2)
        child.wait()
    assert peak.peak_bytes >= alone + (HOLD_MB << 20) * 0.9


def test_cpu_share_is_a_clipped_ratio():
    before = machine_busy_cpu_s()
    sum(i * i for i in range(200_000))
    assert machine_busy_cpu_s() > before
    assert cpu_share(1.0, 4.0) == 0.25 and cpu_share(5.0, 4.0) == 1.0 and cpu_share(1.0, 0.0) == 1.0


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

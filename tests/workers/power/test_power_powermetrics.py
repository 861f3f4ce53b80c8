"""macOS powermetrics: the pure parser on recorded output, and the streaming source on a replayed recording."""

from __future__ import annotations

import sys
import time

import pytest

from workers.errors import PowerError
from workers.power import PowermetricsSource, parse_powermetrics
from workers.power.powermetrics import powermetrics_command

# Two blocks as `powermetrics --samplers cpu_power,gpu_power -i 100` prints them on an M1 Pro (trimmed
# per-CPU lines); the GPU section repeats "GPU Power", which must not be counted twice.
APPLE_SILICON = """\
Machine model: MacBookPro18,3
OS version: 23A344
Boot arguments:
Boot time: Mon Oct  2 09:10:57 2023



*** Sampled system activity (Tue Oct  3 10:41:11 2023 +0200) (102.87ms elapsed) ***


**** Processor usage ****

E-Cluster HW active frequency: 1325 MHz
E-Cluster HW active residency:  54.43% (600 MHz:   0% 972 MHz:  50% 1332 MHz:  24% 1704 MHz:  13% 2064 MHz:  13%)
E-Cluster idle residency:  45.57%
CPU 0 frequency: 1340 MHz
CPU 0 active residency:  44.46% (600 MHz:   0% 972 MHz:  21% 1332 MHz: 9.5% 1704 MHz: 7.1% 2064 MHz: 6.7%)
CPU 0 idle residency:  55.54%
P0-Cluster HW active frequency: 1184 MHz
P0-Cluster HW active residency:  12.31% (600 MHz:  71% 828 MHz: 0.0% 1056 MHz: 2.1% 3228 MHz: 4.4%)
P0-Cluster idle residency:  87.69%

CPU Power: 1234 mW
GPU Power: 56 mW
ANE Power: 0 mW
Combined Power (CPU + GPU + ANE): 1290 mW

**** GPU usage ****

GPU HW active frequency: 389 MHz
GPU HW active residency:   4.02% (389 MHz: 4.0% 486 MHz:   0% 648 MHz:   0%)
GPU SW requested state: (P1 : 100% P2 :   0% P3 :   0%)
GPU idle residency:  95.98%
GPU Power: 56 mW


*** Sampled system activity (Tue Oct  3 10:41:11 2023 +0200) (101.02ms elapsed) ***


**** Processor usage ****

E-Cluster HW active frequency: 1498 MHz
CPU Power: 8916 mW
GPU Power: 9462 mW
ANE Power: 0 mW
Combined Power (CPU + GPU + ANE): 18378 mW

**** GPU usage ****

GPU HW active frequency: 1296 MHz
GPU Power: 9462 mW

"""

INTEL = """\
*** Sampled system activity (Wed Oct  4 12:00:00 2023 +0200) (1003.10ms elapsed) ***

**** Processor usage ****

Intel energy model derived package power (CPUs+GT+SA): 48.61W

LLC flushed residency: 12.3%
"""

NO_COMBINED = """\
*** Sampled system activity (Wed Oct  4 12:00:00 2023 +0200) (100.00ms elapsed) ***
CPU Power: 700 mW
GPU Power: 300 mW
ANE Power: 0 mW

**** GPU usage ****
GPU Power: 300 mW
"""


def test_parser_reads_combined_power_per_block_in_watts():
    assert parse_powermetrics(APPLE_SILICON) == pytest.approx([1.290, 18.378])


def test_parser_handles_intel_macs_and_blocks_without_the_combined_line():
    assert parse_powermetrics(INTEL) == pytest.approx([48.61])
    assert parse_powermetrics(NO_COMBINED) == pytest.approx([1.0])  # the GPU section's repeat is not added
    assert parse_powermetrics("Machine model: Mac14,2\n") == []


def replay(text: str, then_sleep_s: float = 30.0) -> list[str]:
    """A command that prints `text` block by block like powermetrics, then stays alive until terminated."""
    script = (
        "import sys, time\n"
        f"text = {text!r}\n"
        "for i, part in enumerate(text.split('*** Sampled')):\n"
        "    sys.stdout.write(('*** Sampled' if i else '') + part); sys.stdout.flush(); time.sleep(0.05)\n"
        f"time.sleep({then_sleep_s})\n"
    )
    return [sys.executable, "-c", script]


def test_streaming_source_reports_the_latest_block():
    src = PowermetricsSource(replay(APPLE_SILICON))
    try:
        assert src.name == "powermetrics" and src.measured is True
        first = src.read().power_w
        assert first in (pytest.approx(1.290), pytest.approx(18.378))
        deadline = time.time() + 3.0
        while src.read().power_w != pytest.approx(18.378) and time.time() < deadline:
            time.sleep(0.02)
        r = src.read()
        assert r.power_w == pytest.approx(18.378) and r.energy_j is None
    finally:
        src.close()
    assert src._proc.poll() is not None  # the child process is gone


def test_sudo_refusal_is_a_one_line_error_with_its_reason():
    cmd = [sys.executable, "-c", "import sys; sys.stderr.write('sudo: a password is required\\n'); sys.exit(1)"]
    with pytest.raises(PowerError, match="a password is required") as err:
        PowermetricsSource(cmd)
    assert "\n" not in str(err.value) and "NOPASSWD" in str(err.value)
    with pytest.raises(PowerError, match="cannot be started"):
        PowermetricsSource(["/nonexistent/sudo", "-n", "powermetrics"])


def test_open_outside_macos_names_the_platform(monkeypatch):
    monkeypatch.setattr("workers.power.powermetrics.platform.system", lambda: "Linux")
    with pytest.raises(PowerError, match="macOS only"):
        PowermetricsSource.open()
    assert powermetrics_command(100)[:3] == ["sudo", "-n", "powermetrics"]

"""macOS `powermetrics`: combined CPU + GPU + ANE power, as the paper measured it.

powermetrics needs root; greenspec runs `sudo -n` (never prompts) and fails with a one-line PowerError
if sudo would ask for a password (allow it with a sudoers NOPASSWD rule for /usr/bin/powermetrics).
One streaming process (`-i <ms>`, no `-n`) runs for the life of the source; a reader thread parses each
sample block as it arrives and `read()` returns the latest one, so reads never block for an interval.
The parser is a pure function over text (`parse_powermetrics`).
"""

from __future__ import annotations

import logging
import os
import platform
import re
import shutil
import subprocess
import threading
import time

from workers.errors import PowerError
from workers.power.base import PowerSource, Reading

logger = logging.getLogger(__name__)

BLOCK_START = "*** Sampled system activity"
_COMBINED = re.compile(r"^Combined Power \(CPU \+ GPU \+ ANE\):\s*([\d.]+)\s*mW", re.M)
_INTEL_PACKAGE = re.compile(r"^Intel energy model derived package power \(CPUs\+GT\+SA\):\s*([\d.]+)\s*W", re.M)
_PARTS = re.compile(r"^(CPU|GPU|ANE) Power:\s*([\d.]+)\s*mW", re.M)
STARTUP_TIMEOUT_S = 5.0


def block_power_w(block: str) -> float | None:
    """Watts of one sample block: the Combined line, else the Intel package line, else CPU+GPU+ANE; None if absent."""
    if m := _COMBINED.search(block):
        return float(m.group(1)) * 1e-3
    if m := _INTEL_PACKAGE.search(block):
        return float(m.group(1))
    parts: dict[str, float] = {}
    for kind, mw in _PARTS.findall(block):
        parts.setdefault(kind, float(mw))  # first occurrence: the summary block, not the GPU section repeat
    return sum(parts.values()) * 1e-3 if parts else None


def parse_powermetrics(text: str) -> list[float]:
    """Watts of each sample block in powermetrics text output, in order (blocks without power skipped)."""
    blocks = text.split(BLOCK_START)[1:] if BLOCK_START in text else [text]
    return [w for w in (block_power_w(b) for b in blocks) if w is not None]


def powermetrics_command(interval_ms: int) -> list[str]:
    """The streaming command: sudo without a prompt, CPU and GPU power samplers, one block per interval."""
    # -b 1: line-buffered output, or a pipe delays each block by a buffer's worth of text
    return ["sudo", "-n", "powermetrics", "--samplers", "cpu_power,gpu_power", "-i", str(interval_ms), "-b", "1"]


class PowermetricsSource(PowerSource):
    """Combined CPU+GPU+ANE watts from a streaming powermetrics process; each read returns the latest block."""

    name = "powermetrics"
    measured = True

    def __init__(self, command: list[str], startup_timeout_s: float = STARTUP_TIMEOUT_S):
        self.command = command
        self.detail = "combined CPU+GPU+ANE power"
        self._latest: Reading | None = None
        self._eof = False
        self._cond = threading.Condition()
        try:
            self._proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        except OSError as err:
            raise PowerError(f"powermetrics cannot be started ({command[0]}): {err.strerror or err}") from err
        self._thread = threading.Thread(target=self._pump, name="powermetrics-reader", daemon=True)
        self._thread.start()
        self._wait_first(startup_timeout_s)

    @classmethod
    def open(cls, interval_ms: int = 100) -> PowermetricsSource:
        """Start powermetrics on macOS; PowerError when not macOS, not installed, or sudo needs a password."""
        if platform.system() != "Darwin":
            raise PowerError(f"powermetrics is macOS only (this is {platform.system()})")
        if shutil.which("powermetrics") is None and not os.path.exists("/usr/bin/powermetrics"):
            raise PowerError("powermetrics not found on PATH or at /usr/bin/powermetrics")
        return cls(powermetrics_command(interval_ms))

    def _pump(self) -> None:
        """Reader thread: publish a block's watts at its Combined line, or at its end for older formats."""
        block: list[str] = []
        published = False
        for line in self._proc.stdout:
            if line.startswith(BLOCK_START):
                if block and not published:
                    self._publish("".join(block))
                block, published = [], False
            block.append(line)
            if not published and _COMBINED.match(line):
                self._publish(line)
                published = True
        if block and not published:
            self._publish("".join(block))
        with self._cond:
            self._eof = True  # powermetrics exited (or sudo refused): wake a waiting open()
            self._cond.notify_all()

    def _publish(self, block: str) -> None:
        """Record one block's watts as the latest reading, stamped when it was parsed."""
        watts = block_power_w(block)
        if watts is None:
            return
        with self._cond:
            self._latest = Reading(t_s=time.time(), power_w=watts)
            self._cond.notify_all()

    def _wait_first(self, timeout_s: float) -> None:
        """Block until the first sample arrives; PowerError (with powermetrics' own words) if it never does."""
        with self._cond:
            self._cond.wait_for(lambda: self._latest is not None or self._eof, timeout_s)
            ok = self._latest is not None
        if ok:
            return
        self._stop_process()
        err = (self._proc.stderr.read() if self._proc.stderr else "").strip().splitlines()
        self.close()
        why = err[-1] if err else f"no power sample within {timeout_s:.0f} s"
        raise PowerError(
            f"powermetrics did not start ({' '.join(self.command)}): {why}; allow it with a sudoers NOPASSWD rule"
        )

    def read(self) -> Reading:
        """The latest block's watts, stamped now (powermetrics reports the mean over its last interval)."""
        if self._proc.poll() is not None:
            raise PowerError(f"powermetrics exited with code {self._proc.returncode} while sampling")
        with self._cond:
            latest = self._latest
        return Reading(t_s=time.time(), power_w=latest.power_w)

    def _stop_process(self) -> None:
        """Terminate powermetrics (sudo forwards the signal), killing it if it lingers."""
        if self._proc.poll() is None:
            self._proc.terminate()
            try:
                self._proc.wait(timeout=2.0)
            except subprocess.TimeoutExpired:
                self._proc.kill()
                self._proc.wait()

    def close(self) -> None:
        """Stop the powermetrics process and its reader."""
        self._stop_process()
        self._thread.join(timeout=2.0)
        for stream in (self._proc.stdout, self._proc.stderr):
            if stream is not None and not stream.closed:
                stream.close()

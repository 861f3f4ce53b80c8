"""RAPL (Linux CPU package and DRAM energy) from the powercap sysfs tree.

The tree lives at `$GREENSPEC_RAPL_ROOT` (default /sys/class/powercap): one `intel-rapl:N` zone per CPU
package, each with an optional `dram` subzone (`intel-rapl:N:M/name == "dram"`). Package and DRAM are
disjoint, so they are summed; the `core`/`uncore` subzones are parts of the package and are skipped,
as is a `psys` zone (the whole platform, which would count the package twice). `energy_uj` is a counter
in microjoules that wraps at `max_energy_range_uj`; reading at 1 Hz or faster stays far inside one
wrap period (2^32 uJ is ~43 s at 100 W on the smallest counters).

Since 2020 (CVE-2020-8694) `energy_uj` is readable by root only on most distributions.
"""

from __future__ import annotations

import logging
import os
import re
import time
from dataclasses import dataclass
from pathlib import Path

from workers.errors import PowerError
from workers.power.base import PowerFromCounter, PowerSource, Reading, WrappingCounter

logger = logging.getLogger(__name__)

DEFAULT_ROOT = "/sys/class/powercap"
_PACKAGE = re.compile(r"^intel-rapl:\d+$")  # excludes intel-rapl-mmio:*, a second view of the package
_SUBZONE = re.compile(r"^intel-rapl:\d+:\d+$")


def rapl_root() -> Path:
    """The powercap root: `$GREENSPEC_RAPL_ROOT` or /sys/class/powercap."""
    return Path(os.environ.get("GREENSPEC_RAPL_ROOT") or DEFAULT_ROOT)


@dataclass(frozen=True)
class Zone:
    """One RAPL zone to count: its label (e.g. "package-0", "package-0/dram") and sysfs directory."""

    label: str
    path: Path


def _read_text(path: Path) -> str:
    """One sysfs attribute, stripped; PowerError naming the file when it cannot be read."""
    try:
        return path.read_text().strip()
    except PermissionError as err:
        raise PowerError(
            f"RAPL counter {path} is not readable (root only since CVE-2020-8694); run as root or chmod a+r it"
        ) from err
    except OSError as err:
        raise PowerError(f"RAPL file {path} cannot be read: {err.strerror or err}") from err


def _read_int(path: Path) -> int:
    """An integer sysfs attribute; PowerError naming the file on junk."""
    text = _read_text(path)
    try:
        return int(text)
    except ValueError:
        raise PowerError(f"RAPL file {path} holds {text!r}, expected an integer") from None


def find_zones(root: Path) -> list[Zone]:
    """The package zones under `root` and their dram subzones, in sorted order."""
    if not root.is_dir():
        raise PowerError(f"no RAPL powercap tree at {root} (set GREENSPEC_RAPL_ROOT to its location)")
    zones = []
    for pkg in sorted(p for p in root.iterdir() if _PACKAGE.match(p.name)):
        name = _read_text(pkg / "name") if (pkg / "name").exists() else pkg.name
        if name == "psys":
            continue
        zones.append(Zone(name, pkg))
        for sub in sorted(p for p in pkg.iterdir() if _SUBZONE.match(p.name)):
            if (sub / "name").exists() and _read_text(sub / "name") == "dram":
                zones.append(Zone(f"{name}/dram", sub))
    if not zones:
        raise PowerError(f"no intel-rapl:N package zone under {root}")
    return zones


class RaplSource(PowerSource):
    """CPU package + DRAM energy summed over every package, from wrap-corrected `energy_uj` counters."""

    name = "rapl"
    measured = True

    def __init__(self, zones: list[Zone]):
        self.zones = zones
        self._counters = [WrappingCounter(_read_int(z.path / "max_energy_range_uj")) for z in zones]
        self._power = PowerFromCounter()
        self.detail = ", ".join(z.label for z in zones)
        self.clock = time.time  # epoch seconds; a test may set its own (the sampler's)
        self.read()  # prime the counters: energy counts from open

    @classmethod
    def open(cls, root: Path | str | None = None) -> RaplSource:
        """Open every package and dram zone under `root` (default: `rapl_root()`)."""
        return cls(find_zones(Path(root) if root is not None else rapl_root()))

    def read(self) -> Reading:
        """Joules since open over all zones, and mean watts since the previous read."""
        t_s = self.clock()
        total_uj = sum(c.update(_read_int(z.path / "energy_uj")) for z, c in zip(self.zones, self._counters))
        energy_j = total_uj * 1e-6
        return Reading(t_s=t_s, power_w=self._power.update(t_s, energy_j), energy_j=energy_j)

"""The verifier's pass-cost curve (the paper's section 5.1 cost model): stored as JSON, one file per verifier,
device and regime, in the greenspec cache (`$GREENSPEC_CACHE/cost-curves`). No torch here: the dashboard reads it.

Example:
    >>> costs = PassCosts("smollm2", "cpu", "cached", 60, (0.031, 0.031, 0.036, 0.040))
    >>> round(costs.break_even(2), 3)     # the per-token acceptance a 2-token draft needs to pay for its pass
    0.141
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
from dataclasses import asdict, dataclass
from pathlib import Path

logger = logging.getLogger(__name__)

CURVE_DIR = "cost-curves"


@dataclass(frozen=True)
class PassCosts:
    """The pass-cost curve of one verifier, device and regime: `seconds[n]` for a pass over n draft tokens."""

    verifier: str
    device: str
    regime: str
    context_tokens: int
    seconds: tuple[float, ...]  # the fitted line's c(n), n = 0, 1, ...
    energy_from: str = "time x one mean power"
    measured: tuple[float, ...] = ()  # the median measured pass per length, beside the line

    def cost(self, n: int) -> float:
        """c(n), extrapolated linearly past the measured lengths."""
        s = self.seconds
        if n < len(s):
            return s[n]
        slope = (s[-1] - s[0]) / max(1, len(s) - 1)
        return s[-1] + slope * (n - len(s) + 1)

    def break_even(self, n: int) -> float:
        """The acceptance a chain of n needs to pay for its longer pass (per-token, geometric): the a with
        (1 + a + ... + a^n) / c(n) = 1 / c(0)."""
        lo, hi = 0.0, 1.0
        for _ in range(40):
            a = (lo + hi) / 2
            gain = sum(a**i for i in range(n + 1)) / self.cost(n) - 1 / self.cost(0)
            lo, hi = (a, hi) if gain < 0 else (lo, a)
        return hi


def verifier_name(verifier) -> str:
    """A verifier's identity for its curve (and its pass-cost model): the model's name or path and its dtype."""
    return f"{getattr(verifier.model.config, '_name_or_path', '?')}:{verifier.dtype}"


def curve_key(verifier: str, device: str, regime: str) -> str:
    """The file stem of a curve."""
    digest = hashlib.sha256(f"{verifier}|{device}|{regime}".encode()).hexdigest()[:16]
    return f"{regime}-{digest}"


def curve_dir() -> Path:
    """Where curves are cached: the greenspec cache's `cost-curves` folder."""
    from workers.files import cache_dir

    return cache_dir() / CURVE_DIR


def save_curve(costs: PassCosts, folder: Path | None = None) -> Path:
    """Write a curve atomically; returns its path."""
    folder = folder or curve_dir()
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{curve_key(costs.verifier, costs.device, costs.regime)}.json"
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(asdict(costs)))
    os.replace(tmp, path)
    return path


def load_curves(folder: Path | None = None) -> list[PassCosts]:
    """Every cached curve (unreadable files are skipped with a warning)."""
    folder = folder or curve_dir()
    out = []
    for path in sorted(folder.glob("*.json")) if folder.exists() else []:
        try:
            raw = json.loads(path.read_text())
            raw |= {"seconds": tuple(raw["seconds"]), "measured": tuple(raw.get("measured", ()))}
            out.append(PassCosts(**raw))
        except (OSError, ValueError, TypeError) as err:
            logger.warning("cost curve %s unreadable: %s", path, err)
    return out

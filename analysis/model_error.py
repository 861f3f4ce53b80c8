"""The round-cost table's validated error inside every replayed speed interval.

A replayed row's tokens/s, speedup, J per 100 tokens and energy ratio are predictions. Their 95% interval over prompts
says how much the prompts vary, not how far the table is off; the validation does (`storage.validation.prediction_pairs`:
generations both timed and replayed, per regime and width band). Per (regime, band) the error is the 95% bootstrap
interval [b_lo, b_hi] of the median of ln(predicted / measured tokens/s) over its pairs (pairs resampled, seeded). A
replayed figure's interval is then widened by it, as if the truth were the prediction over e^b for any b in it:

- tokens/s: [lo / e^b_hi, hi / e^b_lo]; J per 100 tokens (time x power): [lo e^b_lo, hi e^b_hi];
- speedup and energy ratio (against plain in the same regime, itself predicted): the band's error less plain's,
  [b_lo - p_hi, b_hi - p_lo], applied as to tokens/s.

A band or a plain with fewer than `MIN_PAIRS` validation pairs has no known error: its replayed speed figures keep
their point but lose their interval (blank bounds), so every verdict on them is inconclusive, and the note says so.

Example (hand-worked in tests/analysis/test_model_error.py):
    >>> bounds = error_bounds(pairs)       # {(regime, band): (b_lo, b_hi, pairs)}
    >>> widened = with_model_error(summary, bounds)
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from workers.decoding.passes import width_band

MIN_PAIRS = 3  # validation pairs a band needs before its error is known
N_BOOT = 2000
SEED = 0
SPEED = ("tokens_per_s", "speedup", "energy_ratio")  # figures that scale as the predicted speed
TIME = ("j_per_100_tokens",)  # figures that scale as the predicted time


def median_interval(values: np.ndarray, seed: int = SEED, n_boot: int = N_BOOT) -> tuple[float, float]:
    """The 95% percentile bootstrap interval of the median of `values`."""
    rng = np.random.default_rng(seed)
    draws = rng.choice(values, size=(n_boot, len(values)), replace=True)
    lo, hi = np.percentile(np.median(draws, axis=1), [2.5, 97.5])
    return float(lo), float(hi)


def error_bounds(pairs: pd.DataFrame) -> dict[tuple[str, str], tuple[float, float, int]]:
    """Per (regime, band) with at least MIN_PAIRS pairs: the interval of the median ln(predicted / measured)
    tokens/s, and the pairs behind it."""
    out = {}
    if pairs.empty:
        return out
    logs = pairs.assign(log_error=np.log1p(pairs["bias"].astype(float)))
    for (regime, band), g in logs.groupby(["regime", "band"]):
        if len(g) >= MIN_PAIRS:
            out[(regime, band)] = (*median_interval(g["log_error"].to_numpy()), len(g))
    return out


def _row_bounds(row, band: str, bounds) -> tuple | None:
    """The row's band's error bounds and its plain's, or None when either is not known."""
    own, plain = bounds.get((row["regime"], band)), bounds.get((row["regime"], "plain"))
    return None if own is None or plain is None else (own, plain)


def _note(row, known, band: str) -> str:
    """The row's note with the model error's, joined."""
    if known is None:
        extra = f"replayed speed: no validated model error for {row['regime']} {band} (or its plain): no interval"
    else:
        (lo, hi, n), _ = known
        extra = f"replayed speed interval includes the cost table's error ({band}: {math.expm1(lo):+.1%} to "
        extra += f"{math.expm1(hi):+.1%}, {n} pairs)"
    note = row.get("note")
    return extra if note is None or (isinstance(note, float) and math.isnan(note)) or not note else f"{note}; {extra}"


def with_model_error(df: pd.DataFrame, bounds: dict) -> pd.DataFrame:
    """The summary with every replayed row's speed intervals widened by its (regime, band) error (module doc)."""
    if df.empty or "measure" not in df or not (df["measure"] == "replay").any():
        return df
    out = df.copy()
    for i, row in out[out["measure"] == "replay"].iterrows():
        band = width_band(str(row["strategy"]), int(row["k"] or 0))
        known = _row_bounds(row, band, bounds)
        out.at[i, "note"] = _note(row, known, band)
        if known is None:
            for name in (*SPEED, *TIME):
                out.at[i, f"{name}_lo"] = out.at[i, f"{name}_hi"] = np.nan
            continue
        (b_lo, b_hi, _), (p_lo, p_hi, _) = known
        ratio = (b_lo - p_hi, b_hi - p_lo)
        scaled = [("tokens_per_s", (b_lo, b_hi))]
        scaled += [] if band == "plain" else [("speedup", ratio), ("energy_ratio", ratio)]  # plain's are 1 exactly
        for name, (lo, hi) in scaled:
            out.at[i, f"{name}_lo"] = row[f"{name}_lo"] / math.exp(hi)
            out.at[i, f"{name}_hi"] = row[f"{name}_hi"] / math.exp(lo)
        out.at[i, "j_per_100_tokens_lo"] = row["j_per_100_tokens_lo"] * math.exp(b_lo)
        out.at[i, "j_per_100_tokens_hi"] = row["j_per_100_tokens_hi"] * math.exp(b_hi)
    return out

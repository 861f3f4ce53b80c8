"""The summary's 95% intervals per cell: a seeded bootstrap over the cell's prompts (`analysis.stats`) of the same
aggregation as the row's figure, for every figure in `analysis.columns.INTERVAL_METRICS`, with the speedup and the
energy ratio paired with plain prompt by prompt. `analysis.summary.summarize` joins them to its point estimates.

Input: `storage.summary.prompt_frame`, one row per generation the summary counts, with its plain partner's figures
as `plain_*` (NaN without one).

Example:
    >>> cell_intervals(prompts, ["strategy", "task", "k", "regime", "version"])   # one row per cell
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from analysis import stats
from analysis.columns import INTERVAL_COLUMNS, INTERVAL_METRICS
from storage.summary import PROMPT_COLUMNS

NO_PLAIN = "no plain generation of the same prompts and max_new_tokens"


FIGURE_COLUMNS = [
    "n_tokens",
    "wall_s",
    "tokens_per_s",
    "drafted",
    "accepted",
    "rounds",
    "first_accepted",
    "first_drafted",
    "energy_j",
    "j_per_100_tokens",
    *(f"plain_{c}" for c in PROMPT_COLUMNS),
]


def _figures(f: dict[str, np.ndarray], pooled: bool) -> tuple[np.ndarray, np.ndarray]:
    """(numerators, denominators), prompts x figures, of `INTERVAL_METRICS` (tokens/s, speedup, acceptance,
    first-token acceptance, MAL, J/100 tokens, energy ratio) for one cell's prompts: each figure is sum num / sum
    den over the prompts (a mean of rates: rate and 1 where it has one; speedup: the strategy's and plain's tokens/s
    on the prompts paired with plain, 0 on the others), so one set of draws gives every interval. The pooled speedup
    and energy ratio are ratios of two ratios, computed apart (`_pooled_ratios`)."""
    paired = np.isfinite(f["plain_tokens_per_s"])
    energy = paired & np.isfinite(f["j_per_100_tokens"]) & np.isfinite(f["plain_j_per_100_tokens"])
    zero = np.zeros(len(paired))
    with np.errstate(divide="ignore", invalid="ignore"):
        if pooled:
            num = [f["n_tokens"], zero, f["accepted"], f["first_accepted"], f["accepted"], 100 * f["energy_j"], zero]
            den = [f["wall_s"], zero, f["drafted"], np.where(f["drafted"] > 0, f["first_drafted"], 0), f["rounds"]]
            den += [f["n_tokens"], zero]
        else:
            rates = [
                f["tokens_per_s"],
                np.where(f["drafted"] > 0, f["accepted"] / f["drafted"], np.nan),
                np.where(
                    (f["drafted"] > 0) & (f["first_drafted"] > 0), f["first_accepted"] / f["first_drafted"], np.nan
                ),
                np.where(f["rounds"] > 0, f["accepted"] / f["rounds"], np.nan),
                f["j_per_100_tokens"],
            ]
            known = [np.isfinite(r) for r in rates]
            num = [np.where(k, r, 0.0) for r, k in zip(rates, known)]
            den = [k.astype(float) for k in known]
            num.insert(1, np.where(paired, f["tokens_per_s"], 0.0))
            den.insert(1, np.where(paired, f["plain_tokens_per_s"], 0.0))
            num.append(np.where(energy, f["plain_j_per_100_tokens"], 0.0))
            den.append(np.where(energy, f["j_per_100_tokens"], 0.0))
    num, den = np.column_stack(num), np.column_stack(den)
    return np.nan_to_num(num), np.nan_to_num(den)


def _pooled_ratios(f: dict[str, np.ndarray]) -> tuple[stats.Estimate, stats.Estimate]:
    """Pooled speedup (tokens / seconds over plain's on the same prompts) and energy ratio (plain's J per token over
    the strategy's)."""
    p = lambda c: f[f"plain_{c}"]  # noqa: E731
    speedup = stats.ratio_of_ratios(f["n_tokens"], f["wall_s"], p("n_tokens"), p("wall_s"))
    energy = stats.ratio_of_ratios(p("energy_j"), p("n_tokens"), f["energy_j"], f["n_tokens"])
    return speedup, energy


def _note(paired: int, prompts: int) -> str | None:
    """Why a cell's speedup is missing, or covers only some of its prompts."""
    if paired == 0:
        return f"no speedup: {NO_PLAIN}"
    if paired < prompts:
        return f"speedup over {paired} of {prompts} prompts: the others have {NO_PLAIN}"
    return None


def _cell_row(key, group: list[str], f: dict, pooled: bool, prompts: int) -> dict:
    """One cell's row of `cell_intervals` from its prompts' figures `f`."""
    estimates = dict(zip(INTERVAL_METRICS, stats.ratios_of_sums(*_figures(f, pooled))))
    if pooled:
        estimates["speedup"], estimates["energy_ratio"] = _pooled_ratios(f)
    paired = np.isfinite(f["plain_tokens_per_s"])
    partial = np.isnan(f["j_per_100_tokens"][paired]).any() or np.isnan(f["plain_j_per_100_tokens"][paired]).any()
    if partial or not paired.any():
        estimates["energy_ratio"] = stats.NAN
    if not paired.any():
        estimates["speedup"] = stats.NAN
    row = dict(zip(group, key), n_prompts=prompts, note=_note(int(paired.sum()), len(paired)))
    for name, e in estimates.items():
        row |= {f"{name}_lo": e.lo, f"{name}_hi": e.hi}
    return row | {"speedup": estimates["speedup"].value, "energy_ratio": estimates["energy_ratio"].value}


def cell_intervals(prompts: pd.DataFrame, group: list[str], pooled: bool = False) -> pd.DataFrame:
    """Per cell (the `group` columns: the summary's keys and version) of `prompt_frame`: n_prompts, the 95% bootstrap
    interval over prompts of every figure in `INTERVAL_METRICS` (`analysis.stats`, the same aggregation as the point
    estimates), the speedup and energy ratio paired with plain prompt by prompt, and a note where a cell has no plain
    of its own data version. A prompt without energy on either side leaves its cell's energy ratio empty (no partial
    ratio)."""
    columns = [*group, "n_prompts", "speedup", "energy_ratio", *INTERVAL_COLUMNS, "note"]
    if prompts.empty:
        return pd.DataFrame(columns=columns)
    arrays = {c: prompts[c].to_numpy(dtype=float, na_value=np.nan) for c in FIGURE_COLUMNS}
    index = prompts["prompt_index"].to_numpy()
    rows = []
    for key, at in prompts.groupby(group, sort=False, dropna=False).indices.items():
        f = {c: a[at] for c, a in arrays.items()}
        rows.append(_cell_row(key, group, f, pooled, len(np.unique(index[at]))))
    return pd.DataFrame(rows, columns=columns)

"""Reads of the pass-cost model (`workers.costmodel`) and of how well it predicts: the experiment's stored model, and
the prediction error of its generations per regime. Sessions are opened by the caller.

Validation pairs a replayed generation with the timed generation of the same coordinate (strategy, task, k,
regime) and prompt of the same data version (prompt key): their passes are identical, so the replay's predicted
tokens/s set against the timed one's measured tokens/s is the model's error on real work. A timed generation that
carries its own predicted wall time (the model applied to its passes) is compared with itself as well.

Example:
    >>> with Session() as s:
    ...     model = load_cost_model(s, exp_id)          # PassCostModel | None
    ...     errors = prediction_error(s, exp_id)        # per regime: median, p90 error, Spearman of speedups
    ...     watts = regime_power_w(s, exp_id)           # per regime: mean power of the timed generations
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd
from sqlalchemy import func, select
from sqlalchemy.orm import Session

from storage.models import CostModel, Generation
from workers.costmodel import PassCostModel, error_summary, medians, spearman

PLAIN = "plain"  # the strategy every speedup is taken against
COORD = ["strategy", "task", "k", "regime"]
PAIR = [*COORD, "prompt_index", "prompt_key"]
ERROR_COLUMNS = [
    "regime",
    "pairs",
    "median_error",
    "p90_error",
    "timed",
    "timed_median_error",
    "timed_p90_error",
    "coordinates",
    "spearman",
]


@dataclass(frozen=True)
class StoredCostModel:
    """An experiment's measured cost model with the passes it was fitted to and what measuring it cost."""

    model: PassCostModel
    samples: tuple[tuple[int, int, int, float], ...]  # (fed, cached, kept, seconds) per timed pass
    measure_s: float
    energy_j: float | None
    mean_power_w: float | None  # the accelerator's mean power while it ran verifier passes
    power_source: str | None


def stored_cost_model(session: Session, exp_id: int, device: str | None = None) -> StoredCostModel | None:
    """The experiment's newest cost model (on `device` when given), or None when none was measured."""
    stmt = select(CostModel).where(CostModel.experiment_id == exp_id)
    if device is not None:
        stmt = stmt.where(CostModel.device == device)
    row = session.scalars(stmt.order_by(CostModel.id.desc()).limit(1)).first()
    if row is None:
        return None
    return StoredCostModel(
        model=PassCostModel(row.verifier, row.device, {str(k): float(v) for k, v in row.coefficients.items()}),
        samples=tuple((int(f), int(c), int(k), float(s)) for f, c, k, s in row.samples),
        measure_s=row.measure_s,
        energy_j=row.energy_j,
        mean_power_w=row.mean_power_w,
        power_source=row.power_source,
    )


def load_cost_model(session: Session, exp_id: int, device: str | None = None) -> PassCostModel | None:
    """The experiment's newest pass-cost model (on `device` when given), or None."""
    stored = stored_cost_model(session, exp_id, device)
    return stored.model if stored else None


def regime_power_w(session: Session, exp_id: int) -> dict[str, float]:
    """Per regime, the mean power of the timed generations that carry energy (their joules over their seconds):
    what a replayed generation's predicted seconds are multiplied by for its predicted energy."""
    g = Generation
    stmt = (
        select(g.regime, func.sum(g.energy_j), func.sum(g.wall_s))
        .where(g.experiment_id == exp_id, g.measure == "timed", g.energy_j.is_not(None))
        .group_by(g.regime)
    )
    return {regime: float(j) / float(s) for regime, j, s in session.execute(stmt).all() if s and s > 0}


def pass_label(fed: int, cached: int, kept: int) -> str:
    """The family a pass shape belongs to on the chart: a fresh forward, or an extend after so many cached tokens."""
    return "no cache (uncached or prefill)" if cached == 0 else f"after {cached} cached"


def fit_frame(stored: StoredCostModel) -> pd.DataFrame:
    """One row per measured pass shape: its median measured and its fitted milliseconds, and the relative error."""
    rows = [
        {
            "passes": pass_label(*shape),
            "fed": shape[0],
            "cached": shape[1],
            "kept": shape[2],
            "measured_ms": t * 1e3,
            "fitted_ms": stored.model.pass_seconds(*shape) * 1e3,
        }
        for shape, t in sorted(medians(stored.samples).items(), key=lambda kv: (kv[0][1], kv[0][0], kv[0][2]))
    ]
    df = pd.DataFrame(rows, columns=["passes", "fed", "cached", "kept", "measured_ms", "fitted_ms"])
    df["error"] = (df["fitted_ms"] / df["measured_ms"] - 1).abs()
    return df


def surface_frame(stored: StoredCostModel) -> pd.DataFrame:
    """The fitted surface along each measured family: milliseconds against tokens fed, at each measured cache
    length (all rows kept) and without a cache (one row kept, the fed tokens being the whole context)."""
    shapes = medians(stored.samples)
    rows = []
    for cached in sorted({c for _, c, _ in shapes}):
        fed = sorted({f for f, c, _ in shapes if c == cached})
        for n in range(min(fed), max(fed) + 1):
            kept = 1 if cached == 0 else n
            rows.append(
                {
                    "passes": pass_label(n, cached, kept),
                    "fed": n,
                    "fitted_ms": stored.model.pass_seconds(n, cached, kept) * 1e3,
                }
            )
    return pd.DataFrame(rows, columns=["passes", "fed", "fitted_ms"])


def _greedy_rows(session: Session, exp_id: int) -> pd.DataFrame:
    """The experiment's greedy generations, the columns validation reads (newest row per pair key and measure)."""
    g = Generation
    cols = [g.id, g.strategy, g.task, g.k, g.regime, g.prompt_index, g.prompt_key, g.measure, g.n_tokens, g.wall_s]
    stmt = select(*cols, g.predicted_wall_s).where(g.experiment_id == exp_id, g.temperature == 0)
    df = pd.DataFrame(session.execute(stmt).all(), columns=[c.key for c in cols] + ["predicted_wall_s"])
    df["prompt_key"] = df["prompt_key"].fillna("")
    return df.sort_values("id").drop_duplicates([*PAIR, "measure"], keep="last")


def prediction_pairs(session: Session, exp_id: int) -> pd.DataFrame:
    """One row per generation both timed and replayed: the coordinate, the prompt, the measured tokens/s (timed
    row) and the predicted one (replayed row), and |predicted / measured - 1|."""
    df = _greedy_rows(session, exp_id)
    timed = df[df["measure"] == "timed"]
    replay = df[(df["measure"] == "replay") & df["predicted_wall_s"].gt(0)]
    pairs = timed.merge(replay, on=PAIR, suffixes=("", "_replay"))
    pairs["measured_tokens_per_s"] = pairs["n_tokens"] / pairs["wall_s"]
    pairs["predicted_tokens_per_s"] = pairs["n_tokens_replay"] / pairs["predicted_wall_s_replay"]
    pairs["error"] = (pairs["predicted_tokens_per_s"] / pairs["measured_tokens_per_s"] - 1).abs()
    keep = [*PAIR, "n_tokens", "wall_s", "predicted_wall_s_replay"]
    return pairs[[*keep, "measured_tokens_per_s", "predicted_tokens_per_s", "error"]].rename(
        columns={"predicted_wall_s_replay": "predicted_wall_s"}
    )


def _speedups(pairs: pd.DataFrame, wall: str) -> pd.Series:
    """Each non-plain coordinate's speedup over plain on the same prompts (same task, regime and prompt key), as a
    ratio of sums of tokens over sums of `wall` seconds."""
    plain = pairs[pairs["strategy"] == PLAIN][["task", "regime", "prompt_key", "n_tokens", wall]]
    other = pairs[pairs["strategy"] != PLAIN]
    both = other.merge(plain, on=["task", "regime", "prompt_key"], suffixes=("", "_plain"))
    sums = both.groupby(COORD)[["n_tokens", wall, "n_tokens_plain", f"{wall}_plain"]].sum()
    return (sums["n_tokens"] / sums[wall]) / (sums["n_tokens_plain"] / sums[f"{wall}_plain"])


def prediction_error(session: Session, exp_id: int) -> pd.DataFrame:
    """Per regime: the median and 90th percentile |predicted / measured - 1| of tokens/s over the generations both
    timed and replayed (`pairs` of them), the same for timed generations against their own predicted wall time
    (`timed` of them), and Spearman's rank agreement of the coordinates' speedups over plain, timed against
    replayed (`coordinates` of them)."""
    pairs = prediction_pairs(session, exp_id)
    rows = _greedy_rows(session, exp_id)
    own = rows[(rows["measure"] == "timed") & rows["predicted_wall_s"].gt(0)]
    own_err = (own["wall_s"] / own["predicted_wall_s"] - 1).abs()
    out = []
    for regime in sorted(set(pairs["regime"]) | set(own["regime"])):
        p = pairs[pairs["regime"] == regime]
        timed, replay = _speedups(p, "wall_s"), _speedups(p, "predicted_wall_s")
        med, p90 = error_summary(p["error"])
        own_med, own_p90 = error_summary(own_err[own["regime"] == regime])
        rho = spearman(timed.to_numpy(), replay.to_numpy()) if len(timed) else np.nan
        n_own = int((own["regime"] == regime).sum())
        out.append([regime, len(p), med, p90, n_own, own_med, own_p90, len(timed), rho])
    return pd.DataFrame(out, columns=ERROR_COLUMNS)

"""Reads of the round-cost table (`workers.decoding.costmodel.RoundCosts`) and of how well it predicts: the experiment's stored
table, and the prediction error of its generations per regime and width band. Sessions are opened by the caller.

Validation pairs a replayed generation with the timed generation of the same coordinate (strategy, task, k,
regime) and prompt of the same data version (prompt key): their passes are identical, so the replay's predicted
tokens/s set against the timed one's measured tokens/s is the table's error on real work. The measured side is a
generation's first timed run (one timing, as the table's error would meet it). A generation timed twice
(`[sweep] timed_twice`: the second time after every first timing of the run, so minutes apart, as a table and the
timings it predicts are) gives the run's own timing noise: |t2 / t1 - 1| / sqrt(2), the error an exact predictor
would show against one timing, the machine's drift over the run included; its median per regime is the yardstick for the table's median error. An exact table's
median error equals that noise on average, so the table's own error is what the noise leaves unexplained (in
quadrature, `table_error`), and a table predicts within the noise when that is no larger than the noise and its bias
within +-3% (`within_noise`): "yes"; a miss is "no" where the pairs show it (its bootstrap interval clear of the
noise) and "unresolved" where so few pairs cannot tell it from an exact table's luck (`noise_verdict`).

The machine's drift is measured beside it: a shared machine runs faster or slower over minutes (other tenants,
clocks), and the table is measured minutes before the timed cells. The table and every timed greedy generation
record the machine's pace (one fixed decoding step, timed: `workers.decoding.roundtimer.pace_seconds`); `pace` is
their ratio (> 1: the machine ran slower than when the table was measured; smoothed over a few timed generations in
run order), `drift` its median distance from 1, and `paced_error` the error with each timing set at the table's pace.
The pace does not replace the error as timed: a busy co-tenant slows the pace step (memory-bound) more than the
compute-bound passes of long prompts, so a correction by it can overshoot where the machine is busy; on a steady host
the two stay within a point (BENCHMARKS.md, "Round-cost table"). A large drift says the error is not the table's
alone.

Example:
    >>> with Session() as s:
    ...     table = load_cost_model(s, exp_id)          # RoundCosts | None
    ...     errors = prediction_error(s, exp_id)        # per regime and band: median, p90, bias, noise, Spearman
    ...     watts = regime_power_w(s, exp_id)           # per regime: mean power of the timed generations
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pandas as pd
from sqlalchemy import func, select
from sqlalchemy.orm import Session

from storage.models import Cell, CostModel, Generation
from storage.results import timed_run_count
from storage.stream import frames
from workers.decoding.costmodel import (
    RoundCosts,
    error_summary,
    interpolate,
    noise_verdict,
    pace_ratios,
    spearman,
    table_error,
)
from workers.decoding.passes import BANDS, width_band

PLAIN = "plain"  # the strategy every speedup is taken against
COORD = ["strategy", "task", "k", "regime"]
PAIR = [*COORD, "prompt_index", "prompt_key"]
MIN_RANKED_PROMPTS = 3  # a coordinate enters the Spearman of speedups with at least this many timed prompts
ERROR_COLUMNS = [
    "regime",
    "band",
    "pairs",
    "median_error",
    "p90_error",
    "bias",
    "paced_error",
    "drift",
    "noise",
    "noise_pairs",
    "table_error",
    "within_noise",
    "coordinates",
    "spearman",
]


@dataclass(frozen=True)
class StoredCostModel:
    """An experiment's measured round-cost table with the rounds it was built from and what measuring it cost."""

    table: RoundCosts
    samples: tuple[tuple[str, str, int, int, float], ...]  # (regime, kind, n, context, seconds) per timed round
    measure_s: float
    energy_j: float | None
    mean_power_w: float | None  # the accelerator's mean power while it ran verifier rounds
    power_source: str | None
    tables: int = 1  # tables the experiment measured (a replayed run with timed cells: a second, at the timings, its
    # turns one table)
    all_measure_s: float = 0.0  # seconds all of them took

    def measured(self) -> str:
        """How the table was measured, in words: its rounds and seconds, and the experiment's other tables if any."""
        turns = int(self.table.meta.get("turns", 1))
        text = f"{len(self.samples)} real rounds timed in {self.measure_s:.0f} s"
        if turns > 1:
            spent = sum(self.table.meta.get("turn_s", []))
            text = f"{len(self.samples)} real rounds timed in {turns} turns among the timed cells, {spent:.0f} s"
        if self.tables > 1:
            text += f"; the newest of the experiment's {self.tables} tables ({self.all_measure_s:.0f} s in all)"
        return text


def stored_cost_model(
    session: Session, exp_id: int, device: str | None = None, cell_key: str | None = None, stage: str | None = None
) -> StoredCostModel | None:
    """The experiment's newest round-cost table (on `device` when given; the one cell `cell_key` measured when
    given; the newest a cell of `stage` measured when given: a table's turns), or None when none was measured (or
    only an older linear model, which nothing reads any more)."""
    listed = select(CostModel.id, CostModel.device, CostModel.measure_s, Cell.key, Cell.params)
    listed = listed.outerjoin(Cell, Cell.id == CostModel.cell_id).order_by(CostModel.id.desc())  # derived: no cell
    measured = session.execute(listed.where(CostModel.experiment_id == exp_id, CostModel.costs.is_not(None))).all()
    picked = next(  # the newest that fits (a few rows: the tables and their turns)
        (
            m.id
            for m in measured
            if (device is None or m.device == device)
            and (cell_key is None or m.key == cell_key)
            and (stage is None or (m.params or {}).get("stage") == stage)
        ),
        None,
    )
    if picked is None:
        return None
    row = session.get(CostModel, picked)
    return StoredCostModel(
        table=RoundCosts.from_json(row.costs),
        samples=tuple((str(g), str(k), int(n), int(c), float(s)) for g, k, n, c, s in row.samples),
        measure_s=row.measure_s,
        energy_j=row.energy_j,
        mean_power_w=row.mean_power_w,
        power_source=row.power_source,
        tables=len({(m.params or {}).get("stage") or m.key for m in measured}),  # a table's turns count as one
        all_measure_s=float(sum(m.measure_s or 0.0 for m in measured)),
    )


def load_cost_model(session: Session, exp_id: int, device: str | None = None) -> RoundCosts | None:
    """The experiment's newest round-cost table (on `device` when given), or None."""
    stored = stored_cost_model(session, exp_id, device)
    return stored.table if stored else None


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


def table_frame(stored: StoredCostModel) -> pd.DataFrame:
    """One row per measured row and context of the table: the median of its timed rounds, the monotone value the
    table predicts there, and the spread of its repeats (min and max), in milliseconds."""
    by: dict[tuple, list[float]] = {}
    for regime, kind, n, context, seconds in stored.samples:
        by.setdefault((regime, kind, n, context), []).append(seconds)
    rows = []
    for (regime, kind, n, context), ts in sorted(by.items()):
        name = f"{regime}/{kind}/{n}"
        table_s = interpolate(stored.table.rows[name], context) if name in stored.table.rows else math.nan
        rows.append(
            [regime, kind, n, context, len(ts), float(np.median(ts)) * 1e3, table_s * 1e3, min(ts) * 1e3, max(ts) * 1e3]
        )
    cols = ["regime", "kind", "n", "context", "rounds", "median_ms", "table_ms", "min_ms", "max_ms"]
    return pd.DataFrame(rows, columns=cols)


def curve_frame(table: RoundCosts, context: int, max_len: int = 8) -> pd.DataFrame:
    """c(n) per regime after `context` tokens (chains), relative to c(0), and the break-even per-token acceptance of a
    chain of n."""
    rows = []
    for regime in sorted({name.split("/")[0] for name in table.rows}):
        curve = table.curve(regime, context, max_len)
        for n, s in enumerate(curve.seconds):
            be = curve.break_even(n) if n else None
            rows.append(
                {"regime": regime, "n": n, "round_ms": s * 1e3, "relative": s / curve.seconds[0], "break_even": be}
            )
    return pd.DataFrame(rows, columns=["regime", "n", "round_ms", "relative", "break_even"])


def _greedy_rows(session: Session, exp_id: int, measure: str, rows: bool = True) -> pd.DataFrame:
    """The experiment's greedy generations of one `measure`, the columns validation reads (newest row per pair key),
    read in chunks (`storage.stream`); a timed row's measured seconds (`first_s`) are its first run's, and `runs`
    keeps only the runs of a generation timed more than once (`timing_noise`'s). `rows=False`: none, the columns
    alone."""
    g = Generation
    cols = [g.id, g.strategy, g.task, g.k, g.regime, g.prompt_index, g.prompt_key, g.measure, g.n_tokens, g.wall_s]
    stmt = select(*cols, g.predicted_wall_s, g.wall_s_runs.label("runs"), g.pace_s)
    stmt = stmt.where(g.experiment_id == exp_id, g.temperature == 0, g.measure == measure).limit(None if rows else 0)
    parts, bands = [], {}
    for part in frames(session, stmt):
        part["first_s"] = [r[0] if r else w for r, w in zip(part["runs"], part["wall_s"])]
        part["runs"] = [r if r and len(r) > 1 else None for r in part["runs"]]
        for key in set(zip(part["strategy"], part["k"])) - bands.keys():
            bands[key] = width_band(*key)
        part["band"] = [bands[key] for key in zip(part["strategy"], part["k"])]
        parts.append(part)
    names = [c.key for c in cols] + ["predicted_wall_s", "runs", "pace_s", "first_s", "band"]
    df = pd.concat(parts, ignore_index=True) if parts else pd.DataFrame(columns=names)
    df["prompt_key"] = df["prompt_key"].fillna("")
    return df.sort_values("id").drop_duplicates([*PAIR, "measure"], keep="last")


PACE_KEY = ("device_name", "dtype", "threads")  # what a pace depends on besides the machine's drift


def table_pace(session: Session, exp_id: int, timed_from: int | None = None) -> float | None:
    """The pace a validation sets timings at: the experiment's table's; with `timed_from`, the predicting table's
    where it was measured as the timed run's was (same processor, dtype and threads; a table measured alone and a
    run's at one thread), else the timed run's own table's (its drift taken out, the two tables' moments left in)."""
    own, timed = stored_cost_model(session, exp_id), stored_cost_model(session, timed_from or exp_id)
    meta = [{} if t is None else t.table.meta for t in (own, timed)]
    if meta[0].get("pace_s") and all(meta[0].get(k) == meta[1].get(k) for k in PACE_KEY):
        return float(meta[0]["pace_s"])
    return meta[1].get("pace_s")


def prediction_pairs(session: Session, exp_id: int, timed_from: int | None = None) -> pd.DataFrame:
    """One row per generation both timed and replayed: the coordinate, its width band, the prompt, the measured
    tokens/s (the timed row's first run) and the predicted one (the replayed row), the predicted over measured minus 1,
    signed (`bias`: positive is predicted too fast) and absolute (`error`), the machine's `pace` at the timing and the
    error with the timing set at the table's pace (`paced_bias`; the module doc). With `timed_from`, the timed rows are
    that experiment's (the same prompts run on the device a re-prediction is for), the replayed ones `exp_id`'s."""
    replay = _greedy_rows(session, exp_id, "replay")
    replay = replay[replay["predicted_wall_s"].gt(0)]
    timed = _greedy_rows(session, exp_id if timed_from is None else timed_from, "timed", rows=len(replay) > 0)
    timed["pace"] = pace_ratios(list(timed["pace_s"]), table_pace(session, exp_id, timed_from))  # rows in run order
    pairs = timed.merge(replay, on=PAIR, suffixes=("", "_replay"))
    pairs["measured_tokens_per_s"] = pairs["n_tokens"] / pairs["first_s"]
    pairs["predicted_tokens_per_s"] = pairs["n_tokens_replay"] / pairs["predicted_wall_s_replay"]
    pairs["bias"] = pairs["predicted_tokens_per_s"] / pairs["measured_tokens_per_s"] - 1
    pairs["error"] = pairs["bias"].abs()
    pairs["paced_bias"] = (1 + pairs["bias"]) / pairs["pace"] - 1
    keep = [*PAIR, "band", "n_tokens", "first_s", "predicted_wall_s_replay", "pace"]
    out = pairs[[*keep, "measured_tokens_per_s", "predicted_tokens_per_s", "bias", "error", "paced_bias"]]
    return out.rename(columns={"predicted_wall_s_replay": "predicted_wall_s", "first_s": "wall_s"})


def _timed_twice(session: Session, exp_id: int) -> list:
    """`timing_noise`'s generations: the newest timed greedy generation of each pair key (as `_greedy_rows` keeps
    them; a NULL prompt key as ""), where it holds two runs or more. The ones timed twice are found first (one scan
    that parses no JSON in Python); only where there are some are the newest ids read."""
    g = Generation
    greedy = [g.experiment_id == exp_id, g.temperature == 0, g.measure == "timed"]
    twice = session.execute(
        select(g.id, g.regime, g.strategy, g.k, g.wall_s_runs.label("runs"))
        .where(*greedy, timed_run_count(session) > 1)
        .order_by(g.id)
    ).all()
    if not twice:
        return []
    pair = [g.strategy, g.task, g.k, g.regime, g.prompt_index, func.coalesce(g.prompt_key, "")]
    newest = set(session.scalars(select(func.max(g.id)).where(*greedy).group_by(*pair)))
    return [r for r in twice if r.id in newest]


def timing_noise(session: Session, exp_id: int) -> pd.DataFrame:
    """Per timed greedy generation run at least twice: its regime, band and |t2 / t1 - 1| / sqrt(2), the error an
    exact predictor would show against one timing of it (the module doc)."""
    rows = [r for r in _timed_twice(session, exp_id) if None not in r.runs[:2]]  # null: a second run of other work
    bands = {key: width_band(*key) for key in {(r.strategy, r.k) for r in rows}}
    noise = [abs(r.runs[1] / r.runs[0] - 1) / math.sqrt(2) for r in rows]
    return pd.DataFrame(
        {"regime": [r.regime for r in rows], "band": [bands[r.strategy, r.k] for r in rows], "noise": noise},
        columns=["regime", "band", "noise"],
    )


def _speedups(pairs: pd.DataFrame, wall: str) -> pd.Series:
    """Each non-plain coordinate's speedup over plain on the same prompts (same task, regime and prompt key), as a
    ratio of sums of tokens over sums of `wall` seconds; only coordinates with MIN_RANKED_PROMPTS timed prompts."""
    plain = pairs[pairs["strategy"] == PLAIN][["task", "regime", "prompt_key", "n_tokens", wall]]
    other = pairs[pairs["strategy"] != PLAIN]
    both = other.merge(plain, on=["task", "regime", "prompt_key"], suffixes=("", "_plain"))
    grouped = both.groupby(COORD)
    sums = grouped[["n_tokens", wall, "n_tokens_plain", f"{wall}_plain"]].sum()[grouped.size() >= MIN_RANKED_PROMPTS]
    return (sums["n_tokens"] / sums[wall]) / (sums["n_tokens_plain"] / sums[f"{wall}_plain"])


def _error_row(regime: str, band: str, p: pd.DataFrame, noise: pd.Series, ranked: tuple[int, float]) -> list:
    med, p90 = error_summary(p["error"])
    bias = float(np.median(p["bias"])) if len(p) else math.nan
    paced = float(np.median(p["paced_bias"].abs())) if len(p) else math.nan
    drift = float(np.median((p["pace"] - 1).abs())) if len(p) else math.nan
    noise_med = float(np.median(noise)) if len(noise) else math.nan
    own, within = table_error(med, noise_med), noise_verdict(p["bias"], noise)
    return [regime, band, len(p), med, p90, bias, paced, drift, noise_med, len(noise), own, within, *ranked]


def prediction_error(session: Session, exp_id: int, timed_from: int | None = None) -> pd.DataFrame:
    """Per regime (band "all") and per regime and width band: the generations both timed and replayed (`pairs`; with
    `timed_from`, timed in that experiment, see `prediction_pairs`),
    the median and 90th percentile |predicted / measured - 1| of tokens/s, the median signed error (`bias`), the
    median error with the timings set at the table's pace (`paced_error`), the median |pace - 1| (`drift`), the
    run's own timing noise (median over `noise_pairs` generations timed twice), the table's own error beside it
    (`table_error`: what the noise does not explain) and whether the table predicts within the noise (`within_noise`:
    "yes", "no" or "unresolved", `workers.decoding.costmodel.noise_verdict`), and, per regime, Spearman's rank
    agreement of the coordinates' speedups over plain, timed against replayed (`coordinates` of them, each with at
    least MIN_RANKED_PROMPTS timed prompts)."""
    pairs = prediction_pairs(session, exp_id, timed_from)
    noise = timing_noise(session, exp_id if timed_from is None else timed_from)
    out = []
    for regime in sorted(set(pairs["regime"]) | set(noise["regime"])):
        p, nz = pairs[pairs["regime"] == regime], noise[noise["regime"] == regime]
        timed, replay = _speedups(p, "wall_s"), _speedups(p, "predicted_wall_s")
        rho = spearman(timed.to_numpy(), replay.to_numpy()) if len(timed) else math.nan
        out.append(_error_row(regime, "all", p, nz["noise"], (len(timed), rho)))
        for band in BANDS:
            pb, nb = p[p["band"] == band], nz[nz["band"] == band]
            if len(pb) or len(nb):
                out.append(_error_row(regime, band, pb, nb["noise"], (0, math.nan)))
    return pd.DataFrame(out, columns=ERROR_COLUMNS)

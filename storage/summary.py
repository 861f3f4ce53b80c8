"""The summary table (one row per strategy x task x k x regime) aggregated in SQL, on SQLite and PostgreSQL alike.

Two aggregations, both from one `GROUP BY` (`group_sums`), picked by `summarize(sums, pooled=...)`:

- **per-prompt means** (default, the paper's): every rate is first computed per generation, then averaged over the
  generations (= prompts) of the cell: mean tokens/s, mean acceptance (accepted / drafted), mean MAL, mean J per 100
  tokens. Speedup is the cell's mean tokens/s over plain's mean tokens/s at the same task and regime (a ratio of the
  means, as the paper's Table 1: 5.55 / 2.28 tps = 2.43x); the energy ratio is plain's mean J/100 tokens over the
  strategy's (Table 3: 1,326 / 529 = 2.51x, higher is better).
- **pooled** (`pooled=True`): ratios of sums over the cell (total tokens / total seconds, total accepted / total
  drafted, ...), which weights long generations more.

Definitions (per generation, from the stored per-round records):

- a *round* is one draft-and-verify step: the draft proposes up to k tokens and the verifier checks them. Rounds =
  `len(accepted_per_step)`. The cached regime's prefill is a verifier pass but not a round. A cached fast-path reject
  (the first draft token differs from the token the previous pass already predicted) *is* a round: a verification
  step whose draft was rejected for free; it counts in MAL's denominator with 0 accepted tokens.
- MAL = accepted draft tokens / rounds (`workers.metrics.mal`; the stored `generations.mal` is the same).
- first-token acceptance = rounds whose first draft token was accepted / rounds with a draft. In the `cached` regime
  (with the fast path) the rounds with a draft are exactly the accepted-first rounds plus `fastpath_rejects`, so it
  equals 1 - fastpath_rejects / rounds with a draft. Elsewhere the stored records do not say which rounds drafted
  nothing (an n-gram draft with no match, the last one-token round), so the denominator is every round.
  Rounds whose first token was accepted = rounds - `accept_hist[0]`. Both are stored per generation at insert
  (`generations.rounds`, `.first_accepted`), so the GROUP BY reads a covering index, not the JSON records.
- tokens per joule = 100 / (J per 100 tokens) of the cell, so Figure 2 and Tables 3-4 agree.

Energy figures are left empty for a cell unless every one of its generations has an energy value: a partial sum would
mislead.

Example:
    >>> sums = group_sums(session, exp_id)        # one SQL query
    >>> table = summarize(sums)                   # the paper's per-prompt means
    >>> pooled = summarize(sums, pooled=True)
"""

from __future__ import annotations

import numpy as np
import pandas as pd
from sqlalchemy import Float, case, cast, func, select
from sqlalchemy.orm import Session

from storage.models import Generation as G

PLAIN = "plain"
FASTPATH_REGIME = "cached"  # the regime with the first-token rejection fast path
KEYS = ["strategy", "draft", "task", "k", "regime", "temperature"]

SUMMARY_COLUMNS = [
    "experiment",
    "strategy",
    "draft",
    "task",
    "k",
    "regime",
    "temperature",
    "prompts",
    "generations",
    "n_tokens",
    "tokens_per_s",
    "speedup",
    "acceptance",
    "first_token_acceptance",
    "mal",
    "mean_accepted_tokens",
    "rouge_l",
    "exact_match",
    "energy_j",
    "j_per_100_tokens",
    "tokens_per_j",
    "energy_ratio",
    "mean_power_w",
    "power_source",
    "power_measured",
    "wall_s",
    "draft_share",
    "aggregation",
]


def _f(expr):
    """As a float, so integer division never truncates (SQLite and PostgreSQL both would)."""
    return cast(expr, Float)


def rounds_expr():
    """Rounds of a generation (stored at insert: the length of its per-round record)."""
    return func.coalesce(G.rounds, 0)


def first_accepted_expr():
    """Rounds whose first draft token was accepted (stored at insert: rounds - accept_hist[0])."""
    return func.coalesce(G.first_accepted, 0)


def first_drafted_expr():
    """Rounds whose first draft token was checked: stored by the engine, else as far as the records tell (module doc)."""
    return case(
        (G.first_checked.isnot(None), G.first_checked),
        (G.drafted == 0, 0),
        (G.regime == FASTPATH_REGIME, first_accepted_expr() + G.fastpath_rejects),
        else_=rounds_expr(),
    )


def _per_gen(num, den):
    """num / den per generation, NULL where den is 0 (AVG skips NULLs)."""
    return _f(num) / func.nullif(den, 0)


def _sum_columns() -> list:
    """Additive sums per cell: the pooled aggregation's inputs."""
    return [
        func.count().label("generations"),
        func.count(func.distinct(G.prompt_index)).label("prompts"),
        func.sum(G.n_tokens).label("n_tokens"),
        func.sum(G.wall_s).label("wall_s"),
        func.sum(G.draft_s).label("draft_s"),
        func.sum(G.drafted).label("drafted"),
        func.sum(G.accepted).label("accepted"),
        func.sum(rounds_expr()).label("rounds"),
        func.sum(case((G.drafted > 0, first_accepted_expr()), else_=0)).label("first_accepted"),
        func.sum(first_drafted_expr()).label("first_drafted"),
        func.sum(G.energy_j).label("energy_sum_j"),
        func.count(G.energy_j).label("energy_n"),
    ]


def _mean_columns() -> list:
    """Per-generation rates averaged over the cell: the paper's per-prompt means."""
    return [
        func.avg(G.tokens_per_s).label("mean_tokens_per_s"),
        func.avg(case((G.drafted > 0, _per_gen(G.accepted, G.drafted)))).label("mean_acceptance"),
        func.avg(_per_gen(G.accepted, rounds_expr())).label("mean_mal"),
        func.avg(_per_gen(G.n_tokens, rounds_expr())).label("mean_accepted_tokens"),
        func.avg(case((G.drafted > 0, _per_gen(first_accepted_expr(), first_drafted_expr())))).label("mean_fta"),
        func.avg(G.j_per_100_tokens).label("mean_j_per_100_tokens"),
        func.avg(G.mean_power_w).label("mean_power_w"),
        func.avg(_per_gen(G.draft_s, G.wall_s)).label("mean_draft_share"),
        func.avg(G.rouge_l).label("rouge_l"),
        func.avg(case((G.exact_match.is_(None), None), (G.exact_match, 1.0), else_=0.0)).label("exact_match"),
        func.min(G.power_source).label("power_source_min"),
        func.max(G.power_source).label("power_source_max"),
        func.min(case((G.power_measured.is_(None), None), (G.power_measured, 1), else_=0)).label("measured_min"),
    ]


def latest_generations(exp_id: int):
    """The ids of the generations a summary counts: per cell coordinate and prompt, the newest. A spec edited between
    runs (other max_new_tokens, say) leaves done cells of its earlier version under new keys; they are never averaged
    with the new version's."""
    keys = [getattr(G, k) for k in KEYS]
    return select(func.max(G.id)).where(G.experiment_id == exp_id).group_by(*keys, G.prompt_index)


def superseded(session: Session, exp_id: int) -> int:
    """How many generations of experiment `exp_id` a summary leaves out (older versions of a coordinate and prompt)."""
    total = session.scalar(select(func.count()).select_from(G).where(G.experiment_id == exp_id)) or 0
    kept = session.scalar(select(func.count()).select_from(latest_generations(exp_id).subquery())) or 0
    return total - kept


def group_sums(session: Session, exp_id: int) -> pd.DataFrame:
    """One row per strategy x task x k x regime of experiment `exp_id`: sums, counts and per-generation means, over
    the newest generation of each coordinate and prompt (`latest_generations`)."""
    keys = [getattr(G, k) for k in KEYS]
    stmt = (
        select(*keys, *_sum_columns(), *_mean_columns())
        .where(G.experiment_id == exp_id, G.id.in_(latest_generations(exp_id)))
        .group_by(*keys)
    )
    result = session.execute(stmt)
    return pd.DataFrame(result.all(), columns=list(result.keys()))


def _ratio(num: pd.Series, den: pd.Series) -> pd.Series:
    return (num.astype(float) / den.astype(float).where(den > 0)).astype(float)


def _power_label(df: pd.DataFrame) -> pd.Series:
    """The cell's power source, or "a+b" when its generations used two."""
    lo, hi = df["power_source_min"], df["power_source_max"]
    return lo.where(lo == hi, lo.astype(str) + "+" + hi.astype(str)).where(lo.notna(), None)


def summarize(sums: pd.DataFrame, pooled: bool = False, experiment: str | None = None) -> pd.DataFrame:
    """The summary table from `group_sums`: per-prompt means (default) or pooled ratios of sums, with ratios to plain."""
    if sums.empty:
        return pd.DataFrame(columns=SUMMARY_COLUMNS)
    df = sums.copy()
    complete = df["energy_n"] == df["generations"]  # partial energy would mislead
    energy_j = df["energy_sum_j"].astype(float).where(complete)
    if pooled:
        df["tokens_per_s"] = _ratio(df["n_tokens"], df["wall_s"])
        df["acceptance"] = _ratio(df["accepted"], df["drafted"])
        df["mal"] = _ratio(df["accepted"], df["rounds"])
        df["mean_accepted_tokens"] = _ratio(df["n_tokens"], df["rounds"])
        df["first_token_acceptance"] = _ratio(df["first_accepted"], df["first_drafted"]).where(df["drafted"] > 0)
        df["j_per_100_tokens"] = energy_j / df["n_tokens"].astype(float) * 100
        df["mean_power_w"] = energy_j / df["wall_s"].astype(float)
        df["draft_share"] = _ratio(df["draft_s"], df["wall_s"])
    else:
        df["tokens_per_s"] = df["mean_tokens_per_s"].astype(float)
        df["acceptance"] = df["mean_acceptance"].astype(float)
        df["mal"] = df["mean_mal"].astype(float)
        df["first_token_acceptance"] = df["mean_fta"].astype(float)
        df["j_per_100_tokens"] = df["mean_j_per_100_tokens"].astype(float).where(complete)
        df["mean_power_w"] = df["mean_power_w"].astype(float).where(complete)
        df["draft_share"] = df["mean_draft_share"].astype(float)
    df["energy_j"] = energy_j
    df["tokens_per_j"] = 100.0 / df["j_per_100_tokens"]
    df["power_source"] = _power_label(df)
    df["power_measured"] = df["measured_min"].map(lambda v: None if pd.isna(v) else bool(v))
    df["exact_match"] = df["exact_match"].astype(float)
    df["rouge_l"] = df["rouge_l"].astype(float)
    df = with_ratios_to_plain(df)
    df["experiment"] = experiment
    df["aggregation"] = "pooled" if pooled else "per-prompt mean"
    return df[SUMMARY_COLUMNS].sort_values(["task", "regime", "temperature", "strategy", "k"]).reset_index(drop=True)


def with_ratios_to_plain(df: pd.DataFrame) -> pd.DataFrame:
    """Speedup (tokens/s over plain's) and energy ratio (plain's J/100 tokens over the cell's) at the same task and
    regime (and temperature: sampled cells are compared with plain sampling at the same temperature)."""
    keys = ["task", "regime", "temperature"]
    plain = df[df["draft"] == PLAIN].groupby(keys)[["tokens_per_s", "j_per_100_tokens"]].mean()
    idx = pd.MultiIndex.from_frame(df[keys])
    base = plain.reindex(idx)
    out = df.copy()
    out["speedup"] = out["tokens_per_s"].to_numpy() / base["tokens_per_s"].to_numpy()
    with np.errstate(divide="ignore", invalid="ignore"):
        out["energy_ratio"] = base["j_per_100_tokens"].to_numpy() / out["j_per_100_tokens"].to_numpy()
    return out

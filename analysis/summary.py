"""The summary table (one row per strategy x task x k x regime x temperature x measure) aggregated in SQL, on SQLite
and PostgreSQL alike, each figure with its 95% interval over prompts.

The point estimates come from one `GROUP BY` (`storage.summary.group_sums`); the intervals and the ratios to plain
from one per-generation read of the same covering index (`storage.summary.prompt_frame`); `summarize(sums, prompts,
pooled=...)` joins them:

- **per-prompt means** (default, the paper's): every rate is first computed per generation, then averaged over the
  generations (= prompts) of the cell: mean tokens/s, mean acceptance (accepted / drafted), mean MAL, mean J per 100
  tokens. Speedup is the cell's mean tokens/s over plain's mean tokens/s on the same prompts (a ratio of the means,
  as the paper's Table 1: 5.55 / 2.28 tps = 2.43x); the energy ratio is plain's mean J/100 tokens over the
  strategy's (Table 3: 1,326 / 529 = 2.51x, higher is better).
- **pooled** (`pooled=True`): ratios of sums over the cell (total tokens / total seconds, total accepted / total
  drafted, ...), which weights long generations more.

Ratios to plain stay within one data version: each generation is paired with plain greedy's generation of the same
prompt key (the prompt's reference cell, which hashes the verifier, the prompt text and max_new_tokens), task,
regime, temperature and measure; a cell without such a plain has no speedup and a `note` saying why. A row's
`measure` is "timed" (run by the verifier) or "replay" (passes computed from the reference, time and energy
predicted); a row never mixes the two. Its `version` is "current" or "older" against `Versions` (what the stored
spec still makes), "current" for all without it.

Intervals (`analysis.intervals`): a seeded bootstrap over the cell's prompts of the same aggregation as the row's
figure, `<figure>_lo` / `<figure>_hi` for every figure in `analysis.columns.INTERVAL_METRICS`; speedup and energy
ratio resample the prompts paired with plain. `n_prompts` is the cell's prompts.

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
    >>> sums, prompts = group_sums(session, exp_id), prompt_frame(session, exp_id)   # two indexed queries
    >>> table = summarize(sums, prompts)                  # the paper's per-prompt means, with intervals
    >>> pooled = summarize(sums, prompts, pooled=True)
"""

from __future__ import annotations

import pandas as pd

from analysis.columns import SUMMARY_COLUMNS
from analysis.intervals import cell_intervals
from analysis.model_error import error_bounds, with_model_error
from analysis.stored import FRAMES, summary_name, summary_version
from storage.browse import data_version
from storage.db import Session
from storage.queries import experiment_id, experiment_info
from storage.stored_frames import read_frame, stored_versions, write_frame
from storage.summary import KEYS, Versions, group_sums, prompt_frame
from storage.validation import prediction_pairs


def _ratio(num: pd.Series, den: pd.Series) -> pd.Series:
    return (num.astype(float) / den.astype(float).where(den > 0)).astype(float)


def _power_label(df: pd.DataFrame) -> pd.Series:
    """The cell's power source, or "a+b" when its generations used two."""
    lo, hi = df["power_source_min"], df["power_source_max"]
    return lo.where(lo == hi, lo.astype(str) + "+" + hi.astype(str)).where(lo.notna(), None)


def summarize(
    sums: pd.DataFrame, prompts: pd.DataFrame, pooled: bool = False, experiment: str | None = None
) -> pd.DataFrame:
    """The summary table from `group_sums` (the point estimates, in SQL) and `prompt_frame` (the intervals and the
    ratios to plain, paired prompt by prompt): per-prompt means (default) or pooled ratios of sums."""
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
    df = df.merge(cell_intervals(prompts, [*KEYS, "version"], pooled), on=[*KEYS, "version"], how="left")
    df["energy_ratio"] = df["energy_ratio"].where(complete)
    for bound in ("lo", "hi"):
        df[f"j_per_100_tokens_{bound}"] = df[f"j_per_100_tokens_{bound}"].where(complete)
        df[f"energy_ratio_{bound}"] = df[f"energy_ratio_{bound}"].where(complete)
    df["experiment"] = experiment
    df["aggregation"] = "pooled" if pooled else "per-prompt mean"
    order = ["task", "regime", "temperature", "measure", "version", "strategy", "k"]
    return df[SUMMARY_COLUMNS].sort_values(order).reset_index(drop=True)


def summary_frame(  # wide: what a caller already read is passed on, not read again
    session: Session,
    experiment: str | None = None,
    pooled: bool = False,
    versions: Versions | None = None,
    prompts: pd.DataFrame | None = None,
    pairs: pd.DataFrame | None = None,
) -> pd.DataFrame:
    """The export table of one experiment (newest when None): per-prompt means, or pooled, each figure with its 95%
    interval over prompts (a replayed speed figure's with the cost table's validated error, `analysis.model_error`),
    its rows marked current or older by `versions`; see `summarize`. The summary stored at the experiment's current
    data version where there is one (`stored_summary`), else computed: `prompts` (`prompt_frame` of the same
    `versions`) and `pairs` (`storage.validation.prediction_pairs`) where the caller has read them already."""
    exp_id = experiment_id(session, experiment)
    if exp_id is None:
        return pd.DataFrame(columns=SUMMARY_COLUMNS)
    name = experiment_info(session, exp_id)["name"]
    stored = stored_summary(session, exp_id, pooled, versions)
    if stored is not None:
        stored["experiment"] = name
        return stored
    return computed_summary(session, exp_id, pooled, versions, (prompts, pairs), name)


def computed_summary(  # wide: the inputs a caller has read already travel as one pair
    session: Session,
    exp_id: int,
    pooled: bool,
    versions: Versions | None,
    read: tuple[pd.DataFrame | None, pd.DataFrame | None] = (None, None),
    experiment: str | None = None,
) -> pd.DataFrame:
    """The summary of experiment `exp_id` computed from its rows (`summarize` with the model error), never the stored
    one; `read`: its `prompt_frame` and `prediction_pairs` where the caller has them (None: read here)."""
    prompts, pairs = read
    sums = group_sums(session, exp_id, versions)
    prompts = prompt_frame(session, exp_id, versions) if prompts is None else prompts
    bounds = error_bounds(prediction_pairs(session, exp_id) if pairs is None else pairs)
    return with_model_error(summarize(sums, prompts, pooled=pooled, experiment=experiment), bounds)


def stored_summary(session: Session, exp_id: int, pooled: bool, versions: Versions | None) -> pd.DataFrame | None:
    """The summary stored for experiment `exp_id` (`store_summaries`) if it was stored at the version it would be
    computed at now (`analysis.stored`), its `experiment` column empty; None otherwise."""
    return read_frame(session, exp_id, summary_name(pooled, versions), summary_version(session, exp_id, versions))


def store_summaries(session: Session, exp_id: int, versions: Versions | None) -> list[str]:
    """Compute and store (`storage.stored_frames`) the summaries readers ask for, per-prompt and pooled: with its
    rows marked by `versions` (the export's) and all current (the dashboard's), and the other frames pages read whole
    (`analysis.stored.FRAMES`), those not stored at their current version already; the names written. One
    per-generation read per versions, and one for both where `versions` marks no counted generation older (then the
    two are the same frames). Each frame is committed as soon as it is computed: a SQLite write lock is held for the
    moment it is written, never while the next is computed (the run's lease is renewed meanwhile)."""
    kinds = [versions] if versions is None else [versions, None]
    due = {v: summary_version(session, exp_id, v) for v in kinds}
    have = stored_versions(session, exp_id)
    todo = [(p, v) for v in kinds for p in (False, True) if have.get(summary_name(p, v)) != due[v]]
    if data_version(session, exp_id)[1] == 0:
        return []
    written = []
    for name, compute in FRAMES.items():
        if have.get(name) != due[None]:
            _store(session, exp_id, name, due[None], compute(session, exp_id))
            written.append(name)
    pairs = prediction_pairs(session, exp_id) if todo else None
    for v in kinds:
        if not [p for p, w in todo if w == v and summary_name(p, w) not in written]:
            continue
        prompts = prompt_frame(session, exp_id, v)  # one per-generation frame held at a time
        same = [None] if v is not None and not prompts["version"].eq("older").any() else []
        for pooled in (False, True):
            due_here = [w for w in (v, *same) if (pooled, w) in todo]
            if due_here:
                frame = computed_summary(session, exp_id, pooled, v, (prompts, pairs))
            for w in due_here:
                _store(session, exp_id, summary_name(pooled, w), due[w], frame)
                written.append(summary_name(pooled, w))
    return written


def _store(session: Session, exp_id: int, name: str, version: str, df: pd.DataFrame) -> None:
    """Write one frame and commit it (`store_summaries`)."""
    write_frame(session, exp_id, name, version, df)
    session.commit()

"""The summary's SQL: the point estimates of every cell (one row per strategy x task x k x regime x temperature x
measure) from one `GROUP BY` (`group_sums`), and one per-generation read of the same covering index (`prompt_frame`),
each generation beside its plain partner, on SQLite and PostgreSQL alike. `analysis.summary.summarize` joins them into
the summary table with its intervals; its docstring holds the definitions.

Example:
    >>> sums, prompts = group_sums(session, exp_id), prompt_frame(session, exp_id)   # two indexed queries
"""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd
from sqlalchemy import Float, case, cast, func, literal, or_, select, union_all
from sqlalchemy.orm import Session

from storage.models import Generation as G
from storage.stream import frame

PLAIN = "plain"
FASTPATH_REGIME = "cached"  # the regime with the first-token rejection fast path
KEYS = ["strategy", "draft", "task", "k", "regime", "temperature", "measure"]
PLAIN_KEYS = ["task", "regime", "temperature", "measure"]  # the coordinate of a cell's plain greedy
PROMPT_COLUMNS = ["n_tokens", "wall_s", "tokens_per_s", "j_per_100_tokens", "energy_j"]  # also plain's, "plain_" first


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
        func.count().label("prompts"),  # one generation per prompt of a cell (`latest_generations`)
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


@dataclass(frozen=True)
class Versions:
    """What the experiment's current spec makes, to tell its generations from an earlier version's: its strategies,
    and the prompt keys of the reference cells it no longer makes (another max_new_tokens, verifier or prompt). A
    generation of a strategy not in `strategies`, or of a prompt key in `older`, is of an older version. Computed
    from the stored spec by `orchestrator.run.summaries.versions`; without it every generation counts as current."""

    strategies: frozenset[str]
    older: frozenset[str] = frozenset()


def version_expr(versions: Versions | None):
    """ "current" or "older" per generation (module doc); "current" for all without `versions`."""
    if versions is None:
        return literal("current")
    older = [G.strategy.not_in(sorted(versions.strategies))]
    if versions.older:
        older.append(G.prompt_key.in_(sorted(versions.older)))
    return case((or_(*older), "older"), else_="current")


def _splits_cells(versions: Versions | None) -> bool:
    """Whether `versions` can file two generations of one cell coordinate under two versions: only by their prompt
    keys (a cell's strategy is current or older as a whole)."""
    return versions is not None and bool(versions.older)


def latest_generations(exp_id: int, versions: Versions | None = None):
    """The ids of the generations a summary counts: per cell coordinate, version and prompt, the newest. A spec
    edited between runs (other max_new_tokens, say) leaves done cells of its earlier version under new keys; they are
    never averaged with the new version's (without `versions`, only the newest of each prompt counts). Grouped in
    the summary index's order (the keys, then prompt_index), so read through it with no sort; where prompt keys split
    a cell's versions, one such read per version."""
    keys = [getattr(G, k) for k in KEYS]

    def newest(*where):
        return select(func.max(G.id)).where(G.experiment_id == exp_id, *where).group_by(*keys, G.prompt_index)

    if not _splits_cells(versions):
        return newest()  # the version is the strategy's: one per cell coordinate
    version = version_expr(versions)
    return union_all(newest(version == "current"), newest(version == "older"))


def counted(exp_id: int, versions: Versions | None = None):
    """The generations a summary counts (`latest_generations`) as a WHERE clause: every generation of the experiment
    where none is superseded, else the newest ids. The check is two counts through the indexes in the same statement
    (one snapshot of a database being written), and spares the statement a lookup of every generation's id in the
    list of the newest (measured at 10^6 on SQLite: the per-cell sums in half the CPU time)."""
    latest = latest_generations(exp_id, versions)
    kept = select(func.count()).select_from(latest.subquery()).scalar_subquery()
    total = select(func.count()).select_from(G).where(G.experiment_id == exp_id).correlate(None).scalar_subquery()
    return or_(kept == total, G.id.in_(latest))


def superseded(session: Session, exp_id: int, versions: Versions | None = None, kept: int | None = None) -> int:
    """How many generations of experiment `exp_id` a summary leaves out (older generations of a coordinate, version
    and prompt); `kept`: the generations it counts, where the caller has its sums (their `generations`)."""
    total = session.scalar(select(func.count()).select_from(G).where(G.experiment_id == exp_id)) or 0
    if kept is None:
        kept = session.scalar(select(func.count()).select_from(latest_generations(exp_id, versions).subquery()))
    return total - (kept or 0)


def older_cells(session: Session, exp_id: int, versions: Versions | None) -> int:
    """How many rows of the summary are of an earlier version of the spec (`group_sums`' rows of version "older"):
    the cell coordinates with an older generation, counted through the index without summing anything."""
    if versions is None:
        return 0
    keys = [getattr(G, k) for k in KEYS]
    cells = select(*keys).where(G.experiment_id == exp_id, version_expr(versions) == "older").group_by(*keys)
    return session.scalar(select(func.count()).select_from(cells.subquery())) or 0


def group_sums(session: Session, exp_id: int, versions: Versions | None = None) -> pd.DataFrame:
    """One row per strategy x task x k x regime x temperature x measure (x version) of experiment `exp_id`: sums,
    counts and per-generation means, over the newest generation of each coordinate and prompt (`latest_generations`),
    in the keys' order. Grouped by the keys alone where a cell's version is its strategy's (the index's order, no
    sort); otherwise one GROUP BY per version."""
    result = session.execute(group_sums_stmt(exp_id, versions))
    return pd.DataFrame(result.all(), columns=list(result.keys()))


def group_sums_stmt(exp_id: int, versions: Versions | None = None):
    """The select behind `group_sums`."""
    keys = [getattr(G, k) for k in KEYS]
    version = version_expr(versions)
    latest = counted(exp_id, versions)

    def sums(label, *where):  # `label`: the version, a function of the grouped strategy or the same for all
        columns = (*keys, label.label("version"), *_sum_columns(), *_mean_columns())
        return select(*columns).where(G.experiment_id == exp_id, latest, *where).group_by(*keys)

    if not _splits_cells(versions):
        return sums(version)
    parts = union_all(*(sums(literal(v), version == v) for v in ("current", "older"))).subquery()
    return select(parts).order_by(*(parts.c[k] for k in [*KEYS, "version"]))  # a few hundred grouped rows


def _pair_key(df: pd.DataFrame) -> pd.Series:
    """The data version of each generation's prompt: its prompt key (verifier, prompt text and max_new_tokens), or
    its prompt index where none was stored."""
    return df["prompt_key"].where(df["prompt_key"].notna(), "#" + df["prompt_index"].astype(str))


def prompt_frame(session: Session, exp_id: int, versions: Versions | None = None) -> pd.DataFrame:
    """One row per generation the summary counts (`latest_generations`), with what its intervals need, and the figures
    of its plain partner: the newest plain greedy generation of the same prompt key (so of the same prompt text,
    verifier and max_new_tokens), task, regime, temperature and measure, whatever version the summary files it under
    (`plain_*` columns, NaN without one). A ratio to plain is only ever taken within one data version."""
    gens = frame(session, prompt_stmt(exp_id, versions))
    plain_stmt = select(
        G.id,
        G.strategy,
        *(getattr(G, k) for k in PLAIN_KEYS),
        G.prompt_index,
        G.prompt_key,
        *(getattr(G, c) for c in PROMPT_COLUMNS),
    ).where(G.experiment_id == exp_id, G.draft == PLAIN)
    return with_plain_partners(gens, frame(session, plain_stmt))


def prompt_stmt(exp_id: int, versions: Versions | None = None):
    """The per-generation select of `prompt_frame`, in the summary index's order (no sort): each cell's generations
    in prompt order, on every database."""
    keys = [getattr(G, k) for k in KEYS]
    return (
        select(
            *keys,
            version_expr(versions).label("version"),
            G.prompt_index,
            G.prompt_key,
            *(getattr(G, c) for c in PROMPT_COLUMNS),
            G.drafted,
            G.accepted,
            rounds_expr().label("rounds"),
            case((G.drafted > 0, first_accepted_expr()), else_=0).label("first_accepted"),
            first_drafted_expr().label("first_drafted"),
        )
        .where(G.experiment_id == exp_id, counted(exp_id, versions))
        .order_by(*keys, G.prompt_index)
    )


def with_plain_partners(gens: pd.DataFrame, plain: pd.DataFrame) -> pd.DataFrame:
    """`gens` with its plain partners' `PROMPT_COLUMNS` as `plain_*` (see `prompt_frame`); several plain strategies
    of one prompt key are averaged, each at its newest generation. `gens` gains the columns in place (no copy of its
    rows) and is returned."""
    gens["pair"] = _pair_key(gens)  # in place, and the partners joined on the keys alone: 10^6 rows copied never
    plain = plain.assign(pair=_pair_key(plain)).sort_values("id")
    newest = plain.groupby(["strategy", *PLAIN_KEYS, "pair"], dropna=False).tail(1)
    floats = newest[PROMPT_COLUMNS].astype(float)
    partner = pd.concat([newest[[*PLAIN_KEYS, "pair"]], floats], axis=1)
    if partner.duplicated([*PLAIN_KEYS, "pair"]).any():  # several plain strategies
        by = partner.groupby([*PLAIN_KEYS, "pair"], dropna=False)[PROMPT_COLUMNS]
        complete = by.count().eq(by.size(), axis=0)  # one plain without energy: no partial mean
        partner = by.mean().where(complete).reset_index()
    partner = partner.rename(columns={c: f"plain_{c}" for c in PROMPT_COLUMNS})
    joined = gens[[*PLAIN_KEYS, "pair"]].merge(partner, on=[*PLAIN_KEYS, "pair"], how="left")  # keys unique: in order
    for c in PROMPT_COLUMNS:
        gens[f"plain_{c}"] = joined[f"plain_{c}"].to_numpy()
    return gens

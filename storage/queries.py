"""Read queries shared by the CLI, the exporter and the dashboard; sessions are opened by the caller.

Example:
    >>> with Session() as s:
    ...     counts = status_counts(s)           # {"cells": {...}, "sweep": {...}, "generations": n}
"""

from __future__ import annotations

import math
from collections.abc import Iterator

import pandas as pd
from sqlalchemy import and_, case, func, literal, select
from sqlalchemy.orm import Session

from storage.models import CELL_KINDS, CELL_STATES, Artifact, Cell, Experiment, Generation, InstanceBase, PowerSample
from storage.stream import CHUNK, chunks, frame
from storage.summary import (
    Versions,
    counted,
    first_accepted_expr,
    first_drafted_expr,
    rounds_expr,
    version_expr,
)


def experiment_id(session: Session, name: str | None) -> int | None:
    """The id of experiment `name`, or of the newest experiment when `name` is None."""
    stmt = select(Experiment.id)
    stmt = stmt.where(Experiment.name == name) if name else stmt.order_by(Experiment.id.desc())
    return session.scalars(stmt.limit(1)).first()


def experiment_info(session: Session, exp_id: int) -> dict:
    """What an experiment ran and where: name, stored spec (TOML), device, the idle power floor measured, when."""
    e = session.get(Experiment, exp_id)
    return {
        "name": e.name,
        "spec_toml": e.spec_toml,
        "device": e.device,
        "idle_power_w": e.idle_power_w,
        "created_at": e.created_at,
    }


def experiments_frame(session: Session) -> pd.DataFrame:
    """Every experiment with its cell counts by state."""
    rows = session.execute(select(Experiment.id, Experiment.name, Experiment.device, Experiment.created_at)).all()
    df = pd.DataFrame(rows, columns=["id", "name", "device", "created_at"])
    counts = session.execute(
        select(Cell.experiment_id, Cell.state, func.count()).group_by(Cell.experiment_id, Cell.state)
    ).all()
    for state in CELL_STATES:
        df[state] = [sum(n for e, s, n in counts if e == eid and s == state) for eid in df["id"]]
    return df


def state_counts(session: Session, exp_id: int | None, kind: str | None = None) -> dict[str, int]:
    """Cells by state (every state present, zeros included), for one experiment and kind or all."""
    stmt = select(Cell.state, func.count()).group_by(Cell.state)
    if exp_id is not None:
        stmt = stmt.where(Cell.experiment_id == exp_id)
    if kind is not None:
        stmt = stmt.where(Cell.kind == kind)
    found = dict(session.execute(stmt).all())
    return {state: int(found.get(state, 0)) for state in CELL_STATES}


def status_counts(session: Session, experiment: str | None = None) -> dict:
    """`greenspec status --json`: cell counts by state, overall and per kind, and stored generations (two queries)."""
    exp_id = experiment_id(session, experiment) if experiment else None
    if experiment and exp_id is None:
        exp_id = -1  # an experiment not (yet) stored has no cells, rather than everyone's
    stmt = select(Cell.kind, Cell.state, func.count()).group_by(Cell.kind, Cell.state)
    gens = select(func.count()).select_from(Generation)
    if exp_id is not None:
        stmt = stmt.where(Cell.experiment_id == exp_id)
        gens = gens.where(Generation.experiment_id == exp_id)
    by_kind = {kind: dict.fromkeys(CELL_STATES, 0) for kind in CELL_KINDS}
    for kind, state, n in session.execute(stmt).all():
        by_kind.setdefault(kind, dict.fromkeys(CELL_STATES, 0))[state] = int(n)
    cells = {state: sum(counts.get(state, 0) for counts in by_kind.values()) for state in CELL_STATES}
    return {
        "experiment": experiment,
        "cells": cells,
        **by_kind,  # every kind (train, datastore, distill, label, reference, sweep), so the kinds add up to cells
        "generations": int(session.scalar(gens) or 0),
    }


def timed_twins_s(session: Session, exp_id: int) -> list[tuple[str, float]]:
    """(key, predicted seconds) of every pending or running timed sweep cell whose replayed twin is stored (the same
    strategy, task, k, regime and prompt, `measure` "replay"): the round-cost table's prediction of one run of its
    generation, which the progress's ETA takes for timed cells until the first of them has run."""
    G = Generation
    twin = and_(
        G.experiment_id == Cell.experiment_id,
        G.strategy == Cell.strategy,
        G.task == Cell.task,
        G.k == Cell.k,
        G.regime == Cell.regime,
        G.prompt_index == Cell.prompt_index,
        G.measure == "replay",
    )
    stmt = (
        select(Cell.key, func.max(G.wall_s))
        .join(G, twin)
        .where(Cell.experiment_id == exp_id, Cell.kind == "sweep", Cell.state.in_(("pending", "running")))
        .where(Cell.temperature == 0)
        .group_by(Cell.key)
    )
    return [(key, float(wall)) for key, wall in session.execute(stmt).all() if wall is not None]


def failures_frame(session: Session, exp_id: int | None = None) -> pd.DataFrame:
    """Failed cells with their last error."""
    stmt = select(
        Cell.id,
        Cell.kind,
        Cell.strategy,
        Cell.task,
        Cell.corpus,
        Cell.prompt_index,
        Cell.k,
        Cell.regime,
        Cell.attempts,
        Cell.error,
    ).where(Cell.state == "failed")
    if exp_id is not None:
        stmt = stmt.where(Cell.experiment_id == exp_id)
    return pd.DataFrame(
        session.execute(stmt).all(),
        columns=["cell", "kind", "strategy", "task", "corpus", "prompt", "k", "regime", "attempts", "error"],
    )


def generations_frame(session: Session, exp_id: int | None = None) -> pd.DataFrame:
    """Every stored generation (metrics only, no text/tokens) as a DataFrame."""
    cols = [
        c
        for c in Generation.__table__.columns
        if c.name not in ("tokens", "text", "accepted_per_step", "tokens_per_step")
    ]
    stmt = select(*cols)
    if exp_id is not None:
        stmt = stmt.where(Generation.experiment_id == exp_id)
    return pd.DataFrame(session.execute(stmt).all(), columns=[c.name for c in cols])


def reference_cells_frame(session: Session, exp_id: int) -> pd.DataFrame:
    """The experiment's reference cells: id, key (the prompt key its generations carry), task, prompt index and the
    prompt's text (from its params), to tell which ones the current spec still makes."""
    stmt = select(Cell.id, Cell.key, Cell.task, Cell.prompt_index, Cell.params).where(
        Cell.experiment_id == exp_id, Cell.kind == "reference"
    )
    rows = [
        (i, key, task, index, (params or {}).get("prompt")) for i, key, task, index, params in session.execute(stmt)
    ]
    return pd.DataFrame(rows, columns=["id", "key", "task", "prompt_index", "prompt"])


GENERATION_EXPORT_COLUMNS = [
    "strategy",
    "draft",
    "task",
    "k",
    "regime",
    "temperature",
    "measure",
    "prompt_index",
    "prompt_key",
    "steps",
    "rounds",
    "drafted",
    "accepted",
    "first_accepted",
    "first_drafted",
    "n_tokens",
    "wall_s",
    "tokens_per_s",
    "energy_j",
    "j_per_100_tokens",
]


def generations_export_stmt(exp_id: int, versions: Versions | None = None, current_only: bool = False):
    """The select behind `generations_export_frame`, in its order; `current_only`: the current version's rows only."""
    G = Generation
    computed = {
        "rounds": rounds_expr(),
        "first_accepted": case((G.drafted > 0, first_accepted_expr()), else_=0),
        "first_drafted": first_drafted_expr(),
    }
    cols = [computed[c].label(c) if c in computed else getattr(G, c) for c in GENERATION_EXPORT_COLUMNS]
    version = version_expr(versions)
    where = [G.experiment_id == exp_id, counted(exp_id, versions)]
    return (
        select(*cols, version.label("version"))
        .where(*where, *([version == "current"] if current_only else []))
        .order_by(G.task, G.regime, G.temperature, G.measure, G.strategy, G.k, G.prompt_index)
    )


def generations_export_frame(session: Session, exp_id: int, versions: Versions | None = None) -> pd.DataFrame:
    """One row per generation the summary counts (timed and replayed: `measure`; a replayed one's wall_s and
    tokens_per_s are its predicted ones), with its version and everything its cell's intervals are computed from:
    rounds, first accepted / first drafted as `storage.summary` counts them. Read in chunks, typed
    (`storage.stream`); `greenspec export --generations` streams the same rows (`generations_export_stmt`)."""
    return frame(session, generations_export_stmt(exp_id, versions))


def generations_export_rows(
    session: Session, exp_id: int, versions: Versions | None = None, current_only: bool = False, chunk: int = CHUNK
) -> tuple[list[str], Iterator[list]]:
    """`generations_export_frame`'s columns, and its rows (`current_only`: the current version's) as the driver
    gives them, `chunk` at a time. Its integer columns are never NULL (NOT NULL or coalesced), so a row prints as
    the frame's row does."""
    stmt = generations_export_stmt(exp_id, versions, current_only)
    return list(stmt.selected_columns.keys()), chunks(session, stmt, chunk)


def has_generations(session: Session, exp_id: int) -> bool:
    """Whether experiment `exp_id` stored any generation."""
    stmt = select(Generation.id).where(Generation.experiment_id == exp_id).limit(1)
    return session.scalar(stmt) is not None


def instance_bases_frame(session: Session, exp_id: int | None = None) -> pd.DataFrame:
    """Instance bases: tokens, nodes, size, training time and energy."""
    cols = [c for c in InstanceBase.__table__.columns]
    stmt = select(*cols)
    if exp_id is not None:
        stmt = stmt.where(InstanceBase.experiment_id == exp_id)
    return pd.DataFrame(session.execute(stmt).all(), columns=[c.name for c in cols])


def build_costs_frame(session: Session, exp_id: int | None) -> pd.DataFrame:
    """What each corpus's artifacts cost: one row per built artifact (train, label, distill...), time and energy."""
    ib = select(
        InstanceBase.corpus, literal("train"), InstanceBase.train_s, InstanceBase.energy_j, InstanceBase.power_source
    ).where(InstanceBase.experiment_id == exp_id)
    art = select(Artifact.corpus, Artifact.kind, Artifact.build_s, Artifact.energy_j, Artifact.power_source).where(
        Artifact.experiment_id == exp_id
    )
    rows = [*session.execute(ib).all(), *session.execute(art).all()]
    return pd.DataFrame(rows, columns=["corpus", "kind", "build_s", "energy_j", "power_source"])


def power_frame(session: Session, exp_id: int, t0: float | None = None, t1: float | None = None) -> pd.DataFrame:
    """Raw power samples of an experiment, optionally within [t0, t1] (epoch seconds)."""
    stmt = (
        select(PowerSample.t_s, PowerSample.source, PowerSample.power_w, PowerSample.energy_j, PowerSample.measured)
        .where(PowerSample.experiment_id == exp_id)
        .order_by(PowerSample.t_s)
    )
    if t0 is not None:
        stmt = stmt.where(PowerSample.t_s >= t0)
    if t1 is not None:
        stmt = stmt.where(PowerSample.t_s <= t1)
    return pd.DataFrame(session.execute(stmt).all(), columns=["t_s", "source", "power_w", "energy_j", "measured"])


def timing_spread(session: Session, exp_id: int | None) -> dict | None:
    """How far apart the timed runs of the same generation were (`[sweep] repeats` > 1): per generation, its slowest
    run over its fastest, minus 1; the median and 90th percentile over the experiment. None without repeats."""
    stmt = select(Generation.wall_s_runs).where(Generation.experiment_id == exp_id).execution_options(yield_per=10_000)
    spreads, runs = [], 0
    for (walls,) in session.execute(stmt):
        walls = [w for w in walls or () if w is not None]  # null: a second timing that did other work
        if len(walls) > 1 and min(walls) > 0:
            spreads.append(max(walls) / min(walls) - 1)
            runs = max(runs, len(walls))
    if not spreads:
        return None
    q = pd.Series(spreads).quantile([0.5, 0.9])
    return {"generations": len(spreads), "runs": runs, "median": float(q[0.5]), "p90": float(q[0.9])}


def identical_pass_noise(session: Session, exp_id: int | None) -> dict | None:
    """The run's own timing noise, measured on purpose: generations timed twice (`[sweep] timed_twice`, or
    `repeats`) made identical passes both times (the runner checks it), so |t2 / t1 - 1| / sqrt(2) is what an exact
    predictor's error against one timing would be. Returns its median (`sd`), with the number of such generations
    (`generations`, `groups`: each generation is one group); None where no generation was timed twice."""
    stmt = (
        select(Generation.wall_s_runs)
        .where(Generation.experiment_id == exp_id, Generation.measure == "timed")
        .execution_options(yield_per=10_000)
    )
    noise = [
        abs(walls[1] / walls[0] - 1) / math.sqrt(2)
        for (walls,) in session.execute(stmt)
        if walls and len(walls) > 1 and walls[0] and walls[1] is not None
    ]
    if not noise:
        return None
    return {"groups": len(noise), "generations": len(noise), "sd": float(pd.Series(noise).median())}


def plain_texts(session: Session, exp_id: int | None) -> list[tuple[str, list[int], str]]:
    """(task, token ids, text) of the experiment's plain uncached generations: the texts Table 5 describes."""
    return [
        tuple(r)
        for r in session.execute(
            select(Generation.task, Generation.tokens, Generation.text).where(
                Generation.experiment_id == exp_id, Generation.draft == "plain", Generation.regime == "uncached"
            )
        ).all()
    ]

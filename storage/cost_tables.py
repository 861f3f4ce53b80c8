"""Round-cost tables as artifacts (`cost_tables`): stored, listed, found by id or name; and the few reads a table's
reference check and a re-prediction need (an experiment's stored references, its replayed generations). Sessions
are opened by the caller, who commits.

A table is keyed by verifier (the model as named when it was measured), device description, dtype and threads;
its name is unique. Storing a table already stored (the same JSON) stores nothing and answers the stored one.

Example:
    >>> row, new = store_table(session, table, samples=samples)      # (CostTable, whether it was added)
    >>> find_table(session, "3").name == find_table(session, row.name).name
    True
    >>> tables_frame(session)                                        # one row per table: id, name, key, agreement
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence

import pandas as pd
from sqlalchemy import func, inspect, select
from sqlalchemy.orm import Session

from storage.models import CostModel, CostTable, Generation, Reference, Reprediction
from workers.decoding.costmodel import RoundCosts
from workers.portable_tables import CostTableError, default_name, device_description

TABLE_COLUMNS = ["id", "name", "verifier", "device", "dtype", "threads", "agreement", "energy", "noise", "created_at"]


def has_tables(session: Session) -> bool:
    """Whether the database has the `cost_tables` table (migration 0015) at all."""
    return inspect(session.get_bind()).has_table("cost_tables")


def table_key(table: RoundCosts) -> dict:
    """The columns that key a table: verifier, device description, dtype, threads."""
    m = table.meta
    threads = m.get("threads")
    return {
        "verifier": str(m.get("model") or table.verifier),
        "device": device_description(table),
        "dtype": None if m.get("dtype") is None else str(m["dtype"]),
        "threads": None if threads is None else int(threads),
    }


def _free_name(session: Session, name: str) -> str:
    """`name`, or `name-2`, `name-3`... where it is taken."""
    taken = set(session.scalars(select(CostTable.name).where(CostTable.name.like(f"{name}%"))))
    if name not in taken:
        return name
    return next(f"{name}-{i}" for i in range(2, len(taken) + 3) if f"{name}-{i}" not in taken)


def store_table(
    session: Session, table: RoundCosts, name: str | None = None, samples: Sequence = ()
) -> tuple[CostTable, bool]:
    """Add a table (named `name`, else its default name made unique); (its row, True), or (the row already holding
    the same table, False). A `name` another table has is refused in one line."""
    costs = json.loads(table.to_json())
    key = table_key(table)
    same = session.scalars(select(CostTable).filter_by(**key)).all()
    for row in same:
        if row.costs == costs:
            return row, False
    if name is not None and (taken := session.scalars(select(CostTable).where(CostTable.name == name)).first()):
        raise CostTableError(f"a cost table is already named {name!r} (id {taken.id}); give another --name")
    agreement = table.meta.get("agreement")
    row = CostTable(
        name=name or _free_name(session, default_name(table)),
        costs=costs,
        samples=[list(s) for s in samples] or None,
        meta=dict(table.meta),
        agreement=None if agreement is None else float(agreement),
        **key,
    )
    session.add(row)
    session.flush()
    return row, True


def find_table(session: Session, ref: str) -> CostTable | None:
    """The table whose id (digits) or name is `ref`, or None."""
    if not has_tables(session):
        return None
    row = session.scalars(select(CostTable).where(CostTable.name == ref)).first()
    if row is None and str(ref).isdigit():
        row = session.get(CostTable, int(ref))
    return row


def known_tables(session: Session) -> str:
    """The stored tables as "id name" for a refusal's line ("none" without one)."""
    if not has_tables(session):
        return "none"
    rows = session.execute(select(CostTable.id, CostTable.name).order_by(CostTable.id)).all()
    return ", ".join(f"{i} {n}" for i, n in rows) or "none"


def row_table(row: CostTable) -> RoundCosts:
    """The stored table of a row."""
    return RoundCosts.from_json(row.costs)


def row_samples(row: CostTable) -> list[tuple]:
    """The timed rounds stored with a table (none for a table imported without them)."""
    return [(str(g), str(k), int(n), int(c), float(s)) for g, k, n, c, s in row.samples or []]


def _noise_text(noise: dict) -> str:
    return ", ".join(f"{r} {v:.1%}" for r, v in sorted(noise.items()) if isinstance(v, float) and math.isfinite(v))


def tables_frame(session: Session) -> pd.DataFrame:
    """One row per stored table: id, name, its key, the reference agreement, measured or estimated energy, the noise
    of its repeats per regime, when it was stored."""
    rows = session.scalars(select(CostTable).order_by(CostTable.id)).all() if has_tables(session) else []
    out = [
        [
            r.id,
            r.name,
            r.verifier,
            r.device,
            r.dtype,
            r.threads,
            r.agreement,
            (r.meta or {}).get("energy", "estimated"),
            _noise_text((r.costs or {}).get("noise", {})),
            r.created_at,
        ]
        for r in rows
    ]
    return pd.DataFrame(out, columns=TABLE_COLUMNS)


def stored_references(session: Session, exp_id: int, n: int) -> list[tuple[list[int], list[int]]]:
    """The experiment's first `n` stored greedy references: (prompt tokens, new tokens)."""
    stmt = select(Reference.prompt_tokens, Reference.tokens).where(Reference.experiment_id == exp_id)
    return [(list(p), list(t)) for p, t in session.execute(stmt.order_by(Reference.id).limit(n)).all()]


def replay_signature(session: Session, exp_id: int) -> tuple[int, int]:
    """(replayed generations, the newest one's id) of an experiment: what a re-prediction copied."""
    g = Generation
    stmt = select(func.count(g.id), func.max(g.id)).where(g.experiment_id == exp_id, g.measure == "replay")
    count, last = session.execute(stmt).one()
    return int(count or 0), int(last or 0)


def replay_facts(session: Session, exp_id: int) -> dict:
    """What a re-prediction checks of an experiment's replayed generations: their regimes, how many lack recorded
    passes, the timed generations beside them, the verifier its own table names, the references' vocabulary."""
    g = Generation
    replays = (g.experiment_id == exp_id) & (g.measure == "replay")
    regimes = set(session.scalars(select(g.regime).where(replays).distinct()))
    no_passes = session.scalar(select(func.count(g.id)).where(replays, g.passes.is_(None))) or 0
    timed = session.scalar(select(func.count(g.id)).where(g.experiment_id == exp_id, g.measure != "replay")) or 0
    own = session.scalars(
        select(CostModel.verifier).where(CostModel.experiment_id == exp_id).order_by(CostModel.id.desc())
    ).first()
    vocab = set(session.scalars(select(Reference.vocab_size).where(Reference.experiment_id == exp_id).distinct()))
    return {"regimes": regimes, "no_passes": int(no_passes), "timed": int(timed), "own_verifier": own, "vocab": vocab}


def reprediction_of(session: Session, exp_id: int) -> Reprediction | None:
    """The record of a derived experiment (None for an experiment that ran)."""
    if not has_tables(session):
        return None
    return session.scalars(select(Reprediction).where(Reprediction.experiment_id == exp_id)).first()


def prediction_label(session: Session, exp_id: int) -> str | None:
    """ "predicted for <device> ..." for an experiment derived with a cost table, None for one that ran."""
    found = reprediction_of(session, exp_id)
    return None if found is None else found.label

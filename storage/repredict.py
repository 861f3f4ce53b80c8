"""An experiment re-predicted with another device's round-cost table, written as a derived experiment.

At temperature 0 a replayed generation's passes depend on the draft and the stored reference only, so its time on
any device is that device's table over those passes (`workers.decoding.costmodel.predict_generation`) plus the draft's own
measured seconds. The derived experiment holds copies of the source's *replayed* generations only (never a timed
one: a timed row measured its own device and stays what it measured), each with its wall and verify seconds,
tokens/s, predicted wall time and energy recomputed with the table (energy: the predicted seconds at the mean
power measured, or estimated, while the table was measured; none where the table has no power), its device the
table's label. Acceptance, passes, tokens and quality figures are copied as they are. The source's reference
cells and references come along, so the derived experiment's data versions are the source's; its spec is the
source's with a first comment line `# predicted_for = "..."`, and its cost model the table. A `repredictions` row
links it to its source and table.

Example:
    >>> exp_id = write_derived(session, Derivation(source_id, "demo@cpu-1t", label, row, table))
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass

from sqlalchemy import delete, insert, select, update
from sqlalchemy.orm import Session

from storage.cost_tables import replay_signature, row_samples
from storage.models import Cell, CostModel, CostTable, Experiment, Generation, Reference, Reprediction, StoredFrame
from storage.stored_frames import drop_frames
from workers.decoding.costmodel import RoundCosts, predict_generation
from workers.metrics import tokens_per_s

CHUNK = 2000  # generations copied per batch


@dataclass(frozen=True)
class Derivation:
    """What to derive: from which experiment, under which name and label, with which stored table."""

    source_id: int
    name: str
    label: str
    row: CostTable
    table: RoundCosts


def is_tree(strategy: str) -> bool:
    """Whether a strategy's rounds verify token trees (its name says so, as `workers.decoding.passes.width_band`)."""
    return "-tree" in strategy


@dataclass(frozen=True)
class Predictor:
    """A table and what a replayed generation predicted with it is labelled with: its device, and the mean power
    (and its source) at which its seconds become joules (None: no energy)."""

    table: RoundCosts
    label: str
    power_w: float | None
    power_source: str | None

    @classmethod
    def of(cls, table: RoundCosts, label: str) -> Predictor:
        """A portable table's: the power measured (or estimated) while it was measured, from its meta."""
        power = table.meta.get("mean_power_w")
        return cls(table, label, None if power is None else float(power), table.meta.get("power_source"))

    def columns(self, regime: str, passes, draft_s: float, n: int, tree: bool) -> dict:
        """A replayed generation's time, speed and energy on the table's device (the module doc)."""
        wall = predict_generation(self.table, regime, passes or [], draft_s, tree)
        power = self.power_w
        energy = None if power is None else wall * power
        return {
            "wall_s": wall,
            "verify_s": wall - draft_s,
            "predicted_wall_s": wall,
            "wall_s_runs": [wall],
            "tokens_per_s": tokens_per_s(n, wall),
            "device": self.label[:100],
            "energy_j": energy,
            "mean_power_w": power,
            "power_source": None if power is None else self.power_source,
            "power_measured": None if power is None else False,
            "j_per_100_tokens": energy / n * 100 if energy is not None and n else None,
            "tokens_per_j": n / energy if energy else None,
        }


def predicted_columns(g: Generation, table: RoundCosts, label: str) -> dict:
    """A replayed generation's time, speed and energy on the table's device (the module doc)."""
    return Predictor.of(table, label).columns(g.regime, g.passes, g.draft_s, g.n_tokens, is_tree(g.strategy))


def repredict_in_place(session: Session, exp_id: int, p: Predictor) -> int:
    """Every generation of the experiment predicted again with `p`'s table, in chunks of id order: a replayed one's
    time, tokens/s and energy (as the run's writer predicts them: the tree flag from its cell's options), a timed
    one's prediction beside its measurement; the count of replayed ones. The caller commits (one transaction with
    the table, so a kill leaves either table's predictions whole). A run's table measured again just before its
    timed cells (`[sweep] table_at_timing`) predicts its replays this way."""
    cols = (Generation.id, Generation.measure, Generation.regime, Generation.passes, Generation.draft_s)
    drop_frames(session, exp_id)  # its summaries were computed from the rows changed here
    last, replays = 0, 0
    while True:
        stmt = (
            select(*cols, Generation.n_tokens, Cell.params)
            .join(Cell, Cell.id == Generation.cell_id)
            .where(Generation.experiment_id == exp_id, Generation.id > last, Generation.regime.is_not(None))
            .order_by(Generation.id)
            .limit(CHUNK)
        )
        rows = session.execute(stmt).all()
        if not rows:
            return replays
        last = rows[-1].id
        replayed, timed = [], []
        for r in rows:
            tree = bool((r.params or {}).get("options", {}).get("tree"))
            new = {"id": r.id, **p.columns(r.regime, r.passes, r.draft_s, r.n_tokens, tree)}
            if r.measure == "replay":
                replayed.append(new)
            else:
                timed.append({"id": r.id, "predicted_wall_s": new["predicted_wall_s"]})
        for chunk in (replayed, timed):
            if chunk:
                session.execute(update(Generation), chunk)
        replays += len(replayed)


def _copy(row, table, skip=("id",)) -> dict:
    return {c.key: getattr(row, c.key) for c in table.__table__.columns if c.key not in skip}


def _copy_cells(session: Session, cells: list[Cell], exp_id: int) -> dict[int, int]:
    """Copies of `cells` in experiment `exp_id`; old cell id -> new."""
    if not cells:
        return {}
    session.execute(insert(Cell), [_copy(c, Cell) | {"experiment_id": exp_id} for c in cells])
    keys = [c.key for c in cells]
    stmt = select(Cell.key, Cell.id).where(Cell.experiment_id == exp_id, Cell.key.in_(keys))
    new = dict(session.execute(stmt).all())
    return {c.id: new[c.key] for c in cells}


def _copy_references(session: Session, source_id: int, exp_id: int) -> None:
    """The source's reference cells and references, in the derived experiment (its data versions)."""
    cells = session.scalars(select(Cell).where(Cell.experiment_id == source_id, Cell.kind == "reference")).all()
    ids = _copy_cells(session, list(cells), exp_id)
    refs = session.scalars(select(Reference).where(Reference.experiment_id == source_id)).all()
    rows = [_copy(r, Reference) | {"experiment_id": exp_id, "cell_id": ids[r.cell_id]} for r in refs]
    if rows:
        session.execute(insert(Reference), rows)


def _copy_replays(session: Session, d: Derivation, exp_id: int) -> None:
    """The source's replayed generations and their cells, re-predicted, in id order."""
    last = 0
    while True:
        stmt = select(Generation).where(
            Generation.experiment_id == d.source_id, Generation.measure == "replay", Generation.id > last
        )
        gens = session.scalars(stmt.order_by(Generation.id).limit(CHUNK)).all()
        if not gens:
            return
        last = gens[-1].id
        cells = session.scalars(select(Cell).where(Cell.id.in_([g.cell_id for g in gens]))).all()
        ids = _copy_cells(session, list(cells), exp_id)
        rows = [
            _copy(g, Generation)
            | {"experiment_id": exp_id, "cell_id": ids[g.cell_id]}
            | predicted_columns(g, d.table, d.label)
            for g in gens
        ]
        session.execute(insert(Generation), rows)
        for done in (*gens, *cells):  # the copies are written; the chunk's rows need not stay in the session
            session.expunge(done)


def drop_derived(session: Session, exp_id: int) -> None:
    """Delete a derived experiment and everything written for it (never an experiment that ran: the caller checks
    it has a `repredictions` row)."""
    for table in (Reprediction, CostModel, Generation, Reference, StoredFrame):
        session.execute(delete(table).where(table.experiment_id == exp_id))
    session.execute(delete(Cell).where(Cell.experiment_id == exp_id))
    session.execute(delete(Experiment).where(Experiment.id == exp_id))


def write_derived(session: Session, d: Derivation) -> int:
    """Write the derived experiment (the module doc); its id. The caller commits (one transaction)."""
    source = session.get(Experiment, d.source_id)
    note = f"# predicted_for = {json.dumps(d.label)}\n# re-predicted from experiment {json.dumps(source.name)}"
    text = f"{note} with cost table {d.row.id} ({d.row.name}); replayed generations only\n{source.spec_toml}"
    exp = Experiment(
        name=d.name,
        spec_path=source.spec_path,
        spec_toml=text,
        spec_hash=hashlib.sha256(text.encode()).hexdigest(),
        device=d.label[:100],
    )
    session.add(exp)
    session.flush()
    count, last_id = replay_signature(session, d.source_id)
    _copy_references(session, d.source_id, exp.id)
    _copy_replays(session, d, exp.id)
    meta = d.table.meta
    session.add(
        CostModel(
            cell_id=None,
            experiment_id=exp.id,
            verifier=d.table.verifier,
            device=d.label[:100],
            costs=json.loads(d.table.to_json()),
            samples=[list(s) for s in row_samples(d.row)],
            measure_s=float(meta.get("measure_s") or 0.0),
            energy_j=meta.get("energy_j"),
            mean_power_w=meta.get("mean_power_w"),
            power_source=meta.get("power_source"),
        )
    )
    session.add(
        Reprediction(
            experiment_id=exp.id,
            source_id=d.source_id,
            cost_table_id=d.row.id,
            label=d.label[:300],
            generations=count,
            source_last_id=last_id,
        )
    )
    session.flush()
    return exp.id

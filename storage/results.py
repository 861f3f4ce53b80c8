"""The driver's writes of results: built artifacts, labels, references, generations with their metrics, pass-cost
models, power samples, the experiment's device and idle power. Each takes a session opened by the caller and commits nothing
itself (as every writer of `storage.store`, which re-exports these), so one result batch is one transaction.

A reference is matched to generations by its prompt key (the reference cell's key, which hashes the prompt,
the verifier and max_new_tokens), never by position, and a stored ROUGE-L/exact match is never rewritten.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
from collections.abc import Iterable
from typing import TYPE_CHECKING

from sqlalchemy import case, func, insert, select, text, update
from sqlalchemy.orm import Session

from storage import batch_sql
from storage.batch_sql import chunks
from storage.cell_spec import CellParams, CellSpec
from storage.generation_row import INSERT_COLUMNS, RowCell, generation_row, generation_rows
from storage.models import (
    Artifact,
    Cell,
    CostModel,
    Experiment,
    Generation,
    InstanceBase,
    PowerSample,
    Reference,
    utcnow,
)
from workers.contracts import ArtifactInfo, CostModelRecord, GenerationRecord, LabelRecord, ReferenceRecord
from workers.metrics import rouge_l
from workers.replay.rounds import TWICE, rounds_differ
from workers.training.ibase import IBaseInfo

if TYPE_CHECKING:
    from storage.repredict import Predictor
    from workers.power.base import PowerSample as Sample


# the instance base's fields its `instance_bases` row stores, by name (the rest: `name`, `reused`, `node_id`)
IBASE_COLUMNS = tuple(f.name for f in dataclasses.fields(IBaseInfo) if f.name in InstanceBase.__table__.columns)


def store_ibase(session: Session, cell_id: int, info: IBaseInfo) -> None:
    """The instance base a train cell built, its fields by name."""
    cell = session.get(Cell, cell_id)
    values = {name: getattr(info, name) for name in IBASE_COLUMNS} | {"path": str(info.path)}
    session.add(InstanceBase(cell_id=cell.id, experiment_id=cell.experiment_id, corpus=cell.corpus, **values))


def store_artifact(session: Session, cell_id: int, info: ArtifactInfo | IBaseInfo) -> None:
    """What an artifact cell built: an instance base (`IBaseInfo`) or any other artifact (`ArtifactInfo`)."""
    if not isinstance(info, ArtifactInfo):
        store_ibase(session, cell_id, info)
        return
    cell = session.get(Cell, cell_id)
    session.add(
        Artifact(
            cell_id=cell.id,
            experiment_id=cell.experiment_id,
            kind=info.kind,
            corpus=cell.corpus,
            path=str(info.path),
            sha256=info.sha256,
            bytes=info.bytes,
            build_s=info.build_s,
            energy_j=info.energy_j,
            power_source=info.power_source,
            power_measured=info.power_measured,
            meta=dict(info.meta),
        )
    )


def store_label(session: Session, cell_id: int, r: LabelRecord) -> None:
    """Verifier labels a label cell wrote (an `artifacts` row, kind "label"), with their time and energy."""
    cell = session.get(Cell, cell_id)
    e = r.energy
    session.add(
        Artifact(
            cell_id=cell.id,
            experiment_id=cell.experiment_id,
            kind="label",
            corpus=cell.corpus,
            path=r.path,
            sha256=r.sha256,
            bytes=r.bytes,
            build_s=r.wall_s,
            energy_j=e and e.energy_j,
            power_source=e and e.power_source,
            power_measured=e and e.power_measured,
            meta={
                "n_tokens": r.n_tokens,
                "n_docs": r.n_docs,
                "n_labelled": r.n_labelled,
                "agreement": r.agreement,
                "chunk_tokens": r.chunk_tokens,
                "overlap_tokens": r.overlap_tokens,
                "device": r.device,
                "mean_power_w": e and e.mean_power_w,
            },
        )
    )


def artifact_paths(session: Session, exp_id: int) -> dict[str, str]:
    """artifact cell key -> file path, for the experiment's finished artifact cells."""
    out = {}
    for table in (InstanceBase, Artifact):
        out.update(
            session.execute(
                select(Cell.key, table.path)
                .join(table, table.cell_id == Cell.id)
                .where(Cell.experiment_id == exp_id, Cell.state == "done")
            ).all()
        )
    return out


def store_reference(session: Session, cell_id: int, r: ReferenceRecord) -> None:
    """A greedy reference, and the ROUGE-L/exact match of stored generations of its very prompt still lacking them."""
    cell = session.get(Cell, cell_id)
    spec = CellSpec(key=cell.key, kind=cell.kind, task=cell.task, prompt_index=cell.prompt_index, id=cell.id)
    store_references(session, cell.experiment_id, [(spec, r)])


def store_references(session: Session, exp_id: int, refs: list[tuple[CellSpec, ReferenceRecord]]) -> None:
    """Greedy references (each its reference cell and record) in one statement, and the ROUGE-L/exact match of the
    stored generations of their prompts still lacking them (one query: in a replayed run, usually none yet)."""
    if not refs:
        return
    rows = [
        {
            "cell_id": c.id,
            "experiment_id": exp_id,
            "task": c.task,
            "prompt_index": c.prompt_index,
            "prompt_key": c.key,
            "prompt_text": r.prompt_text,
            "prompt_tokens": list(r.prompt_tokens),
            "tokens": list(r.tokens),
            "text": r.text,
            "wall_s": r.wall_s,
            "vocab_size": r.vocab_size,
            "eos_id": r.eos_id,
        }
        for c, r in refs
    ]
    session.execute(insert(Reference), rows)
    tokens = {row["prompt_key"]: row["tokens"] for row in rows}
    gens = session.scalars(
        select(Generation).where(
            Generation.experiment_id == exp_id,
            Generation.prompt_key.in_(list(tokens)),
            Generation.rouge_l.is_(None),
            Generation.temperature == 0,
        )
    )
    for g in gens:  # a metric once stored is never rewritten, so only generations waiting for this reference
        ref = tokens[g.prompt_key]
        g.rouge_l, g.exact_match = rouge_l(g.tokens, ref), list(g.tokens) == ref


def _reference_tokens(session: Session, exp_id: int, prompt_key: str | None) -> list[int] | None:
    if prompt_key is None:
        return None
    return session.scalars(
        select(Reference.tokens).where(Reference.experiment_id == exp_id, Reference.prompt_key == prompt_key)
    ).first()


def store_generation(session: Session, cell_id: int, g: GenerationRecord) -> None:
    """One sweep generation with its metrics, energy and (when its reference exists) ROUGE-L."""
    cell = session.get(Cell, cell_id)
    params = CellParams.from_json(cell.params)
    ref = _reference_tokens(session, cell.experiment_id, params.reference)
    row = RowCell(
        cell.id,
        cell.strategy,
        cell.draft,
        cell.task,
        cell.prompt_index,
        params.reference,
        cell.k,
        cell.regime,
        cell.temperature or 0.0,
        params.top_k,
        params.top_p,
        bool(params.options.get("tree")),
    )
    session.add(Generation(**generation_row(cell.experiment_id, row, g, ref)))


def store_generations(
    session: Session,
    exp_id: int,
    done: list[tuple[CellSpec, GenerationRecord, str]],
    predictor: Predictor | None = None,
) -> None:
    """Many finished cells at once, each (cell, its generation, the worker that made it): their prompts' references
    read in one statement, their rows (`storage.generation_row.generation_rows`, as `store_generation` writes them,
    predicted by `predictor`, the run's round-cost table) inserted in one, the cells marked done in one per worker."""
    if not done:
        return
    keys = {c.params.reference for c, _, _ in done if c.params.reference is not None}
    stmt = select(Reference.prompt_key, Reference.tokens).where(
        Reference.experiment_id == exp_id, Reference.prompt_key.in_(keys)
    )
    refs = dict(session.execute(stmt).all()) if keys else {}
    items = [(RowCell.of(c), g, refs.get(c.params.reference)) for c, g, _ in done]
    insert_rows(session, generation_rows(exp_id, items, predictor))
    mark_done(session, [(c.id, w) for c, _, w in done])


def timed_run_count(session: Session):
    """SQL: how many timed runs a generation's `wall_s_runs` holds (SQLite, PostgreSQL; NULL or JSON null: none)."""
    g = Generation
    if session.get_bind().dialect.name == "sqlite":
        return func.coalesce(func.json_array_length(g.wall_s_runs), 0)
    # json_array_length refuses a JSON scalar (a stored None is JSON null)
    return case((func.json_typeof(g.wall_s_runs) == "array", func.json_array_length(g.wall_s_runs)), else_=0)


def once_timed(session: Session, exp_id: int) -> list[tuple[int, str]]:
    """(generation id, cell key) of the experiment's timed greedy generations timed once so far, in the order they
    were stored: the caller's spec says which of them are in the `[sweep] timed_twice` sample and are due their
    second timing (`add_second_timing`)."""
    g = Generation
    stmt = (
        select(g.id, Cell.key)
        .join(Cell, Cell.id == g.cell_id)
        .where(g.experiment_id == exp_id, g.measure == "timed", g.temperature == 0, timed_run_count(session) < 2)
        .order_by(g.id)
    )
    return [(int(i), str(k)) for i, k in session.execute(stmt).all()]


def add_second_timing(session: Session, generation_id: int, g: GenerationRecord) -> str | None:
    """A stored timed generation's second timing (run after every first timing of its run, `[sweep] timed_twice`),
    appended to the row's `wall_s_runs`; None when it made the same rounds as the stored run, else the first round
    that differs (`rounds_differ`, the check a timed run and its replay get). One that made other rounds is no timing
    of the same work: null is appended in its place (the generation is not due again, and no reader pairs it). The
    row's wall time, tokens/s and energy stay the first timing's."""
    row = session.get(Generation, generation_id)
    differs = rounds_differ(row, g, TWICE)
    # a JSON column: assigned, not mutated in place
    row.wall_s_runs = [*(row.wall_s_runs or [row.wall_s]), None if differs else float(g.wall_s)]
    return differs


def insert_rows(session: Session, rows: list[tuple]) -> None:
    """Generations' rows as `generation_rows` makes them, in one statement handed to the database driver as it is
    (`storage.batch_sql`: no per-row bind processing, the JSON already encoded)."""
    if not rows:
        return
    if batch_sql.supported(session):
        batch_sql.run_many(session, f"INSERT INTO generations ({_COLUMN_LIST}) VALUES ({', '.join('?' * _N)})", rows)
        return
    binds = [f"c{i}" for i in range(_N)]  # any other driver: untyped named binds (the values are already encoded)
    sql = text(f"INSERT INTO generations ({_COLUMN_LIST}) VALUES ({', '.join(':' + b for b in binds)})")
    session.execute(sql, [dict(zip(binds, r)) for r in rows])


def mark_done(session: Session, cells: Iterable[tuple[int, str]]) -> None:
    """Cells (id, the worker that made them) whose rows were stored: done, one statement per worker."""
    by_worker: dict[str, list[int]] = {}
    for cell_id, w in cells:
        by_worker.setdefault(w, []).append(cell_id)
    now = utcnow()
    for w, ids in by_worker.items():  # a replay task's cells share theirs
        for chunk in chunks(ids):
            if batch_sql.supported(session):
                at = batch_sql.bound(session, Cell.__table__.c.finished_at, now)
                sql = "UPDATE cells SET state = 'done', error = NULL, finished_at = ?, worker = ? WHERE id IN ({ids})"
                batch_sql.run(session, sql, (at, w), ids=chunk)
                continue
            stmt = update(Cell).where(Cell.id.in_(chunk)).values(state="done", error=None, finished_at=now, worker=w)
            session.execute(stmt.execution_options(synchronize_session=False))


_COLUMN_LIST, _N = ", ".join(INSERT_COLUMNS), len(INSERT_COLUMNS)


def store_cost_model(session: Session, cell_id: int, r: CostModelRecord) -> None:
    """A round-cost table a cost model cell measured, with the rounds it was built from and its time and energy."""
    cell = session.get(Cell, cell_id)
    e = r.energy
    session.add(
        CostModel(
            cell_id=cell.id,
            experiment_id=cell.experiment_id,
            verifier=r.verifier,
            device=r.device,
            costs=json.loads(r.costs),
            samples=[[str(g), str(kind), int(n), int(c), float(s)] for g, kind, n, c, s in r.samples],
            measure_s=r.measure_s,
            energy_j=e and e.energy_j,
            mean_power_w=e and e.mean_power_w,
            power_source=e and e.power_source,
        )
    )


def store_samples(session: Session, exp_id: int, samples: Iterable[Sample]) -> None:
    """Raw power samples (t_s, source, power_w, energy_j, measured)."""
    rows = [
        {
            "experiment_id": exp_id,
            "t_s": s.t_s,
            "source": s.source,
            "power_w": s.power_w,
            "energy_j": s.energy_j,
            "measured": bool(s.measured),
        }
        for s in samples
    ]
    if rows:
        session.execute(PowerSample.__table__.insert(), rows)


def set_device(session: Session, exp_id: int, device: str, idle_power_w: float | None = None) -> None:
    """The accelerator worker's device and idle power (when it measured one, else the floor stored before the run)."""
    floor = {} if idle_power_w is None else {"idle_power_w": idle_power_w}
    session.execute(
        update(Experiment)
        .where(Experiment.id == exp_id)
        .values(device=device, **floor, updated_at=dt.datetime.now(dt.timezone.utc))
    )


def set_idle_power(session: Session, exp_id: int, idle_power_w: float | None) -> None:
    """The idle power floor measured before a run (None: unknown), on the experiment row."""
    session.execute(
        update(Experiment)
        .where(Experiment.id == exp_id)
        .values(idle_power_w=idle_power_w, updated_at=dt.datetime.now(dt.timezone.utc))
    )

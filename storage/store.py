"""The driver's writes and state changes: experiments, cells, leases; the result writers live in `storage.results`
and are re-exported here. Only the driver calls the writers.

Every function takes a session opened by the caller and commits nothing itself, so one result batch is one
transaction: a kill at any moment leaves each cell either finished with its row, or not.

A cell's life: pending -> running (`mark_running`, one more attempt) -> done (`mark_finished`, with its result
row) or back to pending / failed (`mark_failure`); `reset_running` puts a dead driver's running cells back;
`fail_dependents` fails the pending cells that needed an artifact which could not be built;
`requeue_artifact` puts a done artifact cell whose file is missing or corrupt back to pending.

A reference is matched to generations by its prompt key (the reference cell's key, which hashes the prompt,
the verifier and max_new_tokens), never by position, and a stored ROUGE-L/exact match is never rewritten.
Leases (`acquire_lease`, `renew_lease`, `release_lease`) keep a second driver off a running experiment.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path

from sqlalchemy import Text, case, cast, delete, insert, select, type_coerce, update
from sqlalchemy.exc import DBAPIError, IntegrityError
from sqlalchemy.orm import Session

from storage import batch_sql
from storage.batch_sql import chunks
from storage.cell_spec import CellParams, CellSpec
from storage.db import open_reader
from storage.models import Artifact, Cell, Experiment, InstanceBase, Lease, utcnow
from storage.results import (  # noqa: F401 (the result writers, re-exported: every write goes through `store`)
    add_second_timing,
    artifact_paths,
    insert_rows,
    mark_done,
    once_timed,
    set_device,
    set_idle_power,
    store_artifact,
    store_cost_model,
    store_generation,
    store_generations,
    store_ibase,
    store_label,
    store_reference,
    store_references,
    store_samples,
)
from workers.training.artifacts import ACCELERATOR_KINDS, CPU_KINDS

ARTIFACT_KINDS = CPU_KINDS  # cell kinds that build an artifact other cells need on CPU workers
ACCELERATOR_ARTIFACT_KINDS = ACCELERATOR_KINDS  # ... and on the accelerator worker (verifier labels)
ARTIFACT_ERRORS = ("IBaseError",)  # a sweep cell failing with these found its artifact missing or corrupt
_REFUND = case((Cell.attempts > 0, Cell.attempts - 1), else_=0)  # an attempt that was not the cell's fault


# ----------------------------------------------------------------------------- experiments and cells


def find_experiment(session: Session, name: str | None) -> Experiment | None:
    """Experiment `name`, or the newest one when `name` is None."""
    stmt = select(Experiment).order_by(Experiment.id.desc())
    return session.scalars(stmt.where(Experiment.name == name) if name else stmt).first()


def registered_digest(db_url: str, name: str) -> str | None:
    """The digest of the grid experiment `name` registered last (None: no database, no such experiment, or a schema
    older than the digest), read without writing anything."""
    readers = open_reader(db_url)
    if readers is None:
        return None
    try:
        with readers() as s:
            return s.scalars(select(Experiment.grid_digest).where(Experiment.name == name)).first()
    except DBAPIError:  # an older schema: the run migrates it, then registers in full
        return None
    finally:
        readers.kw["bind"].dispose()


def upsert_experiment(session: Session, name: str, spec_text: str, spec_hash: str, spec_path: str | None) -> Experiment:
    """The experiment called `name`, created or updated to the newest spec text."""
    exp = session.scalars(select(Experiment).where(Experiment.name == name)).first()
    if exp is None:
        exp = Experiment(name=name, spec_toml=spec_text, spec_hash=spec_hash, spec_path=spec_path)
        session.add(exp)
        session.flush()
    else:
        exp.spec_toml, exp.spec_hash, exp.spec_path = spec_text, spec_hash, spec_path
    return exp


READ_CHUNK = 10_000  # pending cells read per fetch
INSERT_CHUNK = 5_000  # cells inserted per statement batch: memory bounded whatever the grid's size


def _cell_row(exp_id: int, c: CellSpec, now) -> dict:
    return {
        "experiment_id": exp_id,
        "key": c.key,
        "kind": c.kind,
        "state": "pending",
        "strategy": c.strategy,
        "draft": c.draft,
        "task": c.task,
        "corpus": c.corpus,
        "prompt_index": c.prompt_index,
        "k": c.k,
        "regime": c.regime,
        "temperature": c.temperature,
        "params": c.params.to_json(),
        "attempts": 0,
        "created_at": now,
    }


# `_cell_row`'s columns as the plain insert binds them: the JSON and the time last (encoded and bound once per batch)
CELL_COLUMNS = (
    *(c for c in _cell_row(0, CellSpec(key="", kind=""), None) if c not in ("params", "created_at")),
    "params",
    "created_at",
)
CELL_INSERT = f"INSERT INTO cells ({', '.join(CELL_COLUMNS)}) VALUES ({', '.join('?' * len(CELL_COLUMNS))})"


def add_cells(session: Session, exp_id: int, cells: Iterable[CellSpec]) -> int:
    """Insert the cells whose key is new; refresh the params of unfinished known ones whose params changed (they are
    derived from the spec: keep them current; a resume, whose spec is the stored one, rewrites none). Streams
    `cells` in chunks; holds the experiment's unfinished keys with a hash of each one's stored params. Returns how
    many were added."""
    unfinished = select(Cell.key, Cell.id, type_coerce(Cell.params, Text)).where(
        Cell.experiment_id == exp_id, Cell.state != "done"
    )
    have = {key: (cell_id, _params_hash(params)) for key, cell_id, params in session.execute(unfinished)}
    done = set(session.scalars(select(Cell.key).where(Cell.experiment_id == exp_id, Cell.state == "done")))
    now, added = utcnow(), 0
    rows: list[dict] = []
    refresh: list[dict] = []

    def flush() -> None:
        if rows and batch_sql.supported(session):  # handed to the database driver as it is (10^6 cells: half the time)
            at = batch_sql.bound(session, Cell.__table__.c.created_at, now)
            values = [(*(r[c] for c in CELL_COLUMNS[:-2]), batch_sql.json_text(r["params"]), at) for r in rows]
            batch_sql.run_many(session, CELL_INSERT, values)
        elif rows:
            session.execute(Cell.__table__.insert(), rows)
        if refresh:
            session.execute(update(Cell), refresh)
        rows.clear()
        refresh.clear()

    for c in cells:
        if (known := have.get(c.key)) is not None:
            params = c.params.to_json()
            if _params_hash(params) != known[1]:
                refresh.append({"id": known[0], "params": params})
        elif c.key not in done:
            rows.append(_cell_row(exp_id, c, now))
            added += 1
        if len(rows) + len(refresh) >= INSERT_CHUNK:
            flush()
    flush()
    return added


def _params_hash(params: str | dict | None) -> int:
    """A hash of a cell's params as its JSON column holds them (SQLite gives the text, PostgreSQL's driver the
    parsed value; both hash as the text the JSON type writes)."""
    return hash(params if isinstance(params, str) else batch_sql.json_text(params))


def pending_cells(session: Session, exp_id: int, kinds: Iterable[str]) -> list[CellSpec]:
    """The experiment's pending cells of these kinds, as plain data, streamed (`cell_specs`)."""
    return cell_specs(session, exp_id, kinds)


def cell_specs(
    session: Session, exp_id: int, kinds: Iterable[str], state: str = "pending", keys: Iterable[str] | None = None
) -> list[CellSpec]:
    """The experiment's cells of these kinds in `state` (only those of `keys` when given), as plain data, streamed.
    Their repeated values are shared: one object per distinct string and per distinct params text (a prompt's params
    serve every k and regime), so 10^6 pending cells take a few hundred bytes each, not a parsed JSON document each."""
    names = ("key", "kind", "strategy", "draft", "task", "corpus", "prompt_index", "k", "regime", "temperature")
    stmt = select(*(getattr(Cell, n) for n in names), cast(Cell.params, Text), Cell.id, Cell.attempts).where(
        Cell.experiment_id == exp_id, Cell.kind.in_(list(kinds)), Cell.state == state
    )
    wanted = None if keys is None else set(keys)
    shared: dict = {}  # each distinct value once: the strings, and the params by their JSON text
    out = []
    for key, *columns, params, cell_id, attempts in session.connection().execute(  # Core rows: the ORM's cost 2x
        stmt.execution_options(yield_per=READ_CHUNK)
    ):
        if wanted is not None and key not in wanted:
            continue
        if (got := shared.get(("params", params))) is None:
            got = shared[("params", params)] = CellParams.from_json(json.loads(params) if params else None)
        values = [shared.setdefault(v, v) if isinstance(v, str) else v for v in columns]  # the key is unique: kept
        out.append(CellSpec(key, *values, params=got, id=cell_id, attempts=attempts))
    return out


def stale_cells(session: Session, exp_id: int, keys: Iterable[str]) -> list[int]:
    """Ids of the experiment's unfinished cells (pending, running or failed) whose key is not among `keys` (streamed:
    only the stored unfinished keys are held): cells of an earlier version of its spec, which the current one would
    run with other settings."""
    unfinished = dict(
        session.execute(select(Cell.key, Cell.id).where(Cell.experiment_id == exp_id, Cell.state != "done")).all()
    )
    if unfinished:
        for key in keys:
            unfinished.pop(key, None)
    return list(unfinished.values())


def drop_cells(session: Session, cell_ids: list[int]) -> int:
    """Delete unfinished cells (they have no result rows); returns how many."""
    n = 0
    for lo in range(0, len(cell_ids), 10_000):
        res = session.execute(delete(Cell).where(Cell.id.in_(cell_ids[lo : lo + 10_000]), Cell.state != "done"))
        n += res.rowcount or 0
    return n


def cell_states(session: Session, ids: Iterable[int]) -> dict[int, str]:
    """id -> state of these cells."""
    ids = list(ids)
    return dict(session.execute(select(Cell.id, Cell.state).where(Cell.id.in_(ids))).all()) if ids else {}


def reset_running(session: Session, exp_id: int) -> int:
    """Cells left `running` by a killed or interrupted driver go back to pending, their attempt given back."""
    res = session.execute(
        update(Cell)
        .where(Cell.experiment_id == exp_id, Cell.state == "running")
        .values(state="pending", worker=None, attempts=_REFUND)
    )
    return res.rowcount or 0


def retry_failed(session: Session, exp_id: int) -> int:
    """Failed cells go back to pending with a fresh attempt count (and a missing/corrupt artifact they needed
    is rebuilt); returns how many cells."""
    failed = session.execute(
        select(Cell.params, Cell.error).where(Cell.experiment_id == exp_id, Cell.state == "failed")
    ).all()
    needed = {
        k for params, error in failed if is_artifact_error(error) for k in CellParams.from_json(params).needs.values()
    }
    for key in needed:
        requeue_artifact(session, exp_id, key)
    res = session.execute(
        update(Cell)
        .where(Cell.experiment_id == exp_id, Cell.state == "failed")
        .values(state="pending", attempts=0, error=None)
    )
    return res.rowcount or 0


def is_artifact_error(error: str | None) -> bool:
    """Whether a cell's error says an artifact it needs is missing or corrupt (so rebuilding it may help)."""
    return bool(error) and error.startswith(ARTIFACT_ERRORS)


def requeue_artifact(session: Session, exp_id: int, key: str) -> CellSpec | None:
    """A done artifact cell whose file is missing or corrupt goes back to pending (its result row dropped)."""
    cell = session.scalars(select(Cell).where(Cell.experiment_id == exp_id, Cell.key == key)).first()
    if cell is None or cell.kind not in ARTIFACT_KINDS:
        return None
    for table in (InstanceBase, Artifact):
        session.execute(delete(table).where(table.cell_id == cell.id))
    cell.state, cell.attempts, cell.error, cell.finished_at = "pending", 0, None, None
    return CellSpec(
        id=cell.id, key=cell.key, kind=cell.kind, corpus=cell.corpus, params=CellParams.from_json(cell.params)
    )


def missing_artifacts(session: Session, exp_id: int) -> list[str]:
    """Keys of done artifact cells whose file no longer exists."""
    return sorted(key for key, path in artifact_paths(session, exp_id).items() if not Path(path).exists())


RUNNING = "UPDATE cells SET state = 'running', attempts = attempts + 1, started_at = ?, worker = ? WHERE id IN ({ids})"


def mark_running(session: Session, cell_ids: list[int], worker: str | None = None) -> None:
    """Dispatched cells: state running, one more attempt (`storage.batch_sql`: the driver runs this per batch)."""
    now = utcnow()
    for chunk in chunks(cell_ids):
        if batch_sql.supported(session):
            at = batch_sql.bound(session, Cell.__table__.c.started_at, now)
            batch_sql.run(session, RUNNING, (at, worker), ids=chunk)
            continue
        session.execute(
            update(Cell)
            .where(Cell.id.in_(chunk))
            .values(state="running", attempts=Cell.attempts + 1, started_at=now, worker=worker)
        )


def mark_finished(session: Session, cell_id: int, worker: str | None) -> None:
    """A cell whose result row was stored."""
    session.execute(
        update(Cell).where(Cell.id == cell_id).values(state="done", error=None, finished_at=utcnow(), worker=worker)
    )


def refund_attempt(session: Session, cell_id: int) -> None:
    """A dispatched cell that never started (its worker died first) goes back to pending without spending the
    attempt its dispatch counted."""
    session.execute(update(Cell).where(Cell.id == cell_id).values(state="pending", worker=None, attempts=_REFUND))


def mark_failure(session: Session, cell_id: int, error: str, final: bool, refund: bool = False) -> None:
    """Record a failed attempt: the cell fails for good when `final`, else goes back to pending (`refund`: the
    attempt does not count, e.g. its artifact is being rebuilt)."""
    values = {"state": "failed" if final else "pending", "error": error, "finished_at": utcnow() if final else None}
    if refund:
        values["attempts"] = _REFUND
    session.execute(update(Cell).where(Cell.id == cell_id).values(**values))


def cell_error(session: Session, cell_id: int) -> str | None:
    return session.get(Cell, cell_id).error


def fail_dependents(session: Session, exp_id: int, cell_ids: Iterable[int], reason: str) -> int:
    """Pending cells that needed an artifact which could not be built fail with `reason`; returns how many."""
    ids = list(cell_ids)
    if not ids:
        return 0
    res = session.execute(
        update(Cell)
        .where(Cell.experiment_id == exp_id, Cell.id.in_(ids), Cell.state == "pending")
        .values(state="failed", error=reason, finished_at=utcnow())
    )
    return res.rowcount or 0


# ----------------------------------------------------------------------------- leases (one driver per experiment)


def acquire_lease(session: Session, experiment: str, holder: str, ttl_s: float, now_s: float) -> str | None:
    """Take the experiment's lease if it is free, lapsed or ours; None when taken, else the holder that keeps it.

    Atomic on SQLite and PostgreSQL: a conditional UPDATE, else an INSERT that the primary key lets only one
    driver win. Call it in a fresh session and commit at once (a refusal rolls the session back)."""
    values = {"holder": holder, "expires_at": now_s + ttl_s, "acquired_at": now_s}
    res = session.execute(
        update(Lease)
        .where(Lease.experiment == experiment, (Lease.expires_at < now_s) | (Lease.holder == holder))
        .values(**values)
    )
    if res.rowcount:
        return None
    try:
        session.execute(insert(Lease).values(experiment=experiment, **values))
        return None
    except IntegrityError:  # a live lease, or a racing driver inserted first
        session.rollback()
        return session.scalar(select(Lease.holder).where(Lease.experiment == experiment)) or "another driver"


def take_over_lease(session: Session, experiment: str, dead: str, holder: str, ttl_s: float, now_s: float) -> bool:
    """Take the lease from a holder known to be dead; False when it is no longer `dead`'s (another driver was quicker)."""
    res = session.execute(
        update(Lease)
        .where(Lease.experiment == experiment, Lease.holder == dead)
        .values(holder=holder, expires_at=now_s + ttl_s, acquired_at=now_s)
    )
    return bool(res.rowcount)


def renew_lease(session: Session, experiment: str, holder: str, ttl_s: float, now_s: float) -> bool:
    """Push our lease's expiry forward; False when it is no longer ours (it lapsed and another driver took it)."""
    res = session.execute(
        update(Lease).where(Lease.experiment == experiment, Lease.holder == holder).values(expires_at=now_s + ttl_s)
    )
    return bool(res.rowcount)


def release_lease(session: Session, experiment: str, holder: str) -> None:
    """Give our lease up (a finished or interrupted driver)."""
    session.execute(delete(Lease).where(Lease.experiment == experiment, Lease.holder == holder))


def lease_holder(session: Session, experiment: str, now_s: float) -> str | None:
    """Who holds the experiment's lease now (None when free or lapsed)."""
    return session.scalar(select(Lease.holder).where(Lease.experiment == experiment, Lease.expires_at >= now_s))

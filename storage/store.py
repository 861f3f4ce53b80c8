"""The driver's writes and state changes: experiments, cells, results. Only the driver calls the writers.

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

import datetime as dt
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from sqlalchemy import case, delete, insert, select, update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from storage.cell import CellParams, CellSpec
from storage.models import Artifact, Cell, Experiment, Generation, InstanceBase, Lease, PowerSample, Reference, utcnow
from workers.artifacts import ACCELERATOR_KINDS, CPU_KINDS
from workers.contracts import ArtifactInfo, GenerationRecord, LabelRecord, ReferenceRecord
from workers.metrics import acceptance_rate, mal, rouge_l, tokens_per_s

if TYPE_CHECKING:
    from workers.power.base import PowerSample as Sample

ARTIFACT_KINDS = CPU_KINDS  # cell kinds that build an artifact other cells need on CPU workers
ACCELERATOR_ARTIFACT_KINDS = ACCELERATOR_KINDS  # ... and on the accelerator worker (verifier labels)
ARTIFACT_ERRORS = ("IBaseError",)  # a sweep cell failing with these found its artifact missing or corrupt
_REFUND = case((Cell.attempts > 0, Cell.attempts - 1), else_=0)  # an attempt that was not the cell's fault


# ----------------------------------------------------------------------------- experiments and cells


def find_experiment(session: Session, name: str | None) -> Experiment | None:
    """Experiment `name`, or the newest one when `name` is None."""
    stmt = select(Experiment).order_by(Experiment.id.desc())
    return session.scalars(stmt.where(Experiment.name == name) if name else stmt).first()


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


def add_cells(session: Session, exp_id: int, cells: Iterable[CellSpec]) -> int:
    """Insert the cells whose key is new; refresh the params of unfinished known ones. Returns how many were added."""
    have = dict(
        session.execute(select(Cell.key, Cell.id).where(Cell.experiment_id == exp_id, Cell.state != "done")).all()
    )
    done = set(session.scalars(select(Cell.key).where(Cell.experiment_id == exp_id, Cell.state == "done")))
    now = utcnow()
    rows, refresh = [], []
    for c in cells:
        if c.key in have:
            refresh.append(
                {"id": have[c.key], "params": c.params.to_json()}
            )  # params are derived from the spec: keep current
        elif c.key not in done:
            rows.append(
                {
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
            )
    if rows:
        session.execute(Cell.__table__.insert(), rows)
    if refresh:
        session.execute(update(Cell), refresh)
    return len(rows)


def pending_cells(session: Session, exp_id: int, kinds: Iterable[str]) -> list[CellSpec]:
    """The experiment's pending cells of these kinds, as plain data."""
    rows = session.execute(
        select(
            Cell.id,
            Cell.key,
            Cell.kind,
            Cell.strategy,
            Cell.draft,
            Cell.task,
            Cell.corpus,
            Cell.prompt_index,
            Cell.k,
            Cell.regime,
            Cell.temperature,
            Cell.params,
            Cell.attempts,
        ).where(Cell.experiment_id == exp_id, Cell.kind.in_(list(kinds)), Cell.state == "pending")
    ).all()
    return [
        CellSpec(
            id=r.id,
            key=r.key,
            kind=r.kind,
            strategy=r.strategy,
            draft=r.draft,
            task=r.task,
            corpus=r.corpus,
            prompt_index=r.prompt_index,
            k=r.k,
            regime=r.regime,
            temperature=r.temperature,
            attempts=r.attempts,
            params=CellParams.from_json(r.params),
        )
        for r in rows
    ]


def stale_cells(session: Session, exp_id: int, keys: set[str]) -> list[int]:
    """Ids of the experiment's unfinished cells (pending, running or failed) whose key is not in `keys`: cells of an
    earlier version of its spec, which the current one would run with other settings."""
    rows = session.execute(select(Cell.id, Cell.key).where(Cell.experiment_id == exp_id, Cell.state != "done")).all()
    return [r.id for r in rows if r.key not in keys]


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
    from pathlib import Path

    return sorted(key for key, path in artifact_paths(session, exp_id).items() if not Path(path).exists())


def mark_running(session: Session, cell_ids: list[int], worker: str | None = None) -> None:
    """Dispatched cells: state running, one more attempt."""
    session.execute(
        update(Cell)
        .where(Cell.id.in_(cell_ids))
        .values(state="running", attempts=Cell.attempts + 1, started_at=utcnow(), worker=worker)
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


# ----------------------------------------------------------------------------- results


def store_ibase(session: Session, cell_id: int, info: Any) -> None:
    """The instance base a train cell built (`info`: workers.trainer.IBaseInfo)."""
    cell = session.get(Cell, cell_id)
    session.add(
        InstanceBase(
            cell_id=cell.id,
            experiment_id=cell.experiment_id,
            corpus=cell.corpus,
            path=str(info.path),
            sha256=info.sha256,
            backend=info.backend,
            window=info.window,
            order=info.order,
            tokenizer_id=info.tokenizer_id,
            tokens=info.tokens,
            instances=info.instances,
            nodes_before_prune=info.nodes_before_prune,
            nodes_after_prune=info.nodes_after_prune,
            bytes=info.bytes,
            train_s=info.train_s,
            energy_j=info.energy_j,
            power_source=info.power_source,
            power_measured=getattr(info, "power_measured", None),
            partitions=getattr(info, "partitions", None),
            memory_budget_bytes=getattr(info, "memory_budget_bytes", None),
            peak_rss_bytes=getattr(info, "peak_rss_bytes", None),
            cpu_s=getattr(info, "cpu_s", None),
            energy_attribution=getattr(info, "energy_attribution", None),
        )
    )


def store_artifact(session: Session, cell_id: int, info: Any) -> None:
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
    session.add(
        Reference(
            cell_id=cell.id,
            experiment_id=cell.experiment_id,
            task=cell.task,
            prompt_index=cell.prompt_index,
            prompt_key=cell.key,
            prompt_text=r.prompt_text,
            prompt_tokens=list(r.prompt_tokens),
            tokens=list(r.tokens),
            text=r.text,
            wall_s=r.wall_s,
        )
    )
    gens = session.scalars(
        select(Generation).where(
            Generation.experiment_id == cell.experiment_id,
            Generation.prompt_key == cell.key,
            Generation.rouge_l.is_(None),
            Generation.temperature == 0,
        )
    )
    for g in gens:  # a metric once stored is never rewritten, so only generations waiting for this reference
        g.rouge_l, g.exact_match = rouge_l(g.tokens, list(r.tokens)), list(g.tokens) == list(r.tokens)


def _reference_tokens(session: Session, exp_id: int, prompt_key: str | None) -> list[int] | None:
    if prompt_key is None:
        return None
    return session.scalars(
        select(Reference.tokens).where(Reference.experiment_id == exp_id, Reference.prompt_key == prompt_key)
    ).first()


def _mal(g: GenerationRecord) -> float | None:
    """MAL over the generation's rounds (`workers.metrics.mal`); none without a round."""
    return mal(g.accepted, len(g.accepted_per_step)) if g.accepted_per_step else None


def store_generation(session: Session, cell_id: int, g: GenerationRecord) -> None:
    """One sweep generation with its metrics, energy and (when its reference exists) ROUGE-L."""
    cell = session.get(Cell, cell_id)
    params = CellParams.from_json(cell.params)
    prompt_key = params.reference  # the key of its prompt's reference cell (prepare.py)
    ref = _reference_tokens(session, cell.experiment_id, prompt_key)
    tokens, n, e = list(g.tokens), len(g.tokens), g.energy
    greedy = not cell.temperature  # a sampled text is not meant to equal the greedy reference: no quality figures
    session.add(
        Generation(
            cell_id=cell.id,
            experiment_id=cell.experiment_id,
            strategy=cell.strategy,
            draft=cell.draft,
            task=cell.task,
            prompt_index=cell.prompt_index,
            prompt_key=prompt_key,
            k=cell.k,
            regime=cell.regime,
            n_prompt_tokens=g.n_prompt_tokens,
            temperature=cell.temperature or 0.0,
            top_k=params.top_k,
            top_p=params.top_p,
            first_checked=g.first_checked,
            n_tokens=n,
            steps=g.steps,
            drafted=g.drafted,
            accepted=g.accepted,
            acceptance=acceptance_rate(g.accepted, g.drafted) if g.drafted else None,
            mal=_mal(g),
            accept_hist=list(g.accept_hist),
            accepted_per_step=list(g.accepted_per_step),
            tokens_per_step=list(g.tokens_per_step),
            fastpath_rejects=g.fastpath_rejects,
            wall_s=g.wall_s,
            wall_s_runs=list(g.wall_s_runs) or [g.wall_s],
            draft_s=g.draft_s,
            verify_s=g.verify_s,
            tokens_per_s=tokens_per_s(n, g.wall_s),
            started_at=g.started_at,
            ended_at=g.ended_at,
            energy_j=e and e.energy_j,
            mean_power_w=e and e.mean_power_w,
            j_per_100_tokens=e and e.j_per_100_tokens,
            tokens_per_j=e and e.tokens_per_j,
            power_source=e and e.power_source,
            power_measured=e and e.power_measured,
            rouge_l=rouge_l(tokens, ref) if ref is not None and greedy else None,
            exact_match=(tokens == list(ref)) if ref is not None and greedy else None,
            bridged=g.bridged,
            stopped=g.stopped,
            device=g.device,
            tokens=tokens,
            text=g.text,
            **({"first_accepted": g.first_accepted} if g.first_accepted is not None else {}),
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

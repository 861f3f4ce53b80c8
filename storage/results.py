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

from sqlalchemy import insert, select, update
from sqlalchemy.orm import Session

from storage.cell_spec import CellParams, CellSpec
from storage.generation_row import record_columns
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
from workers.metrics import acceptance_rate, mal, rouge_l, tokens_per_s
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
            vocab_size=r.vocab_size,
            eos_id=r.eos_id,
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


def _generation_row(exp_id: int, cell, params: CellParams, g: GenerationRecord, ref: list[int] | None) -> dict:
    """The `generations` row of a record: its own columns, its cell's coordinates (a stored `Cell` or the driver's
    `CellSpec`, read alike) and its metrics; ROUGE-L and exact match against its prompt's reference `ref` (None: not
    made yet, no quality figures)."""
    tokens, n = list(g.tokens), len(g.tokens)
    greedy = not cell.temperature  # a sampled text is not meant to equal the greedy reference: no quality figures
    return {
        **record_columns(g),
        "cell_id": cell.id,
        "experiment_id": exp_id,
        "strategy": cell.strategy,
        "draft": cell.draft,
        "task": cell.task,
        "prompt_index": cell.prompt_index,
        "prompt_key": params.reference,  # the key of its prompt's reference cell (prepare.py)
        "k": cell.k,
        "regime": cell.regime,
        "temperature": cell.temperature or 0.0,
        "top_k": params.top_k,
        "top_p": params.top_p,
        "n_tokens": n,
        "acceptance": acceptance_rate(g.accepted, g.drafted) if g.drafted else None,
        "mal": _mal(g),
        "tokens_per_s": tokens_per_s(n, g.wall_s),
        "rouge_l": rouge_l(tokens, ref) if ref is not None and greedy else None,
        "exact_match": (tokens == list(ref)) if ref is not None and greedy else None,
    }


def store_generation(session: Session, cell_id: int, g: GenerationRecord) -> None:
    """One sweep generation with its metrics, energy and (when its reference exists) ROUGE-L."""
    cell = session.get(Cell, cell_id)
    params = CellParams.from_json(cell.params)
    ref = _reference_tokens(session, cell.experiment_id, params.reference)
    session.add(Generation(**_generation_row(cell.experiment_id, cell, params, g, ref)))


def store_generations(
    session: Session,
    exp_id: int,
    done: list[tuple[CellSpec, GenerationRecord, str]],
    predictor: Predictor | None = None,
) -> None:
    """Many finished cells at once, each (cell, its generation, the worker that made it): their rows inserted in
    one statement, their prompts' references read in one, the cells marked done in one; rows as `store_generation`
    writes them. The driver's path for a task's batch of replays (tens of statements per batch, not per cell).
    `predictor`: the run's round-cost table, which sets a replayed row's time, speed and energy and a timed row's
    `predicted_wall_s` (as `storage.repredict.repredict_in_place` does to stored rows)."""
    if not done:
        return
    keys = {c.params.reference for c, _, _ in done if c.params.reference is not None}
    stmt = select(Reference.prompt_key, Reference.tokens).where(
        Reference.experiment_id == exp_id, Reference.prompt_key.in_(keys)
    )
    refs = dict(session.execute(stmt).all()) if keys else {}
    rows = [_generation_row(exp_id, c, c.params, g, refs.get(c.params.reference)) for c, g, _ in done]
    if predictor is not None:
        for row, (c, g, _) in zip(rows, done):
            if c.regime is not None:
                tree = bool(c.params.options.get("tree"))
                new = predictor.columns(c.regime, g.passes, g.draft_s, row["n_tokens"], tree)
                row |= new if g.measure == "replay" else {"predicted_wall_s": new["predicted_wall_s"]}
    for same in (  # a Core executemany takes one set of columns: rows that leave first_accepted to the table apart
        [r for r in rows if "first_accepted" in r],
        [r for r in rows if "first_accepted" not in r],
    ):
        if same:
            session.execute(insert(Generation.__table__), same)
    by_worker: dict[str, list[int]] = {}
    for c, _, w in done:
        by_worker.setdefault(w, []).append(c.id)
    now = utcnow()
    for w, ids in by_worker.items():  # one statement per worker (a replay task's cells share theirs)
        stmt = update(Cell).where(Cell.id.in_(ids)).values(state="done", error=None, finished_at=now, worker=w)
        session.execute(stmt.execution_options(synchronize_session=False))


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

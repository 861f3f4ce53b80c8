"""The driver's writes: registering an experiment and its cells, state changes, results. Only the driver calls these.

Every function takes a session opened by the caller and commits nothing itself, so one result batch is one
transaction: a kill at any moment leaves each cell either finished with its row, or not.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable
from typing import Any

from sqlalchemy import select, update
from sqlalchemy.orm import Session

from orchestrator.cells import CellSpec
from storage.models import Cell, Experiment, Generation, InstanceBase, PowerSample, Reference, utcnow
from workers.metrics import acceptance_rate, mal, rouge_l, tokens_per_s


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
    """Insert the cells whose key is new for this experiment; returns how many were added."""
    have = set(session.scalars(select(Cell.key).where(Cell.experiment_id == exp_id)))
    now = utcnow()
    rows = [
        {"experiment_id": exp_id, "key": c.key, "kind": c.kind, "state": "pending", "strategy": c.strategy,
         "draft": c.draft, "task": c.task, "corpus": c.corpus, "prompt_index": c.prompt_index, "k": c.k,
         "regime": c.regime, "params": c.params, "attempts": 0, "created_at": now}
        for c in cells if c.key not in have
    ]
    if rows:
        session.execute(Cell.__table__.insert(), rows)
    return len(rows)


def reset_running(session: Session, exp_id: int) -> int:
    """Cells left `running` by a killed or interrupted driver go back to pending; returns how many."""
    res = session.execute(update(Cell).where(Cell.experiment_id == exp_id, Cell.state == "running")
                          .values(state="pending", worker=None))
    return res.rowcount or 0


def retry_failed(session: Session, exp_id: int) -> int:
    """Failed cells go back to pending with a fresh attempt count; returns how many."""
    res = session.execute(update(Cell).where(Cell.experiment_id == exp_id, Cell.state == "failed")
                          .values(state="pending", attempts=0, error=None))
    return res.rowcount or 0


def mark_running(session: Session, cell_ids: list[int], worker: str | None = None) -> None:
    """Dispatched cells: state running, one more attempt."""
    session.execute(update(Cell).where(Cell.id.in_(cell_ids))
                    .values(state="running", attempts=Cell.attempts + 1, started_at=utcnow(), worker=worker))


def mark_finished(cell: Cell, worker: str | None) -> None:
    """A cell whose result row was stored."""
    cell.state, cell.error, cell.finished_at, cell.worker = "done", None, utcnow(), worker


def mark_failure(session: Session, cell: Cell, error: str, max_attempts: int) -> bool:
    """Record a failed attempt; the cell goes back to pending while attempts remain. True when final."""
    final = cell.attempts >= max_attempts
    cell.state = "failed" if final else "pending"
    cell.error = error
    cell.finished_at = utcnow() if final else None
    return final


def store_ibase(session: Session, cell: Cell, info: Any) -> None:
    """The instance base a train cell built (`info`: workers.trainer.IBaseInfo)."""
    session.add(InstanceBase(
        cell_id=cell.id, experiment_id=cell.experiment_id, corpus=cell.corpus, path=str(info.path), sha256=info.sha256,
        backend=info.backend, window=info.window, order=info.order, tokenizer_id=info.tokenizer_id, tokens=info.tokens,
        instances=info.instances, nodes_before_prune=info.nodes_before_prune, nodes_after_prune=info.nodes_after_prune,
        bytes=info.bytes, train_s=info.train_s, energy_j=info.energy_j, power_source=info.power_source,
        power_measured=getattr(info, "power_measured", None)))


def ibase_paths(session: Session, exp_id: int) -> dict[str, str]:
    """corpus name -> instance-base path, for the finished train cells of an experiment."""
    rows = session.execute(select(InstanceBase.corpus, InstanceBase.path).join(Cell, Cell.id == InstanceBase.cell_id)
                           .where(InstanceBase.experiment_id == exp_id, Cell.state == "done")).all()
    return dict(rows)


def store_reference(session: Session, cell: Cell, p: dict[str, Any]) -> None:
    """A greedy reference, and the ROUGE-L/exact match of generations already stored for its prompt."""
    session.add(Reference(cell_id=cell.id, experiment_id=cell.experiment_id, task=cell.task,
                          prompt_index=cell.prompt_index, prompt_text=p["prompt_text"],
                          prompt_tokens=p["prompt_tokens"], tokens=p["tokens"], text=p["text"], wall_s=p["wall_s"]))
    gens = session.scalars(select(Generation).where(Generation.experiment_id == cell.experiment_id,
                                                    Generation.task == cell.task,
                                                    Generation.prompt_index == cell.prompt_index))
    for g in gens:
        g.rouge_l, g.exact_match = rouge_l(g.tokens, p["tokens"]), list(g.tokens) == list(p["tokens"])


def _reference_tokens(session: Session, cell: Cell) -> list[int] | None:
    return session.scalars(select(Reference.tokens).where(Reference.experiment_id == cell.experiment_id,
                                                          Reference.task == cell.task,
                                                          Reference.prompt_index == cell.prompt_index)).first()


def store_generation(session: Session, cell: Cell, p: dict[str, Any]) -> None:
    """One sweep generation with its metrics, energy and (when its reference exists) ROUGE-L."""
    ref = _reference_tokens(session, cell)
    n, drafted = len(p["tokens"]), p["drafted"]
    session.add(Generation(
        cell_id=cell.id, experiment_id=cell.experiment_id, strategy=cell.strategy, draft=cell.draft, task=cell.task,
        prompt_index=cell.prompt_index, k=cell.k, regime=cell.regime, n_prompt_tokens=p["n_prompt_tokens"],
        n_tokens=n, steps=p["steps"], drafted=drafted, accepted=p["accepted"],
        acceptance=acceptance_rate(p["accepted"], drafted) if drafted else None, mal=mal(p["accepted"], p["steps"]),
        accept_hist=p["accept_hist"], accepted_per_step=p["accepted_per_step"],
        tokens_per_step=p.get("tokens_per_step"),
        fastpath_rejects=p["fastpath_rejects"], wall_s=p["wall_s"], draft_s=p["draft_s"], verify_s=p["verify_s"],
        tokens_per_s=tokens_per_s(n, p["wall_s"]), started_at=p["started_at"], ended_at=p["ended_at"],
        energy_j=p.get("energy_j"), mean_power_w=p.get("mean_power_w"), j_per_100_tokens=p.get("j_per_100_tokens"),
        tokens_per_j=p.get("tokens_per_j"), power_source=p.get("power_source"), power_measured=p.get("power_measured"),
        rouge_l=rouge_l(p["tokens"], ref) if ref is not None else None,
        exact_match=(list(p["tokens"]) == list(ref)) if ref is not None else None,
        bridged=p["bridged"], stopped=p["stopped"], device=p["device"], tokens=p["tokens"], text=p["text"]))


def store_samples(session: Session, exp_id: int, samples: list[dict[str, Any]]) -> None:
    """Raw power samples (t_s, source, power_w, energy_j, measured)."""
    if samples:
        session.execute(PowerSample.__table__.insert(), [
            {"experiment_id": exp_id, "t_s": s["t_s"], "source": s["source"], "power_w": s.get("power_w"),
             "energy_j": s.get("energy_j"), "measured": bool(s.get("measured", False))} for s in samples])


def set_device(session: Session, exp_id: int, device: str, idle_power_w: float | None = None) -> None:
    session.execute(update(Experiment).where(Experiment.id == exp_id)
                    .values(device=device, idle_power_w=idle_power_w, updated_at=dt.datetime.now(dt.timezone.utc)))

"""What the driver reads around replayed generations: done prerequisite cells, references by key, and the timed twin
of a replayed generation (and the reverse), whose rounds must be the same (`workers.replay.rounds.rounds_differ`)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import NamedTuple

from sqlalchemy import select
from sqlalchemy.orm import Session

from storage.cell_spec import CellParams
from storage.models import Cell, Generation, Reference
from workers.replay.rounds import ROUND_LISTS


def done_keys(session: Session, exp_id: int, kinds: Iterable[str]) -> set[str]:
    """Keys of the experiment's done cells of these kinds (references and the cost model, which other cells need)."""
    stmt = select(Cell.key).where(Cell.experiment_id == exp_id, Cell.state == "done", Cell.kind.in_(list(kinds)))
    return set(session.scalars(stmt))


class ReplayInput(NamedTuple):
    """What a replay job reads from its prompt's stored reference; the token lists as tuples, made once per prompt
    (every strategy, k and regime replays it, and a task's jobs then share them when they are pickled)."""

    prompt_key: str
    prompt_tokens: tuple[int, ...]
    tokens: tuple[int, ...]
    text: str
    vocab_size: int | None
    eos_id: int | None


def references_by_key(session: Session, exp_id: int, keys: Iterable[str]) -> dict[str, ReplayInput]:
    """The stored references of these prompt keys (reference cell keys), as replay jobs read them."""
    keys = sorted(set(keys))
    cols = [getattr(Reference, name) for name in ReplayInput._fields]
    stmt = select(*cols).where(Reference.experiment_id == exp_id, Reference.prompt_key.in_(keys))
    return {
        r.prompt_key: ReplayInput(r.prompt_key, tuple(r.prompt_tokens), tuple(r.tokens), *r[3:])
        for r in session.execute(stmt)
    }


def coordinate_of(strategy, task, k, regime, temperature, prompt_key) -> tuple:
    """A generation's coordinate and prompt as `measured_coordinates` gives it (k and temperature 0 when unset)."""
    return (strategy, task, k or 0, regime, temperature or 0.0, prompt_key)


def measured_coordinates(session: Session, exp_id: int, measure: str) -> set[tuple]:
    """The coordinates and prompts (`coordinate_of`) of the experiment's generations measured this way: one query,
    so that a replayed generation looks for a timed twin only where one was stored."""
    stmt = select(
        Generation.strategy,
        Generation.task,
        Generation.k,
        Generation.regime,
        Generation.temperature,
        Generation.prompt_key,
    ).where(Generation.experiment_id == exp_id, Generation.measure == measure)
    return {coordinate_of(*row) for row in session.execute(stmt)}


def twin_rounds(session: Session, cell_id: int, measure: str) -> dict[str, list[int] | None] | None:
    """The per-round lists of the newest generation of the same coordinate and prompt that was measured the other way
    (timed for a replay, replay for a timed one), or None when there is none yet."""
    cell = session.get(Cell, cell_id)
    prompt_key = CellParams.from_json(cell.params).reference
    other = "timed" if measure == "replay" else "replay"
    g = session.scalars(
        select(Generation)
        .where(
            Generation.experiment_id == cell.experiment_id,
            Generation.strategy == cell.strategy,
            Generation.task == cell.task,
            Generation.k == cell.k,
            Generation.regime == cell.regime,
            Generation.temperature == (cell.temperature or 0.0),
            Generation.prompt_key == prompt_key,
            Generation.measure == other,
        )
        .order_by(Generation.id.desc())
        .limit(1)
    ).first()
    return None if g is None else {name: getattr(g, name) for name in ROUND_LISTS}

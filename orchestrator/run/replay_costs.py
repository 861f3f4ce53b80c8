"""The driver's side of the round-cost table: the accelerator job that measures it, storing it, and what replayed and
timed generations get from it (predicted wall time and energy; the k = "auto" curve).

A replayed generation's wall time is the table's seconds for its recorded rounds plus its draft's own measured
seconds; its energy is that time at the mean power measured while the table was (a per-round energy model needs a
meter per round, which no source here gives): `storage.repredict.Predictor`, applied as the rows are stored. A timed
generation keeps its measured time and gets the prediction beside it (`predicted_wall_s`); validation compares the
replayed generation's prediction with it.

A replayed run with timed cells measures the table twice (`[sweep] table_at_timing`): first, before the references,
for k = "auto"'s lengths and the replays' first predictions; again on the fresh accelerator worker that times the
cells, after the replays and just before the first timed cell. The second replaces every replay's prediction (in the
transaction that stores it) and predicts the timed cells: the table and the timings it is validated against then
meet the same minute and process (a shared machine's speed can change over the minutes, a study's tens of minutes,
between a run's start and its timed cells).
"""

from __future__ import annotations

import logging

from orchestrator.run.cells import COST_ROLE, table_widths
from orchestrator.run.options import Sessions
from orchestrator.run.spec import Spec
from orchestrator.run.sweep_grid import at_timing
from storage.cell_spec import CellSpec
from storage.repredict import Predictor, repredict_in_place
from storage.store import store_cost_model
from storage.validation import stored_cost_model
from workers.contracts import CostModelJob
from workers.decoding.costmodel import RoundCosts

logger = logging.getLogger(__name__)

PREREQUISITE_KINDS = ("reference", COST_ROLE)  # done cells that other cells wait for (replays; k = "auto")


class ReplayCosts:
    """The experiment's round-cost table, read once from the database when first needed."""

    def __init__(self, Session: Sessions, exp_id: int):
        self.Session, self.exp_id = Session, exp_id
        self._model = None
        self._power: float | None = None
        self._source: str | None = None
        self._auto: dict[str, str | None] = {}  # a k = "auto" cell's table, by the key of the cell that measured it

    def job(self, c: CellSpec, spec: Spec):
        """The accelerator job that measures the table: every regime, width and tree size the grid runs, over the
        contexts its rounds see (the shortest prompt to the longest plus the new tokens), on a real prompt's tokens."""
        words = [t.prompt_words for t in spec.tasks]
        return CostModelJob(
            key=c.key,
            prompt=c.params.prompt or "The",
            min_context=max(2, min(words)),  # tokens: at least one per word
            max_context=2 * max(words) + spec.sweep.max_new_tokens,  # about 1.3-2 tokens per word of text or code
            **table_widths(spec),
        )

    def store(self, s, c: CellSpec, outcome) -> None:
        """Store the measured table (and forget the one read before, if any). The table measured again at the
        timings predicts every replay stored before it, in the same transaction (`repredict_in_place`)."""
        r = outcome.cost_model
        store_cost_model(s, c.id, r)
        self._model = None
        if at_timing(c):
            e = r.energy
            p = Predictor(RoundCosts.from_json(r.costs), r.device, e and e.mean_power_w, e and e.power_source)
            s.flush()
            n = repredict_in_place(s, self.exp_id, p)
            logger.info("round-cost table measured again at the timings: %d replayed generations re-predicted", n)

    def model(self):
        """The experiment's round-cost table (None if it was not measured)."""
        if self._model is None:
            with self.Session() as s:
                found = stored_cost_model(s, self.exp_id)
            if found is not None:
                self._model, self._power, self._source = found.table, found.mean_power_w, found.power_source
        return self._model

    def model_json(self, cell_key: str) -> str | None:
        """What a k = "auto" job carries: the table the cell `cell_key` measured, the one its cell needs (the worker
        reads the curve at its prompt's length, as a replay does, so both choose the same lengths; a table measured
        again at the timings never changes them)."""
        if cell_key not in self._auto:
            with self.Session() as s:
                found = stored_cost_model(s, self.exp_id, cell_key=cell_key)
            self._auto[cell_key] = None if found is None else found.table.to_json()
        return self._auto[cell_key]

    def predictor(self) -> Predictor | None:
        """What the writer predicts replayed and timed generations with (`storage.repredict.Predictor`, the one
        prediction of a generation's time and energy): the experiment's newest table at the mean power measured while
        it was measured; None before any table."""
        model = self.model()
        return None if model is None else Predictor(model, model.device, self._power, self._source)

"""The driver's side of the round-cost table: the accelerator job that measures it, storing it, and what replayed and
timed generations get from it (predicted wall time and energy; the k = "auto" curve).

A replayed generation's wall time is the table's seconds for its recorded rounds plus its draft's own measured
seconds; its energy is that time at the mean power measured while the table was (a per-round energy model needs a
meter per round, which no source here gives): `storage.repredict.Predictor`, applied as the rows are stored. A timed
generation keeps its measured time and gets the prediction beside it (`predicted_wall_s`); validation compares the
replayed generation's prediction with it.

A replayed run with timed cells measures the table twice (`[sweep] table_at_timing`): first, before the references,
for k = "auto"'s lengths and the replays' first predictions; again on the fresh accelerator worker that times the
cells, after the replays, in turns of one repeat spread over the timed cells (`[sweep] table_turns`, each in the
middle of its share of them). Each turn's stored table is built from the rounds of every turn so far
(`workers.decoding.costmodel.turns_table`), replaces the prediction of every replayed and timed generation stored
before it (in the transaction that stores it) and predicts those after it: the table and the timings it is
validated against then meet the same minutes and process (a shared machine's speed can change over the minutes, a
study's tens of minutes, between a run's start and its timed cells, and a table's repeats minutes apart differ as
its speed does).
"""

from __future__ import annotations

import logging
from dataclasses import replace

from orchestrator.run.cells import COST_ROLE, table_widths
from orchestrator.run.options import Sessions
from orchestrator.run.spec import Spec
from orchestrator.run.sweep_grid import AT_TIMING, at_timing
from storage.cell_spec import CellSpec
from storage.repredict import Predictor, repredict_in_place
from storage.store import store_cost_model
from storage.validation import stored_cost_model
from workers.contracts import CostModelJob
from workers.decoding.costmodel import RoundCosts, Turn, turns_table

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
            **({"repeats": 1} if at_timing(c) else {}),  # a turn of the table at the timings: one repeat
        )

    def store(self, s, c: CellSpec, outcome) -> None:
        """Store the measured table (and forget the one read before, if any). A turn of the table measured again at
        the timings is stored as the table of every turn so far, and predicts every generation stored before it,
        in the same transaction (`repredict_in_place`)."""
        r = outcome.cost_model
        if not at_timing(c):
            store_cost_model(s, c.id, r)
            self._model = None
            return
        earlier = stored_cost_model(s, self.exp_id, stage=AT_TIMING)  # the turns before, as one table
        before, e = (earlier.samples if earlier else ()), r.energy
        meta = RoundCosts.from_json(r.costs).meta
        turn = Turn(r.verifier, r.device, r.samples, meta, r.measure_s, e and e.mean_power_w)
        table = turns_table(earlier and earlier.table, before, turn)
        store_cost_model(s, c.id, replace(r, costs=table.to_json(), samples=(*before, *r.samples)))
        self._model = None
        source = (e and e.power_source) or (earlier and earlier.power_source)
        s.flush()
        n = repredict_in_place(s, self.exp_id, Predictor(table, r.device, table.meta.get("mean_power_w"), source))
        turns = table.meta["turns"]
        logger.info("round-cost table at the timings, turn %d: %d replayed generations re-predicted", turns, n)

    def model(self):
        """The experiment's round-cost table (None if it was not measured)."""
        if self._model is None:
            with self.Session() as s:
                found = stored_cost_model(s, self.exp_id)
            if found is not None:
                power = found.table.meta.get("mean_power_w", found.mean_power_w)  # a table in turns: over all
                self._model, self._power, self._source = found.table, power, found.power_source
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

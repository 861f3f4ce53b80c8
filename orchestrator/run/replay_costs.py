"""The driver's side of the round-cost table: the accelerator job that measures it, storing it, and what replayed and
timed generations get from it (predicted wall time and energy; the k = "auto" curve).

A replayed generation's wall time is the table's seconds for its recorded rounds plus its draft's own measured
seconds; its energy is that time at the mean power measured while the table was (a per-round energy model needs a
meter per round, which no source here gives). A timed generation keeps its measured time and gets the prediction
beside it (`predicted_wall_s`); validation compares the replayed generation's prediction with it.
"""

from __future__ import annotations

from orchestrator.run.cells import COST_ROLE, table_widths
from orchestrator.run.options import Sessions
from orchestrator.run.spec import Spec
from storage.cell_spec import CellSpec
from storage.costs import stored_cost_model
from storage.store import store_cost_model
from workers.contracts import CostModelJob, EnergyRecord, GenerationRecord
from workers.decoding.costmodel import predict_generation

PREREQUISITE_KINDS = ("reference", COST_ROLE)  # done cells that other cells wait for (replays; k = "auto")


class ReplayCosts:
    """The experiment's round-cost table, read once from the database when first needed."""

    def __init__(self, Session: Sessions, exp_id: int):
        self.Session, self.exp_id = Session, exp_id
        self._model = None
        self._power: float | None = None
        self._source: str | None = None

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
        """Store the measured table (and forget the one read before, if any)."""
        store_cost_model(s, c.id, outcome.cost_model)
        self._model = None

    def model(self):
        """The experiment's round-cost table (None if it was not measured)."""
        if self._model is None:
            with self.Session() as s:
                found = stored_cost_model(s, self.exp_id)
            if found is not None:
                self._model, self._power, self._source = found.table, found.mean_power_w, found.power_source
        return self._model

    def model_json(self) -> str | None:
        """What a k = "auto" job carries: the table itself (the worker reads the curve at its prompt's length, as a
        replay does, so both choose the same lengths)."""
        model = self.model()
        return None if model is None else model.to_json()

    def predict(self, s, g: GenerationRecord, regime: str | None, tree: bool = False) -> GenerationRecord:
        """A replayed generation with its predicted wall time, tokens/s and energy; a timed one with its prediction
        beside its measurement. `regime`: its cell's; `tree`: its rounds verify token trees."""
        model = self.model()
        if model is None or regime is None:
            return g
        predicted = predict_generation(model, regime, g.passes, g.draft_s, tree)
        if g.measure != "replay":
            return g.replaced(predicted_wall_s=predicted)
        energy = None
        if self._power is not None:
            joules = predicted * self._power
            n = len(g.tokens)
            energy = EnergyRecord(
                energy_j=joules,
                mean_power_w=self._power,
                power_source=self._source,
                power_measured=False,
                j_per_100_tokens=joules / n * 100 if n else None,
                tokens_per_j=n / joules if joules else None,
            )
        return g.replaced(
            wall_s=predicted,
            verify_s=predicted - g.draft_s,
            predicted_wall_s=predicted,
            wall_s_runs=(predicted,),
            energy=energy,
            device=model.device,
        )

"""Which of a replayed run's timed generations are due their second timing.

A replayed run times a seeded share of its timed greedy generations twice (`[sweep] timed_twice`,
`SweepSection.timed_runs`), so that it measures its own timing noise on identical passes. The second timing runs
after every first timing of the run (`orchestrator.run.loop.SweepLoop`), so the two are minutes apart, as a round-cost
table and the timings it predicts are. A generation is due while its stored row holds one timed run; a kill between
the two loses nothing, and a resume runs the ones left (`orchestrator.run.driver`).
"""

from __future__ import annotations

from orchestrator.run.spec import Spec
from storage import store
from storage.db import Session


def second_timings_due(spec: Spec, session: Session, exp_id: int) -> list[tuple[int, str]]:
    """(generation id, cell key) of the experiment's timed generations in the `timed_twice` sample still timed once,
    in the order their first timings were stored."""
    if not spec.sweep.replay or spec.sweep.timed_twice <= 0:
        return []
    return [(gen_id, key) for gen_id, key in store.once_timed(session, exp_id) if spec.sweep.timed_runs(key, 0.0) == 2]

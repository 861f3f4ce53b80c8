"""The scheduling policy as plain data: what runs next, what is retried, what fails with its artifact.

No Ray, no SQL: the loop (`orchestrator.run.loop`) feeds it the pending cells and the outcomes, and does
what it says. Artifact cells (instance bases) build on CPU workers, all at once as soon as the artifacts
they read are built; label cells (verifier labels for a distilled instance base) are artifacts built on the
accelerator worker, queued before references; reference and sweep cells go to the one accelerator worker
in batches of one strategy and kind, each batch only when the artifacts its cells need are built; at most
`in_flight` batches are queued at the worker. Dependencies chain: sweep -> distill (CPU) -> label (accelerator).

The sweep's order (`[sweep] order`):
- `"paired"` (the default): prompt by prompt, every strategy and k of one (task, regime, temperature, prompt)
  back to back, plain first. Strategies that are compared (a draft and plain, a hybrid and its parts, an adaptive
  draft and its base) are then timed seconds apart: a paired measurement, robust to a machine whose speed drifts
  over minutes. A batch still holds one strategy (its k values for that
  prompt), so a draft that kills the worker costs attempts to its own cells only; the worker keeps the drafts
  loaded.
- `"strategy"`: each strategy's cells together (fewer draft loads, one draft in memory at a time).

Example:
    >>> s = Scheduler(cells, batch_size=8, max_attempts=3)
    >>> s.start_artifacts()          # every pending artifact cell, to submit now
    >>> s.next_batch()               # up to 8 ready cells of one strategy, or [] while inputs are missing
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable
from dataclasses import replace

from orchestrator.run.sweep_grid import AT_TIMING, at_timing
from orchestrator.run.sweep_grid import COST_ROLE as COST  # the round-cost table's cell kind
from storage.cell_spec import CellSpec
from storage.store import ARTIFACT_KINDS

# the accelerator's order: the cost model, the references (a replayed run's replays wait for them, and run on the
# other cores while the labels follow), the verifier labels, the table measured again at the timings, the timed cells
# (the table's later turns then spread among them: `spread_turns`)
KIND_ORDER = {COST: -2, "reference": -1, "label": 0, AT_TIMING: 0.5, "sweep": 1}
REPLAY = "replay"  # replay cells run on CPU workers (workers.replay), in batches of one strategy
REPLAY_BATCH = 64  # replay cells per CPU task at least: the draft loads once per task, the results come back together
MAX_REPLAY_BATCH = 512  # ... and at most: while many wait, fewer and larger tasks cost the driver less per cell


ORDERS = ("paired", "strategy")


def run_order(c: CellSpec, order: str = "paired") -> tuple:
    """The cost model, references, labels, the table at the timings, then sweep cells (KIND_ORDER): `paired`, by
    task, regime, temperature and prompt, plain first, then strategy and k; `strategy`, grouped by strategy, task,
    regime, temperature and k, prompts in order."""
    rank = KIND_ORDER[AT_TIMING] if at_timing(c) else KIND_ORDER.get(c.kind, 2)
    if order == "strategy":
        return (
            rank,
            c.strategy or "",
            c.task or "",
            c.regime or "",
            c.temperature or 0.0,
            c.k or 0,
            c.prompt_index or 0,
        )
    return (
        rank,
        c.task or "",
        c.regime or "",
        c.temperature or 0.0,
        c.prompt_index or 0,
        bool(c.k),
        c.strategy or "",
        c.k or 0,
    )


def spread_turns(queue: list[CellSpec]) -> list[CellSpec]:
    """The accelerator's queue with the turns of the table measured again at the timings (`[sweep] table_turns`)
    spread evenly over its timed cells, in turn order: turn t of T before the timed cell at (t + 1/2) / T of them,
    the middle of its share, so that the table's repeats fall on the same spells of a shared machine as the timings
    they predict and, where the machine's speed drifts one way through the timings, the turns' mean moment is the
    timings'. Without timed cells left (a resumed run), the turns keep their place."""
    turns = sorted((c for c in queue if at_timing(c)), key=lambda c: c.params.turn)
    rest = [c for c in queue if not at_timing(c)]
    timed = [i for i, c in enumerate(rest) if c.kind == "sweep"]
    if not turns or not timed:
        return queue
    before: dict[int, list[CellSpec]] = {}
    for t, c in enumerate(turns):
        before.setdefault(timed[len(timed) * (2 * t + 1) // (2 * len(turns))], []).append(c)
    return [x for i, c in enumerate(rest) for x in (*before.get(i, ()), c)]


class Scheduler:
    """Queue, batching, retries and artifact dependencies of one experiment's run."""

    def __init__(
        self,
        cells: Iterable[CellSpec],
        batch_size: int,
        max_attempts: int,
        *,
        overlap: bool = False,
        in_flight: int = 2,
        built: Iterable[str] = (),
        order: str = "paired",
    ):
        if order not in ORDERS:
            raise ValueError(f"unknown sweep order {order!r}; one of {', '.join(ORDERS)}")
        cells = list(cells)
        self.batch_size, self.max_attempts, self.overlap, self.in_flight = batch_size, max_attempts, overlap, in_flight
        self.artifacts = [c for c in cells if c.kind in ARTIFACT_KINDS]
        queued = (c for c in cells if c.kind not in ARTIFACT_KINDS and c.kind != REPLAY)
        self.queue: deque[CellSpec] = deque(spread_turns(sorted(queued, key=lambda c: run_order(c, order))))
        self.replays: deque[CellSpec] = deque(
            sorted((c for c in cells if c.kind == REPLAY), key=lambda c: run_order(c, "strategy"))
        )
        self.building: set[str] = set()  # artifact keys being built now
        self.built: set[str] = set(built)  # keys of built artifacts and of done cells others need (references, ...)
        self.running_batches = 0
        self.measuring: set[str] = set()  # round-cost table cells in flight: no CPU work starts beside them
        self.running_replays = 0
        self._changes = 0  # counts builds and requeued replays: what can make a waiting replay ready
        self._fruitless: int | None = None  # `_changes` when a replay scan last found no ready cell
        known = self.built | {c.key for c in [*self.artifacts, *self.queue]}
        self.orphans = [c for c in [*self.queue, *self.replays] if any(key not in known for _, key in c.needs)]
        if self.orphans:  # what they need is neither built nor to be built (it failed): they cannot run
            ids = {c.id for c in self.orphans}
            self.queue = deque(c for c in self.queue if c.id not in ids)
            self.replays = deque(c for c in self.replays if c.id not in ids)

    # -- artifacts
    def start_artifacts(self) -> list[CellSpec]:
        """Every pending CPU artifact cell whose inputs are built, marked as building (submitted all at once); none
        while the round-cost table is measured."""
        if self.measuring and not self.overlap:
            return []
        ready = [c for c in self.artifacts if self._inputs_ready(c)]
        self.artifacts = [c for c in self.artifacts if not self._inputs_ready(c)]
        out = [replace(c, attempts=c.attempts + 1) for c in ready]
        self.building.update(c.key for c in out)
        return out

    def artifact_built(self, cell: CellSpec) -> None:
        """A CPU artifact or a label cell finished (or a prerequisite: a reference, the round-cost table): cells that
        need it may go."""
        self.building.discard(cell.key)
        self.measuring.discard(cell.key)
        self.built.add(cell.key)
        self._changes += 1

    def rebuild(self, cell: CellSpec) -> None:
        """A built artifact turned out missing or corrupt: build it again before its dependents run."""
        self.built.discard(cell.key)
        if cell.key not in self.building and all(c.key != cell.key for c in self.artifacts):
            self.artifacts.append(cell)

    def artifact_failed(self, cell: CellSpec) -> list[CellSpec]:
        """The artifact could not be built: its dependents, and theirs, leave the queues (returned, to be failed)."""
        self.building.discard(cell.key)
        failed, dependents = {cell.key}, []
        while True:
            more = [c for c in [*self.artifacts, *self.queue, *self.replays] if failed & set(dict(c.needs).values())]
            if not more:
                return dependents
            ids = {c.id for c in more}
            self.artifacts = [c for c in self.artifacts if c.id not in ids]
            self.queue = deque(c for c in self.queue if c.id not in ids)
            self.replays = deque(c for c in self.replays if c.id not in ids)
            failed |= {c.key for c in more}
            dependents += more

    # -- the accelerator queue
    def sweep_ready(self) -> bool:
        """Whether timed cells may run now (not beside training unless `overlap`)."""
        return bool(self.queue) and (self.overlap or not self.building)

    def busy(self) -> bool:
        """Whether anything is still to do or in flight."""
        return bool(
            self.building
            or self.running_batches
            or self.artifacts
            or self.sweep_ready()
            or self.replays
            or self.running_replays
        )

    def _inputs_ready(self, c: CellSpec) -> bool:
        return all(key in self.built for _, key in c.needs)

    def next_batch(self) -> list[CellSpec]:
        """Up to batch_size queued cells of one strategy and kind whose artifacts are built; [] if none or full."""
        if self.running_batches >= self.in_flight or not self.sweep_ready() or self.measuring:
            return []  # a round-cost table is measured alone: nothing queued behind it is shown running meanwhile
        batch: list[CellSpec] = []
        waiting: list[CellSpec] = []
        replaying = bool(self.replays or self.running_replays)
        while self.queue and len(batch) < self.batch_size:
            c = self.queue.popleft()
            if (
                not self._inputs_ready(c)
                or (replaying and (c.kind == "sweep" or at_timing(c)))
                or (c.kind == COST and self._replays_beside())
            ):
                waiting.append(c)  # timed cells and the round-cost tables wait: nothing else on the cores they time
                continue
            if batch and (c.strategy, c.kind) != (batch[0].strategy, batch[0].kind):
                self.queue.appendleft(c)
                break
            batch.append(c)
        self.queue.extendleft(reversed(waiting))
        if batch:
            self.running_batches += 1
            self.measuring.update(c.key for c in batch if c.kind == COST)
        return [replace(c, attempts=c.attempts + 1) for c in batch]

    def _replays_beside(self) -> bool:
        """Whether replays run on the CPU workers now, beside which a table would time a loaded machine, unlike the
        timed cells it predicts (they run alone, after the replays); never with `overlap`, which allows it. (Training
        beside it is ruled out already: without `overlap` no accelerator batch starts while an artifact builds.)"""
        return not self.overlap and self.running_replays > 0

    def batch_finished(self, cells: Iterable[CellSpec] = ()) -> None:
        self.running_batches -= 1
        self.measuring.difference_update(c.key for c in cells)

    def accelerator_waits_for_replays(self, min_replays: int) -> bool:
        """Whether the accelerator worker has nothing to do until the replays end: no batch of it in flight, every
        queued cell of it one that waits for the replays (a timed cell, the table at the timings), and at least
        `min_replays` replay cells queued."""
        waits = all(c.kind == "sweep" or at_timing(c) for c in self.queue)
        return not self.running_batches and len(self.replays) >= min_replays and waits

    # -- replays on CPU workers
    def next_replay_batch(self, max_running: int, size: int | None = None) -> list[CellSpec]:
        """Up to `size` ready replay cells of one strategy and artifacts (one draft load), while fewer than
        `max_running` replay tasks run; [] if none is ready. Replays run beside training and the accelerator. The
        size by default: a quarter of the queue's share per running task, from `REPLAY_BATCH` to `MAX_REPLAY_BATCH`
        cells (large while many wait, small at the end, so the last tasks finish together)."""
        size = size or max(REPLAY_BATCH, min(MAX_REPLAY_BATCH, len(self.replays) // (4 * max(1, max_running))))
        if self.running_replays >= max_running or not self.replays or (self.measuring and not self.overlap):
            return []
        state = self._changes
        if state == self._fruitless:
            return []  # nothing built or queued since the last scan found no ready cell (tens of thousands to scan)
        batch: list[CellSpec] = []
        passed: list[CellSpec] = []  # scanned and left queued, put back in order: the scan costs what it reads
        group = None
        while self.replays and len(batch) < size:
            c = self.replays.popleft()
            if self._inputs_ready(c):
                this = (c.strategy, tuple((r, key) for r, key in c.needs if r != "reference"))
                group = group or this
                if this == group:
                    batch.append(c)
                    continue
            passed.append(c)
        self.replays.extendleft(reversed(passed))
        if not batch:
            self._fruitless = state
            return []
        self.running_replays += 1
        return [replace(c, attempts=c.attempts + 1) for c in batch]

    def replay_finished(self) -> None:
        self.running_replays -= 1

    # -- failures
    def is_final(self, c: CellSpec) -> bool:
        """Whether this failed attempt was the last one allowed."""
        return c.attempts >= self.max_attempts

    def retry(self, c: CellSpec, front: bool = False) -> None:
        """Queue a failed cell again (at the front after a worker crash, so it runs on the fresh worker first)."""
        if c.kind in ARTIFACT_KINDS:
            self.artifacts.append(c)
        elif c.kind == REPLAY:
            self.replays.append(c)
            self._changes += 1
        elif front:
            self.queue.appendleft(c)
        else:
            self.queue.append(c)

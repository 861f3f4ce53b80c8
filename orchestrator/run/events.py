"""What finished in the sweep loop, as plain data: the dispatcher (Ray) makes these, the result writer stores them."""

from __future__ import annotations

from dataclasses import dataclass

from storage.cell_spec import CellSpec
from workers.contracts import ArtifactInfo, BatchOutcome, JobOutcome
from workers.training.ibase import IBaseInfo


@dataclass(frozen=True)
class Built:
    """An artifact task finished: what it built, or its error (`Type: message`)."""

    cell: CellSpec
    info: IBaseInfo | ArtifactInfo | None = None
    error: str = ""


@dataclass(frozen=True)
class BatchDone:
    """An accelerator batch finished: each cell's outcome and the power samples."""

    cells: list[CellSpec]
    outcome: BatchOutcome


@dataclass(frozen=True)
class BatchLost:
    """The accelerator worker died with this batch: `running` if it was the batch being run (its cells spend an
    attempt), else it was queued behind it (its cells go back without)."""

    cells: list[CellSpec]
    running: bool
    error: str  # the Ray error's type name


@dataclass(frozen=True)
class Replayed:
    """A replay task finished: the outcomes of its jobs that failed and the rows of the others, each (cell key,
    worker, `storage.generation_row.INSERT_COLUMNS` values: `orchestrator.run.replay_rows`), or the task's error
    (`Type: message`) for all its cells."""

    cells: list[CellSpec]
    outcomes: list[JobOutcome]  # the failed ones
    rows: list[tuple[str, str, tuple]]
    error: str = ""


Event = Built | BatchDone | BatchLost | Replayed

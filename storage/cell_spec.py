"""The one cell type, from grid expansion to the worker: `CellSpec` (its columns) and `CellParams` (what a worker
needs beyond them, stored as JSON in `cells.params`).

`orchestrator.run.cells` makes them (no id yet), `storage.store.add_cells` stores them, `pending_cells` reads them
back (id and attempts set), the scheduler orders them and the loop turns them into jobs. `CellParams.to_json` and
`CellParams.from_json` are the only places that know the JSON's keys.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Any


@dataclass(frozen=True)
class CellParams:
    """A cell's inputs that are not columns; each kind sets its own, the rest keep their defaults."""

    prompt: str | None = None  # reference and sweep cells: the prompt's text
    reference: str | None = None  # sweep cells: the key of their prompt's reference cell
    options: dict[str, Any] = field(default_factory=dict)  # sweep cells: the draft's options (validated by its model)
    needs: dict[str, str] = field(default_factory=dict)  # role -> key of the artifact cell this cell reads
    tokenizer: str | None = None  # artifact cells: the tokenizer their files are in
    corpus: dict[str, Any] | None = None  # artifact cells: the corpus section they build from
    top_k: int = 0  # sampled sweep cells: the sampler's settings and stream
    top_p: float = 1.0
    seed: int | None = None
    stage: str | None = None  # costmodel cells: "timing" for the table measured again among the timed cells
    turn: int = 0  # costmodel cells at the timings: which of the table's turns (`[sweep] table_turns`, from 0)

    def to_json(self) -> dict[str, Any]:
        """The JSON stored in `cells.params`: the fields that differ from their defaults."""
        return {name: value for name, default in _DEFAULTS if (value := getattr(self, name)) != default}

    @classmethod
    def from_json(cls, data: dict[str, Any] | None) -> CellParams:
        """Read stored params back; keys this version does not know (a newer writer's) are ignored."""
        return cls(**{k: v for k, v in (data or {}).items() if k in _NAMES})


_DEFAULTS = tuple((f.name, getattr(CellParams(), f.name)) for f in fields(CellParams))  # what `to_json` leaves out
_NAMES = frozenset(name for name, _ in _DEFAULTS)


@dataclass(frozen=True, slots=True)
class CellSpec:
    """One unit of work: its content key, kind and coordinates, and its params. `id` and `attempts` are set once
    it is stored (`storage.store.pending_cells`)."""

    key: str
    kind: str  # train | label | distill | datastore | reference | sweep
    strategy: str | None = None
    draft: str | None = None
    task: str | None = None
    corpus: str | None = None
    prompt_index: int | None = None
    k: int | None = None
    regime: str | None = None
    temperature: float | None = None
    params: CellParams = field(default_factory=CellParams, compare=False)
    id: int | None = None
    attempts: int = 0

    @property
    def needs(self) -> tuple[tuple[str, str], ...]:
        """(role, artifact cell key) pairs, sorted: the artifacts this cell reads."""
        return tuple(sorted(self.params.needs.items()))

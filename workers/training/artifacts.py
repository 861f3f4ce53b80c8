"""The artifact registry: each kind of file a draft can need built first, declared once in `KINDS`.

An artifact is built by a cell of its own kind from one corpus: an instance base ("train"), verifier labels
("label", on the accelerator worker), a distilled instance base from those labels ("distill"), a REST datastore
("datastore"). Drafts ask for artifacts by what they provide (`Requirement("ibase", corpus)`); the registry says
which cell kind builds it for that corpus, what it reads, where it runs and whether the verifier enters its key.
Grid expansion (`orchestrator.run.cells`), the cell kinds the store and scheduler know, the CPU builders
(`workers.training.builders`) and the latency command all read it.

Adding an artifact kind is one builder module (a `build(job: ArtifactJob) -> ArtifactInfo` function) and one
line in `KINDS`:

    ArtifactKind("suffix_tree", provides="suffix_tree", builder="workers.suffix_tree"),

Example:
    >>> producer("ibase", distilled=True).cell_kind
    'distill'
    >>> [k.cell_kind for k in chain("ibase", distilled=True)]
    ['label', 'distill']
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from workers.errors import SpecError


@dataclass(frozen=True)
class ArtifactKind:
    """One kind of artifact and the cell kind that builds it."""

    cell_kind: str  # the cell kind that builds it ("train", "label", ...)
    provides: str  # the requirement it satisfies ("ibase", "labels", "datastore")
    builder: str | None = None  # module whose `build(job)` makes it on a CPU task; None: its own task
    runs_on: Literal["cpu", "accelerator"] = "cpu"
    verifier: bool = False  # its content depends on the verifier (which then enters its key)
    reads: tuple[str, ...] = ()  # what it is built from (requirements of the same corpus)
    distilled: bool | None = None  # built only for corpora with (True) or without (False) verifier labels


KINDS: tuple[ArtifactKind, ...] = (
    # the instance base trained from the corpus (workers.training.ray_tasks.train_task: memory-budgeted, out-of-core)
    ArtifactKind("train", provides="ibase", distilled=False),
    ArtifactKind("datastore", provides="datastore", builder="workers.training.datastore"),
    ArtifactKind(
        "distill",
        provides="ibase",
        builder="workers.training.distill",
        verifier=True,
        reads=("labels",),
        distilled=True,
    ),
    # the verifier's greedy continuations of the corpus (workers.training.labels, run by the accelerator worker)
    ArtifactKind("label", provides="labels", runs_on="accelerator", verifier=True),
)

BY_CELL_KIND = {k.cell_kind: k for k in KINDS}
CPU_KINDS = tuple(k.cell_kind for k in KINDS if k.runs_on == "cpu")
ACCELERATOR_KINDS = tuple(k.cell_kind for k in KINDS if k.runs_on == "accelerator")
VERIFIER_KINDS = tuple(k.cell_kind for k in KINDS if k.verifier)


def producer(artifact: str, distilled: bool = False) -> ArtifactKind:
    """The kind that builds `artifact` for a corpus with (or without) verifier labels."""
    for k in KINDS:
        if k.provides == artifact and k.distilled in (None, distilled):
            return k
    raise SpecError(f"no builder for artifact {artifact!r} (known: {', '.join(sorted({k.provides for k in KINDS}))})")


def chain(artifact: str, distilled: bool = False) -> list[ArtifactKind]:
    """The kinds to build for `artifact`, inputs first (each once)."""
    out: list[ArtifactKind] = []
    kind = producer(artifact, distilled)
    for need in kind.reads:
        out += [k for k in chain(need, distilled) if k not in out]
    return [*out, kind]

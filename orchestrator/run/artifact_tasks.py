"""The CPU tasks that build a run's artifacts: what the loop submits for an artifact cell, and where it ran.

A train cell becomes one `workers.training.ray_tasks.train_task` (the instance base), any other artifact cell one
`build_task`. The training task itself asks Ray for one CPU and `COORDINATOR_BYTES` of memory: it only tokenises
(streaming, in batches) and coordinates; every stage that holds instances is a task of its own declaring its
share of the corpus's `memory_gb` (`workers.training.ray_tasks.RayMap`), so several corpora train at once on however many
nodes, their budgets scheduled as Ray memory.

Example:
    >>> ref = submit_artifact(spec, cell, paths)     # in orchestrator.run.loop
    >>> ran_on(ray.get(ref))                          # the Ray node id stored in `cells.worker`
"""

from __future__ import annotations

from typing import Any

from orchestrator.run.spec import Spec
from storage.cell_spec import CellSpec
from workers.contracts import ArtifactInfo, ArtifactJob
from workers.training.ibase import IBaseInfo

COORDINATOR_BYTES = 512 << 20  # the training task's own process: the tokenizer, a batch of documents, the counts


def submit_artifact(spec: Spec, cell: CellSpec, paths: dict[str, str]) -> Any:  # a ray.ObjectRef: no ray import here
    """Submit the CPU task that builds this artifact cell (an instance base, or another artifact by kind); its
    ObjectRef. `paths` maps built artifact cells' keys to their files (the inputs a build reads)."""
    from workers.training.ibase import IBaseRequest
    from workers.training.ray_tasks import build_task, train_task  # deferred: it imports ray

    corpus = spec.corpus(cell.corpus)
    tokenizer = cell.params.tokenizer
    power = dict(power_sources=tuple(spec.power.sources), power_hz=spec.power.hz)
    if cell.kind != "train":
        return build_task.remote(
            ArtifactJob(
                kind=cell.kind,
                corpus=corpus.source(),
                tokenizer=tokenizer,
                out_dir=spec.experiment.artifacts,
                options=corpus.model_dump(exclude={"name"}),
                inputs={role: paths[key] for role, key in cell.needs},
                **power,
            )
        )
    request = IBaseRequest(
        corpus.source(),
        tokenizer,
        spec.experiment.artifacts,
        window=corpus.window,
        backend=corpus.backend,
        order=corpus.order,
        max_tokens=corpus.max_tokens,
        shards=corpus.shards,
        memory_gb=corpus.memory_gb,
    )
    return train_task.options(memory=COORDINATOR_BYTES).remote(request, **power)


def ran_on(info: IBaseInfo | ArtifactInfo) -> str:
    """What `cells.worker` records for a built artifact: the Ray node id that built it."""
    return getattr(info, "node_id", None) or "ray-cpu"

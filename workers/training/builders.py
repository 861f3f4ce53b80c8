"""Artifact builders by cell kind: each a pure function `build(job: ArtifactJob) -> ArtifactInfo`.

Instance bases (cell kind "train") have their own trainer (`workers.training.ray_tasks`) and verifier labels their own job on
the accelerator worker; every other artifact a draft needs is built here, on a CPU worker, through
`workers.training.ray_tasks.build_task`, by the module the artifact registry (`workers.training.artifacts.KINDS`) names.
"""

from __future__ import annotations

import importlib

from workers.contracts import ArtifactInfo, ArtifactJob
from workers.errors import GreenspecError
from workers.training.artifacts import KINDS

BUILDERS: dict[str, str] = {k.cell_kind: k.builder for k in KINDS if k.builder}  # cell kind -> module


def build(job: ArtifactJob) -> ArtifactInfo:
    """Build `job` with the builder registered for its kind."""
    module = BUILDERS.get(job.kind)
    if module is None:
        raise GreenspecError(f"no builder for artifact kind {job.kind!r} (known: {', '.join(BUILDERS) or 'none'})")
    return importlib.import_module(module).build(job)

"""Artifact builders by cell kind: each a pure function `build(job: ArtifactJob) -> ArtifactInfo`.

Instance bases (cell kind "train") have their own trainer (`workers.trainer`); every other artifact a draft
needs is built here, on a CPU worker, through `workers.trainer.build_task`. Adding one is a module with a
`build` function and one line in `BUILDERS`.
"""

from __future__ import annotations

import importlib

from workers.contracts import ArtifactInfo, ArtifactJob
from workers.errors import GreenspecError

BUILDERS: dict[str, str] = {"datastore": "workers.datastore", "distill": "workers.distill"}  # cell kind -> module


def build(job: ArtifactJob) -> ArtifactInfo:
    """Build `job` with the builder registered for its kind."""
    module = BUILDERS.get(job.kind)
    if module is None:
        raise GreenspecError(f"no builder for artifact kind {job.kind!r} (known: {', '.join(BUILDERS) or 'none'})")
    return importlib.import_module(module).build(job)

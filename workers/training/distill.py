"""The distilled instance base: the corpus's contexts, the verifier's greedy next tokens as targets.

A pure artifact builder (`build(job: ArtifactJob) -> ArtifactInfo`, cell kind "distill") run on a CPU worker:
it reads the label cell's manifest (`job.inputs["labels"]`: token file, offsets, labels written by
`workers.training.labels`), makes the usual windowed instances from the tokens (`workers.igtree.instances.make_instances`),
replaces each target by the verifier's label at that position, and fits an IGTree in memory (the label cell's
`max_tokens` bounds it). The tree loads like any native instance base, so the `olifant` and `hybrid` drafts
use it unchanged.
"""

from __future__ import annotations

import hashlib
import logging
import time
from pathlib import Path

from workers.contracts import ArtifactInfo, ArtifactJob
from workers.errors import IBaseError
from workers.igtree import IGTree
from workers.igtree.instances import make_instances
from workers.training.labels import load_labelled

logger = logging.getLogger(__name__)


def distilled_instances(tokens, offsets, labels, window: int):
    """Contexts (n, window) from the corpus and targets (n,) from the verifier, one per labelled position."""
    contexts, _ = make_instances(tokens, offsets, window)
    _, targets = make_instances(labels, offsets, window)  # the same positions, so the label at each one
    return contexts, targets


def build(job: ArtifactJob) -> ArtifactInfo:
    """Fit the distilled IGTree from the labels in `job.inputs["labels"]` and save it under `job.out_dir`."""
    if "labels" not in job.inputs:
        raise IBaseError(f"distill: needs the labels artifact (inputs: {sorted(job.inputs) or 'none'})")
    t0 = time.perf_counter()
    window, order = int(job.options.get("window", 4)), str(job.options.get("order", "gain_ratio"))
    tokens, offsets, labels = load_labelled(job.inputs["labels"])
    contexts, targets = distilled_instances(tokens, offsets, labels, window)
    if (targets < 0).any():
        raise IBaseError(f"distill: {int((targets < 0).sum())} positions have no verifier label")
    ident = hashlib.sha256(Path(job.inputs["labels"]).read_bytes() + f"{window}:{order}".encode()).hexdigest()[:12]
    tree = IGTree.fit(contexts, targets, order=order, name=job.corpus.name, labels="verifier", tokens=len(tokens))
    out = Path(job.out_dir)
    out.mkdir(parents=True, exist_ok=True)
    path = out / f"{job.corpus.name}-distilled-{ident}.igtree"
    n_bytes = tree.save(path)
    digest = hashlib.sha256(path.read_bytes()).hexdigest()
    logger.info("distilled %s: %d instances -> %s (%d bytes)", job.corpus.name, len(targets), path, n_bytes)
    return ArtifactInfo(
        kind=job.kind,
        path=str(path),
        sha256=digest,
        bytes=n_bytes,
        build_s=time.perf_counter() - t0,
        meta={
            "instances": len(targets),
            "tokens": len(tokens),
            "window": window,
            "order": order,
            "nodes_after_prune": tree.meta.get("nodes_after_prune"),
        },
    )

"""Artifacts that travel between Ray nodes without a shared filesystem.

An artifact (instance base, datastore, labels) is written to `[experiment] artifacts` on the node that built
it, and stays there. A node that needs it and does not have it (`ensure_local`) asks the nodes that do, reads
it in chunks through Ray tasks pinned to the holder's node (`NodeAffinitySchedulingStrategy`, no CPU asked), and
writes it under the same path, checked by the holder's sha256 before it is renamed into place. Where the
artifacts folder is shared (every node sees the file), nothing is copied. After a training on a node without the
accelerator, `replicate_to_accelerator` copies the file to the accelerator's node at once, so that losing the
builder's node afterwards loses nothing.

Example:
    >>> ensure_local("/data/ibases/plays-3f9c0a1b2d4e.igtree")   # on the accelerator worker, before loading it
    'fetched'
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass
from pathlib import Path

import ray
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

from workers.files import file_sha256

logger = logging.getLogger(__name__)

CHUNK_BYTES = 8 << 20  # one object-store round trip per 8 MiB: few calls, and small next to the store
IN_FLIGHT_CHUNKS = 4  # chunks read ahead: bounds the copy's memory to ~32 MiB whatever the file's size


@dataclass(frozen=True)
class Held:
    """A file as one node holds it: the node, the bytes, the sha256."""

    node_id: str
    size: int
    sha256: str


def this_node() -> str:
    """The Ray node id (hex) of the calling process."""
    return ray.get_runtime_context().get_node_id()


def _on(node_id: str) -> NodeAffinitySchedulingStrategy:
    return NodeAffinitySchedulingStrategy(node_id=node_id, soft=False)


@ray.remote(num_cpus=0, max_retries=0)
def _describe(path: str) -> Held | None:
    """The file at `path` on this node (None if absent)."""
    if not os.path.isfile(path):
        return None
    return Held(this_node(), os.path.getsize(path), file_sha256(path))


@ray.remote(num_cpus=0, max_retries=0)
def _read(path: str, offset: int, size: int) -> bytes:
    """`size` bytes of the file at `offset`, on this node."""
    with open(path, "rb") as fh:
        fh.seek(offset)
        return fh.read(size)


def alive_nodes() -> list[dict]:
    """Ray's description of every alive node."""
    return [n for n in ray.nodes() if n.get("Alive")]


def find_holder(path: str, exclude: str | None = None) -> Held | None:
    """The first other alive node holding `path`, with its size and sha256 (None if no node holds it)."""
    refs = [
        _describe.options(scheduling_strategy=_on(n["NodeID"])).remote(path)
        for n in alive_nodes()
        if n["NodeID"] != exclude
    ]
    for ref in refs:
        try:
            held = ray.get(ref)
        except (ray.exceptions.RayError, OSError) as err:  # a node that died meanwhile holds nothing we can read
            logger.info("transfer: a node could not describe %s (%s)", path, type(err).__name__)
            continue
        if held is not None:
            return held
    return None


def fetch(path: str, held: Held) -> None:
    """Copy `path` from the node in `held` into the same path here, chunk by chunk; checked by sha256 before the
    rename, so a half-copied or corrupted file is never in place."""
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_name(f".{target.name}.{os.getpid()}.fetch.tmp")
    offsets = list(range(0, held.size, CHUNK_BYTES))
    try:
        with open(tmp, "wb") as out:
            pending = []
            for offset in offsets:
                pending.append(_read.options(scheduling_strategy=_on(held.node_id)).remote(path, offset, CHUNK_BYTES))
                if len(pending) >= IN_FLIGHT_CHUNKS:
                    out.write(ray.get(pending.pop(0)))
            for ref in pending:
                out.write(ray.get(ref))
        got = file_sha256(tmp)
        if got != held.sha256:
            raise OSError(
                f"{path}: copied from node {held.node_id[:12]} with sha256 {got[:12]}..., "
                f"expected {held.sha256[:12]}..."
            )
        os.replace(tmp, target)
    finally:
        tmp.unlink(missing_ok=True)


def ensure_local(path: str, sha256: str | None = None) -> str:
    """Make `path` present on this node: 'local' if it already is (with `sha256`, when given), 'fetched' if it was
    copied from another node, 'missing' if no alive node holds it (the caller then fails as on a missing file)."""
    if os.path.exists(path) and (sha256 is None or file_sha256(path) == sha256):
        return "local"
    held = find_holder(path, exclude=this_node())
    if held is None or (sha256 is not None and held.sha256 != sha256):
        logger.warning("transfer: no node holds %s", path)
        return "missing"
    fetch(path, held)
    logger.info("transfer: fetched %s (%d bytes) from node %s", path, held.size, held.node_id[:12])
    return "fetched"


@ray.remote(num_cpus=0, max_retries=0)
def _ensure_local_task(path: str, sha256: str) -> str:
    return ensure_local(path, sha256)


def accelerator_nodes() -> list[str]:
    """Ids of the alive nodes offering the `accelerator` resource."""
    return [n["NodeID"] for n in alive_nodes() if n.get("Resources", {}).get("accelerator", 0) > 0]


def replicate_to_accelerator(path: str, sha256: str) -> list[str]:
    """Copy a file this node built to every accelerator node that lacks it; returns the nodes copied to ('local'
    ones, which see the file already, e.g. through a shared folder, are not)."""
    here = this_node()
    targets = [n for n in accelerator_nodes() if n != here]
    results = ray.get([_ensure_local_task.options(scheduling_strategy=_on(n)).remote(path, sha256) for n in targets])
    return [n for n, r in zip(targets, results) if r == "fetched"]

"""The Ray task adapters of training: the only module of `workers.training` that imports Ray.

Training (`train_task`, `train_with_energy`): one training on a CPU worker, power-logged, returning `IBaseInfo` with
the Ray node whose disk holds the file. `RayMap` runs the training's stages (tokenising, scanning, spilling,
building) as Ray tasks, each declaring `memory=` so that concurrent trainings queue instead of running out of
memory, pinned to the node that holds the training's work folder; `ray_count_map` spreads the in-memory path's
counting over the cluster (the tokens travel through the object store). `build_task` builds the other artifact
kinds, (the replay task is `workers.replay.task`), `RaySession` connects to (or starts) a cluster.

Artifact copies between nodes (`ensure_local`, `replicate_to_accelerator`): an artifact is written to
`[experiment] artifacts` on the node that built it, and stays there. A node that needs it and does not have it asks
the nodes that do, reads it in chunks through Ray tasks pinned to the holder's node (no CPU asked), and writes it
under the same path, checked by the holder's sha256 before it is renamed into place. Where the artifacts folder is
shared, nothing is copied. After a training on a node without the accelerator, the file is copied to the
accelerator's node at once, so that losing the builder's node afterwards loses nothing.

Example:
    >>> info = ray.get(train_task.remote(IBaseRequest(source, "mistral", "runs/ibases", memory_gb=1.0)))
    >>> ensure_local("/data/ibases/plays-3f9c0a1b2d4e.igtree")   # on the accelerator worker, before loading it
    'fetched'
"""

from __future__ import annotations

import dataclasses
import logging
import os
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import ray
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

from workers.contracts import ArtifactInfo, ArtifactJob
from workers.errors import PowerError
from workers.files import file_sha256
from workers.igtree import InstanceCounts
from workers.igtree.instances import CHUNK_TOKENS, count_shard, local_count_map
from workers.igtree.partitioned import Progress
from workers.igtree.plan import CHUNK_BYTES_PER_TOKEN
from workers.memwatch import machine_busy_cpu_s
from workers.power import PowerSampler, find_sources
from workers.power.attribution import training_energy_j
from workers.training.builders import build
from workers.training.ibase import IBaseInfo, IBaseRequest, train_instance_base
from workers.training.manifest import artifact_manifest, ibase_manifest

logger = logging.getLogger(__name__)

# ---------------------------------------------------------------------------------------------- artifact copies

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


# ---------------------------------------------------------------------------------------------- training

ENERGY_ATTRIBUTION = "idle per CPU capacity + CPU-time share"  # workers.power.attribution.ATTRIBUTION


def node_memory_bytes(node_id: str) -> float:
    """The `memory` resource a node offers Ray (inf if unknown): a larger ask pinned there would wait forever."""
    for node in ray.nodes():
        if node["NodeID"] == node_id:
            return float(node["Resources"].get("memory", float("inf")))
    return float("inf")


@ray.remote(num_cpus=1)
def _count_shard_task(tokens: np.ndarray, offsets: np.ndarray, window: int, lo: int, hi: int) -> InstanceCounts | None:
    """One shard's counts on a Ray CPU worker."""
    return count_shard(tokens, offsets, window, lo, hi)


def ray_count_map(
    tokens: np.ndarray, offsets: np.ndarray, window: int, bounds: Sequence[tuple[int, int]]
) -> list[InstanceCounts | None]:
    """Count shards as parallel Ray tasks on any node; tokens go to the object store once, results come back in
    order. Each task declares the memory of one counting chunk."""
    tokens_ref, offsets_ref = ray.put(np.asarray(tokens)), ray.put(np.asarray(offsets))
    refs = [
        _count_shard_task.options(memory=min(hi - lo, CHUNK_TOKENS) * CHUNK_BYTES_PER_TOKEN + (1 << 20)).remote(
            tokens_ref, offsets_ref, window, lo, hi
        )
        for lo, hi in bounds
    ]
    return ray.get(refs)


def train_sharded(req: IBaseRequest, progress: Progress | None = None) -> IBaseInfo:
    """`train_instance_base` with shard counting spread over Ray CPU tasks, merged here."""
    return train_instance_base(req, count_map=ray_count_map, progress=progress)


@ray.remote(num_cpus=1)
def _run_call(fn: Callable, kwargs: dict):
    """One stage call on a Ray CPU worker; returns (result, its CPU seconds)."""
    cpu0 = time.process_time()
    return fn(**kwargs), time.process_time() - cpu0


class RayMap:
    """A TaskMap over Ray CPU tasks pinned to one node, each declaring `memory=`; sums the tasks' CPU seconds.

    The tasks read and write the training's work folder, so they run on the node that holds it (default: the
    caller's). With `budget_bytes`, calls are admitted in order while the memory declared by those in flight fits
    the budget (one at least), so a training stays within its own budget whatever the node's memory.
    """

    def __init__(self, node_id: str | None = None):
        self.cpu_s = 0.0
        self.node_id = node_id or this_node()

    def __call__(
        self,
        fn: Callable,
        calls: list[dict],
        memory_bytes: int | list[int],
        on_done: Callable[[int], None] | None = None,
        budget_bytes: int | None = None,
    ) -> list:
        mem = memory_bytes if isinstance(memory_bytes, list) else [memory_bytes] * len(calls)
        node_mem = node_memory_bytes(self.node_id)
        mem = [max(1, int(min(m, node_mem))) for m in mem]
        where = NodeAffinitySchedulingStrategy(node_id=self.node_id, soft=False)
        out, flight, nxt, done = [None] * len(calls), {}, 0, 0
        while done < len(calls):
            while nxt < len(calls) and (
                not flight or budget_bytes is None or sum(mem[i] for i in flight.values()) + mem[nxt] <= budget_bytes
            ):
                ref = _run_call.options(memory=mem[nxt], scheduling_strategy=where).remote(fn, calls[nxt])
                flight[ref], nxt = nxt, nxt + 1
            ready, _ = ray.wait(list(flight), num_returns=1)
            i = flight.pop(ready[0])
            out[i], cpu_s = ray.get(ready[0])
            self.cpu_s += cpu_s
            done += 1
            if on_done:
                on_done(done)
        return out


def cluster_cpus() -> int:
    """CPUs of the Ray cluster (at least 1)."""
    return max(1, int(ray.cluster_resources().get("CPU", 1)))


def _over_ray(req: IBaseRequest) -> IBaseRequest:
    """The request with its workers defaulted to the cluster's CPUs."""
    return req if req.workers else dataclasses.replace(req, workers=cluster_cpus())


def train_distributed(req: IBaseRequest, progress: Progress | None = None) -> IBaseInfo:
    """`train_instance_base` with every stage on Ray CPU tasks (default: one per cluster CPU)."""
    return train_instance_base(_over_ray(req), run_map=RayMap(), progress=progress)


def _sampler(power_sources: Sequence[str], power_hz: float):
    """A power sampler over the requested sources, or what this node has (a CPU node has no NVML)."""
    try:
        sources = find_sources(tuple(power_sources))
    except PowerError as err:
        logger.info("trainer: %s; measuring with what this node has", err)
        sources = find_sources(("auto",))
    return PowerSampler(sources, hz=power_hz)


def train_with_energy(
    req: IBaseRequest,
    *,
    power_sources: Sequence[str] = ("auto",),
    power_hz: float = 10.0,
    progress: Progress | None = None,
) -> IBaseInfo:
    """`train_instance_base` with its stages on Ray CPU tasks, power-logged; energy by CPU-time share.

    Several trainings (and the sweep) may share the machine over overlapping windows: each is given its share of the
    measured energy by its CPU seconds (its own processes: this one and the tasks it ran), as
    `workers.power.attribution` defines it, so concurrent trainings' shares add up to at most the measured energy.
    """
    count_map = ray_count_map if req.shards > 1 else local_count_map
    machine0 = machine_busy_cpu_s()
    with _sampler(power_sources, power_hz) as sampler:
        with sampler.measure() as span:
            info = train_instance_base(_over_ray(req), count_map=count_map, run_map=RayMap(), progress=progress)
    w = span.window
    energy = training_energy_j(sampler, w, info.cpu_s or 0.0, machine_busy_cpu_s() - machine0)
    where, digest = ibase_manifest(req, info)
    return dataclasses.replace(
        info,
        manifest_path=where,
        manifest_sha256=digest,
        energy_j=energy,
        power_source=w.source_label,
        power_measured=w.measured,
        energy_attribution=ENERGY_ATTRIBUTION,
        node_id=this_node(),
    )


@ray.remote(num_cpus=1)
def train_task(req: IBaseRequest, power_sources: Sequence[str] = ("auto",), power_hz: float = 10.0) -> IBaseInfo:
    """Train one instance base on a Ray CPU worker (`train_with_energy`); the file is copied to the accelerator's
    node at once (`replicate_to_accelerator`), so losing this node afterwards loses nothing."""
    info = train_with_energy(req, power_sources=power_sources, power_hz=power_hz)
    replicate_to_accelerator(info.path, info.sha256)
    replicate_to_accelerator(info.manifest_path, info.manifest_sha256)
    return info


class RaySession:
    """Connect to a Ray cluster at `address`, or start a local one with every CPU; shut down only what it started."""

    def __init__(self, address: str | None = None):
        self.address = address
        self.started = False

    def __enter__(self) -> RaySession:
        if not ray.is_initialized():
            os.environ.setdefault("RAY_AUTH_MODE", "disabled")
            # Ray's workers at the driver's own priority (Ray's default: 15 nicer); `nice` greenspec to yield
            os.environ.setdefault("RAY_worker_niceness", "0")
            if self.address:
                ray.init(address=self.address, log_to_driver=False, configure_logging=False)
            else:
                # "local": a new Ray here, never the last `ray start` cluster that a bare ray.init() would join
                ray.init(
                    address="local",
                    num_cpus=os.cpu_count(),
                    include_dashboard=False,
                    log_to_driver=False,
                    configure_logging=False,
                )
            self.started = True
        return self

    def __exit__(self, *exc) -> None:
        if self.started:
            ray.shutdown()


@ray.remote(num_cpus=1)
def build_task(job: ArtifactJob) -> ArtifactInfo:
    """Build one non-IGTree artifact (a datastore, a distilled instance base) on a Ray CPU worker, power-logged; its
    energy is its share of the window's, by its CPU seconds, as a training's (`workers.power.attribution`)."""
    for path in job.inputs.values():  # labels made on the accelerator's node, an instance base built elsewhere
        ensure_local(path)
    machine0, own0 = machine_busy_cpu_s(), time.process_time()
    with _sampler(job.power_sources, job.power_hz) as sampler:
        with sampler.measure() as span:
            info = build(job)
        own_cpu_s, machine_cpu_s = time.process_time() - own0, machine_busy_cpu_s() - machine0
        w = span.window
        energy = training_energy_j(sampler, w, own_cpu_s, machine_cpu_s)
    where, digest = artifact_manifest(job, info)
    replicate_to_accelerator(info.path, info.sha256)
    replicate_to_accelerator(where, digest)
    return dataclasses.replace(
        info,
        energy_j=energy,
        power_source=w.source_label,
        power_measured=w.measured,
        node_id=this_node(),
        meta={**info.meta, "manifest_path": where, "manifest_sha256": digest},
    )

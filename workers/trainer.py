"""The CPU trainer: corpus -> tokens -> instances -> instance base on disk, plus its thin Ray adapters.

`train_instance_base` is pure (no Ray): tokenise the source, count instances shard by shard (in training
order), merge, build, save atomically under a name derived from the inputs, return `IBaseInfo`. The Ray
adapters run it as a task (`train_task`) or spread the counting over CPU tasks (`train_sharded`); both give
the bit-identical file `shards=1` gives.

Example:
    >>> info = train_instance_base(TextSource(name="plays", path="plays.txt"), "mistral", "runs/ibases")
    >>> info.path, info.nodes_after_prune
    ('runs/ibases/plays-3f9c0a1b2d4e.igtree', 121850)
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import logging
import os
import shutil
import socket
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import ray

from workers.contracts import ArtifactInfo, ArtifactJob
from workers.corpora import TextSource
from workers.errors import IBaseError
from workers.igtree import FORMAT_VERSION, ORDERS, IGTree, InstanceCounts, TimblIGTree, count_instances, merge_counts
from workers.instances import TokenFile, instance_offset, make_instances, shard_bounds, tokenize_source
from workers.tokenizer import load_tokenizer, tokenizer_id

logger = logging.getLogger(__name__)

BACKENDS = ("native", "timbl")
CHUNK_TOKENS = 1 << 22  # target positions per counting step: bounds the (n, w) instance arrays to ~100 MB

CountMap = Callable[[np.ndarray, np.ndarray, int, Sequence[tuple[int, int]]], list[InstanceCounts]]


@dataclass(frozen=True)
class IBaseInfo:
    """What training produced: the file, its identity and size, and what it cost (energy filled in later)."""

    name: str
    path: str
    sha256: str
    backend: str
    window: int
    order: str
    tokenizer_id: str
    tokens: int
    instances: int
    nodes_before_prune: int | None
    nodes_after_prune: int | None
    bytes: int
    train_s: float
    energy_j: float | None = None
    power_source: str | None = None
    power_measured: bool | None = None


def artifact_name(source: TextSource, tok_id: str, *, window: int, backend: str, order: str,
                  max_tokens: int | None) -> str:
    """`<name>-<hash>.<ext>`: the same inputs always give the same file name (shards do not change the result)."""
    key = json.dumps({"source": dataclasses.asdict(source), "tokenizer": tok_id, "window": window,
                      "backend": backend, "order": order, "max_tokens": max_tokens, "format": FORMAT_VERSION},
                     sort_keys=True)
    ext = "igtree" if backend == "native" else "ibase"
    return f"{source.name}-{hashlib.sha256(key.encode()).hexdigest()[:12]}.{ext}"


WORK_PREFIX = ".work-"  # scratch folders: .work-<host>-<pid>-<random>, removed when their trainer is gone


def remove_stale_work(out_dir: Path) -> list[Path]:
    """Remove scratch folders left by killed trainings on this host (their process no longer exists)."""
    import psutil

    host, removed = socket.gethostname(), []
    for d in Path(out_dir).glob(f"{WORK_PREFIX}{host}-*"):
        pid = d.name.removeprefix(f"{WORK_PREFIX}{host}-").split("-", 1)[0]
        if d.is_dir() and pid.isdigit() and not psutil.pid_exists(int(pid)):
            shutil.rmtree(d, ignore_errors=True)
            removed.append(d)
    if removed:
        logger.info("removed %d scratch folders of killed trainings in %s", len(removed), out_dir)
    return removed


def count_shard(tokens: np.ndarray, offsets: np.ndarray, window: int, lo: int, hi: int,
                chunk_tokens: int = CHUNK_TOKENS) -> InstanceCounts | None:
    """Counts of the instances whose target lies in [lo, hi), chunk by chunk; None if there are none."""
    parts = []
    for a in range(lo, hi, chunk_tokens):
        b = min(hi, a + chunk_tokens)
        contexts, targets = make_instances(tokens, offsets, window, a, b)
        if len(targets):
            parts.append(count_instances(contexts, targets, offset=instance_offset(offsets, a)))
    return merge_counts(parts) if parts else None


def local_count_map(tokens, offsets, window, bounds) -> list[InstanceCounts | None]:
    """Count every shard here, one after the other."""
    return [count_shard(tokens, offsets, window, lo, hi) for lo, hi in bounds]


def train_instance_base(source: TextSource, tokenizer_name: str, out_dir, *, window: int = 4,
                        backend: str = "native", order: str = "gain_ratio", max_tokens: int | None = None,
                        shards: int = 1, count_map: CountMap = local_count_map) -> IBaseInfo:
    """Train one instance base from a corpus and write it to `out_dir`; `train_s` covers tokenising to saving."""
    _check_options(window, backend, order, shards)
    t0 = time.perf_counter()
    tok = load_tokenizer(tokenizer_name)
    tok_id = tokenizer_id(tok)
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    path = out / artifact_name(source, tok_id, window=window, backend=backend, order=order, max_tokens=max_tokens)
    remove_stale_work(out)
    work = Path(tempfile.mkdtemp(prefix=f"{WORK_PREFIX}{socket.gethostname()}-{os.getpid()}-", dir=out))
    try:
        tf = tokenize_source(source, tok, work, max_tokens=max_tokens)
        meta = {"name": source.name, "source": source.describe(), "tokenizer_id": tok_id, "tokens": tf.n_tokens}
        if backend == "native":
            tree = _build_native(tf, window, order, shards, count_map, meta)
            n_bytes = tree.save(path)
            nodes = (tree.meta["nodes_before_prune"], tree.meta["nodes_after_prune"])
        else:
            contexts, targets = make_instances(tf.tokens(), tf.offsets(), window)
            tree = TimblIGTree.fit(contexts, targets, order=order, workdir=work / "timbl", **meta)
            n_bytes, nodes = tree.save(path), (None, tree.n_nodes)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    info = IBaseInfo(name=source.name, path=str(path), sha256=_file_sha256(path), backend=backend, window=window,
                     order=order, tokenizer_id=tok_id, tokens=tf.n_tokens, instances=tf.n_instances,
                     nodes_before_prune=nodes[0], nodes_after_prune=nodes[1], bytes=n_bytes,
                     train_s=time.perf_counter() - t0)
    logger.info("trained %s: %d tokens, %d instances -> %s (%d bytes, %.2f s)", info.name, info.tokens,
                info.instances, info.path, info.bytes, info.train_s)
    return info


def _build_native(tf: TokenFile, window: int, order: str, shards: int, count_map: CountMap, meta: dict) -> IGTree:
    """Count the shards (through `count_map`), merge them in training order, build the tree."""
    bounds = shard_bounds(tf.n_tokens, shards)
    parts = [p for p in count_map(tf.tokens(), tf.offsets(), window, bounds) if p is not None]
    return IGTree.from_counts(merge_counts(parts), order=order, **meta)


def _check_options(window: int, backend: str, order: str, shards: int) -> None:
    """Refuse options no backend accepts, naming the value and what would be."""
    if backend not in BACKENDS:
        raise IBaseError(f"trainer: backend={backend!r} is not accepted; use one of {BACKENDS}")
    if order not in ORDERS:
        raise IBaseError(f"trainer: order={order!r} is not accepted; use one of {ORDERS}")
    if not (isinstance(window, int) and window >= 1):
        raise IBaseError(f"trainer: window={window!r} is not accepted; use an integer >= 1")
    if not (isinstance(shards, int) and shards >= 1):
        raise IBaseError(f"trainer: shards={shards!r} is not accepted; use an integer >= 1")


def _file_sha256(path: Path) -> str:
    """sha256 of a file, read in 1 MiB blocks."""
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


# ---------------------------------------------------------------------------------------------------- Ray


@ray.remote(num_cpus=1)
def _count_shard_task(tokens, offsets, window: int, lo: int, hi: int) -> InstanceCounts | None:
    """One shard's counts on a Ray CPU worker."""
    return count_shard(tokens, offsets, window, lo, hi)


def ray_count_map(tokens, offsets, window, bounds) -> list[InstanceCounts | None]:
    """Count shards as parallel Ray tasks; tokens go to the object store once, results come back in order."""
    tokens_ref, offsets_ref = ray.put(np.asarray(tokens)), ray.put(np.asarray(offsets))
    return ray.get([_count_shard_task.remote(tokens_ref, offsets_ref, window, lo, hi) for lo, hi in bounds])


def train_sharded(source: TextSource, tokenizer_name: str, out_dir, **options) -> IBaseInfo:
    """`train_instance_base` with shard counting spread over Ray CPU tasks, merged here (the driver)."""
    return train_instance_base(source, tokenizer_name, out_dir, count_map=ray_count_map, **options)


def _sampler(power_sources: Sequence[str], power_hz: float):
    """A power sampler over the requested sources, or what this node has (a CPU node has no NVML)."""
    from workers.errors import PowerError
    from workers.power import PowerSampler, find_sources

    try:
        sources = find_sources(tuple(power_sources))
    except PowerError as err:
        logger.info("trainer: %s; measuring with what this node has", err)
        sources = find_sources(("auto",))
    return PowerSampler(sources, hz=power_hz)


@ray.remote(num_cpus=1)
def train_task(source: TextSource, tokenizer_name: str, out_dir: str, *, power_sources: Sequence[str] = ("auto",),
               power_hz: float = 10.0, **options) -> IBaseInfo:
    """Train one instance base on a Ray CPU worker, power-logged; shards > 1 count on further CPU tasks."""
    count_map = ray_count_map if options.get("shards", 1) > 1 else local_count_map
    with _sampler(power_sources, power_hz) as sampler:
        with sampler.measure() as span:
            info = train_instance_base(source, tokenizer_name, out_dir, count_map=count_map, **options)
    w = span.window
    return dataclasses.replace(info, energy_j=w.energy_j, power_source=w.source_label, power_measured=w.measured)


@ray.remote(num_cpus=1)
def build_task(job: ArtifactJob) -> ArtifactInfo:
    """Build one non-IGTree artifact (a datastore...) on a Ray CPU worker, power-logged."""
    from workers.builders import build

    with _sampler(job.power_sources, job.power_hz) as sampler:
        with sampler.measure() as span:
            info = build(job)
    w = span.window
    return dataclasses.replace(info, energy_j=w.energy_j, power_source=w.source_label, power_measured=w.measured)

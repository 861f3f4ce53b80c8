"""The CPU trainer: corpus -> tokens -> instances -> instance base on disk, plus its thin Ray adapters.

`train_instance_base` is pure (no Ray): tokenise the source, then build the tree either in memory (the fast
path, when the instances fit the memory budget: count shard by shard in training order, merge, build) or out of
core (`workers.igtree.partitioned`: partitions spilled to disk and built one by one, or in parallel through a
task map), save atomically under a name derived from the inputs, return `IBaseInfo`. Both paths and any number
of shards or workers give the bit-identical file.

A training keeps its intermediate files in `<out>/.work-<artifact name>/`: the token file and every finished
stage of the out-of-core build. Killed part-way (kill -9, Ctrl-C, a lost worker), the same call resumes from
there; unfinished (`.tmp`) files are deleted first and never used; the folder goes once the file is written.
Two trainings of the same file at once (two processes, one work folder) do not mix: the second waits on the
first's lock (`training_lock`), then trains (or, with `reuse`, takes the file the first wrote).

The Ray adapters: `train_task` (one training on a CPU worker, power-logged), `train_sharded` (counting spread
over CPU tasks) and `RayMap` (the out-of-core stages as Ray tasks, each declaring `memory=` to Ray so that
concurrent trainings queue instead of running out of memory).

Example:
    >>> info = train_instance_base(TextSource(name="plays", path="plays.txt"), "mistral", "runs/ibases")
    >>> info.path, info.nodes_after_prune
    ('runs/ibases/plays-3f9c0a1b2d4e.igtree', 121850)
    >>> info = train_instance_base(source, "mistral", "runs/ibases", memory_gb=1.0)   # out of core if needed
"""

from __future__ import annotations

import dataclasses
import fcntl
import hashlib
import json
import logging
import os
import shutil
import socket
import time
from collections.abc import Callable, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import psutil
import ray

from workers.contracts import ArtifactInfo, ArtifactJob
from workers.corpora import TextSource
from workers.errors import CorpusError, IBaseError
from workers.files import file_sha256
from workers.igtree import FORMAT_VERSION, ORDERS, IGTree, InstanceCounts, TimblIGTree, count_instances, merge_counts
from workers.igtree.partitioned import Progress, TaskMap, build_partitioned, local_map, plan_training
from workers.instances import (
    TokenFile,
    instance_offset,
    make_instances,
    shard_bounds,
    tokenize_parallel,
    tokenize_source,
)
from workers.memwatch import PeakRss
from workers.tokenizer import load_tokenizer, tokenizer_id

logger = logging.getLogger(__name__)

BACKENDS = ("native", "timbl")
CHUNK_TOKENS = 1 << 22  # target positions per counting step: bounds the (n, w) instance arrays to ~100 MB
DEFAULT_BUDGET_SHARE = 0.5  # without memory_gb: half the memory available when the training starts
ENERGY_ATTRIBUTION = "idle per CPU capacity + CPU-time share"  # workers.power.attribution.ATTRIBUTION
PARALLEL_TOKENISE_BYTES = 64 << 20  # smaller local sources tokenise faster in one process than over tasks

CountMap = Callable[[np.ndarray, np.ndarray, int, Sequence[tuple[int, int]]], list[InstanceCounts]]


@dataclass(frozen=True)
class IBaseInfo:
    """What training produced: the file, its identity and size, and what it cost (energy filled in later).

    `partitions` is 0 for the in-memory build; `peak_rss_bytes` is the training's process tree (Ray's daemons
    aside); `cpu_s` its CPU seconds over all its processes; `energy_attribution` how `energy_j` was assigned.
    """

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
    partitions: int = 0
    memory_budget_bytes: int | None = None
    peak_rss_bytes: int | None = None
    cpu_s: float | None = None
    energy_attribution: str | None = None
    reused: bool = False


def artifact_name(source: TextSource, tok_id: str, *, window: int, backend: str, order: str,
                  max_tokens: int | None) -> str:
    """`<name>-<hash>.<ext>`: the same inputs always give the same file name (shards, budget and workers do not
    change the result)."""
    key = json.dumps({"source": dataclasses.asdict(source), "tokenizer": tok_id, "window": window,
                      "backend": backend, "order": order, "max_tokens": max_tokens, "format": FORMAT_VERSION},
                     sort_keys=True)
    ext = "igtree" if backend == "native" else "ibase"
    return f"{source.name}-{hashlib.sha256(key.encode()).hexdigest()[:12]}.{ext}"


def source_fingerprint(source: TextSource) -> str:
    """Sizes and modification times of a local source's files (a dataset: its name), to notice a changed corpus."""
    if source.path is None:
        return source.describe()
    path = Path(source.path)
    files = sorted(p for p in path.rglob("*") if p.is_file()) if path.is_dir() else [path]
    items = [(str(p), p.stat().st_size, p.stat().st_mtime_ns) for p in files if p.exists()]
    return hashlib.sha256(json.dumps(items).encode()).hexdigest()[:16]


def _local_bytes(source: TextSource) -> int:
    """Bytes of a local source's files; -1 for a dataset (never tokenised in parallel: see _token_file)."""
    if source.path is None:
        return -1
    path = Path(source.path)
    files = [p for p in path.rglob("*") if p.is_file()] if path.is_dir() else [path]
    return sum(p.stat().st_size for p in files if p.exists())


def default_budget_bytes() -> int:
    """The default memory budget: a share of what this machine has available now."""
    return int(psutil.virtual_memory().available * DEFAULT_BUDGET_SHARE)


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
                        shards: int = 1, count_map: CountMap = local_count_map, memory_gb: float | None = None,
                        workers: int = 1, run_map: TaskMap | None = None, progress: Progress | None = None,
                        out_path=None, reuse: bool = False, parallel_tokenise_bytes: int = PARALLEL_TOKENISE_BYTES,
                        ) -> IBaseInfo:
    """Train one instance base from a corpus and write it to `out_dir` (or `out_path`); resumes a killed one.

    `memory_gb` bounds the training's resident memory (default: half of what is available); instances that do
    not fit are built out of core over `workers` concurrent tasks of `run_map`, which also tokenise a local
    source of at least `parallel_tokenise_bytes` by document ranges. `reuse` returns an existing
    file built from the same inputs (and the same source files) instead of training again. `train_s` covers
    tokenising to saving.
    """
    _check_options(window, backend, order, shards, memory_gb)
    t0, cpu0 = time.perf_counter(), time.process_time()
    tok = load_tokenizer(tokenizer_name)
    tok_id = tokenizer_id(tok)
    name = artifact_name(source, tok_id, window=window, backend=backend, order=order, max_tokens=max_tokens)
    path = Path(out_path) if out_path else Path(out_dir) / name
    fingerprint = source_fingerprint(source)
    with training_lock(path):  # a second training of the same file waits for the first
        if reuse and (info := _reused(path, fingerprint, backend, order)):
            return info
        budget = int(memory_gb * 1e9) if memory_gb else default_budget_bytes()
        plan = plan_training(budget, workers)
        work = path.parent / f".work-{path.stem}"
        run_map = run_map or local_map
        with PeakRss() as peak:
            try:
                tf = _token_file(source, (tokenizer_name, tok), work, max_tokens, fingerprint, progress,
                                 run_map if workers > 1 and _local_bytes(source) >= parallel_tokenise_bytes else None,
                                 workers)
            except CorpusError:
                shutil.rmtree(work, ignore_errors=True)  # a bad corpus: nothing half-written (a kill keeps work/)
                raise
            meta = {"name": source.name, "source": source.describe(), "tokenizer_id": tok_id, "tokens": tf.n_tokens,
                    "source_fingerprint": fingerprint}
            if backend == "timbl":
                contexts, targets = make_instances(tf.tokens(), tf.offsets(), window)
                tree = TimblIGTree.fit(contexts, targets, order=order, workdir=work / "timbl", **meta)
                n_bytes, nodes, parts = tree.save(path), (None, tree.n_nodes), 0
            elif tf.n_instances <= plan.in_memory_rows:
                tree = _build_native(tf, window, order, shards, count_map, meta)
                n_bytes, parts = tree.save(path), 0
                nodes = (tree.meta["nodes_before_prune"], tree.meta["nodes_after_prune"])
            else:
                summary = build_partitioned(tf, window, order, work / "partitioned", path, meta, plan, run_map,
                                            progress)
                n_bytes, parts = summary["bytes"], summary["partitions"]
                nodes = (summary["nodes_before_prune"], summary["nodes_after_prune"])
        shutil.rmtree(work, ignore_errors=True)
        info = IBaseInfo(name=source.name, path=str(path), sha256=file_sha256(path), backend=backend, window=window,
                         order=order, tokenizer_id=tok_id, tokens=tf.n_tokens, instances=tf.n_instances,
                         nodes_before_prune=nodes[0], nodes_after_prune=nodes[1], bytes=n_bytes,
                         train_s=time.perf_counter() - t0, partitions=parts, memory_budget_bytes=budget,
                         peak_rss_bytes=peak.peak_bytes,
                         cpu_s=time.process_time() - cpu0 + float(getattr(run_map, "cpu_s", 0.0)))
        logger.info("trained %s: %d tokens, %d instances, %d partitions -> %s (%d bytes, %.2f s, peak %.2f GB)",
                    info.name, info.tokens, info.instances, parts, info.path, info.bytes, info.train_s,
                    info.peak_rss_bytes / 1e9)
        return info


@contextmanager
def training_lock(path: Path, poll_s: float = 1.0):
    """Hold the exclusive right to train `path` (its work folder and file) while inside; another training of
    the same file, in any process, waits here (logging who holds it) until the holder finishes or dies.

    The lock is an flock on `.<file>.lock` beside the file, released by the kernel if the holder is killed; the
    holder deletes it when done, so a waiter checks that the file it locked is still the one in place.
    """
    lock = path.parent / f".{path.name}.lock"
    lock.parent.mkdir(parents=True, exist_ok=True)
    told = False
    while True:
        fd = os.open(lock, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            if not told:
                holder = os.pread(fd, 300, 0).decode(errors="replace").strip() or "another process"
                logger.warning("%s is being trained by %s: waiting for it to finish", path.name, holder)
                told = True
            os.close(fd)
            time.sleep(poll_s)
            continue
        try:
            same = os.fstat(fd).st_ino == os.stat(lock).st_ino
        except FileNotFoundError:
            same = False
        if same:
            break
        os.close(fd)  # the holder finished and removed the file we locked: lock the current one
    try:
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"pid {os.getpid()} on {socket.gethostname()} since {time.strftime('%H:%M:%S')}".encode(), 0)
        yield
    finally:
        lock.unlink(missing_ok=True)
        os.close(fd)


def _token_file(source: TextSource, tok: tuple, work: Path, max_tokens: int | None, fingerprint: str,
                progress: Progress | None, run_map: TaskMap | None = None, workers: int = 1) -> TokenFile:
    """The tokenised corpus in `work` (over `run_map` tasks by document ranges when given): reused when a killed
    training left it complete, else (re)made. `tok` is (name, tokenizer).

    Only local sources are tokenised in parallel: each task reads the documents before its range (cheap next to
    tokenising them), which for a streamed hub dataset would mean downloading them again.
    """
    manifest = work / "tokens.json"
    if manifest.exists():
        saved = json.loads(manifest.read_text())
        if saved.get("fingerprint") == fingerprint and Path(saved["tf"]["tokens_path"]).exists():
            _remove_tmp(work)
            logger.info("resuming %s from %s", source.name, work)
            return TokenFile(**saved["tf"])
    shutil.rmtree(work, ignore_errors=True)  # leftovers of another, unfinished training of these inputs
    work.mkdir(parents=True)
    on_tokens = (lambda n: progress("tokenise", n, max_tokens or 0)) if progress else None
    if run_map is None:
        tf = tokenize_source(source, tok[1], work, max_tokens=max_tokens, on_tokens=on_tokens)
    else:
        tf = tokenize_parallel(source, tok[0], work, run_map, workers=workers, max_tokens=max_tokens,
                               on_tokens=on_tokens)
        shutil.rmtree(work / "parts", ignore_errors=True)
    tmp = manifest.with_name("tokens.json.tmp")
    tmp.write_text(json.dumps({"fingerprint": fingerprint, "tf": dataclasses.asdict(tf)}))
    os.replace(tmp, manifest)
    return tf


def _remove_tmp(work: Path) -> None:
    """Delete the unfinished (.tmp) files a killed training left: they are never used."""
    for f in work.rglob("*"):
        if f.is_file() and (f.name.endswith(".tmp") or ".tmp." in f.name):
            f.unlink()


def _reused(path: Path, fingerprint: str, backend: str, order: str) -> IBaseInfo | None:
    """The info of an existing native file of the same inputs and source files, or None."""
    if backend != "native" or not path.is_file():
        return None
    try:
        tree = IGTree.load(path)
    except IBaseError as err:
        logger.warning("%s: not reused (%s)", path, err)
        return None
    m = tree.meta
    if m.get("source_fingerprint") != fingerprint:
        return None
    return IBaseInfo(name=m["name"], path=str(path), sha256=file_sha256(path), backend=backend, window=tree.window,
                     order=order, tokenizer_id=m["tokenizer_id"], tokens=m["tokens"], instances=m["instances"],
                     nodes_before_prune=m["nodes_before_prune"], nodes_after_prune=m["nodes_after_prune"],
                     bytes=path.stat().st_size, train_s=0.0, reused=True)


def _build_native(tf: TokenFile, window: int, order: str, shards: int, count_map: CountMap, meta: dict) -> IGTree:
    """Count the shards (through `count_map`), merge them in training order, build the tree."""
    bounds = shard_bounds(tf.n_tokens, shards)
    parts = [p for p in count_map(tf.tokens(), tf.offsets(), window, bounds) if p is not None]
    return IGTree.from_counts(merge_counts(parts), order=order, **meta)


def _check_options(window: int, backend: str, order: str, shards: int, memory_gb: float | None = None) -> None:
    """Refuse options no backend accepts, naming the value and what would be."""
    if backend not in BACKENDS:
        raise IBaseError(f"trainer: backend={backend!r} is not accepted; use one of {BACKENDS}")
    if order not in ORDERS:
        raise IBaseError(f"trainer: order={order!r} is not accepted; use one of {ORDERS}")
    if not (isinstance(window, int) and window >= 1):
        raise IBaseError(f"trainer: window={window!r} is not accepted; use an integer >= 1")
    if not (isinstance(shards, int) and shards >= 1):
        raise IBaseError(f"trainer: shards={shards!r} is not accepted; use an integer >= 1")
    if memory_gb is not None and not memory_gb > 0:
        raise IBaseError(f"trainer: memory_gb={memory_gb!r} is not accepted; use a number of GB > 0")


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
def _run_call(fn, kwargs: dict):
    """One out-of-core stage call on a Ray CPU worker; returns (result, its CPU seconds)."""
    cpu0 = time.process_time()
    return fn(**kwargs), time.process_time() - cpu0


class RayMap:
    """A TaskMap over Ray CPU tasks, each declaring `memory=` to Ray; sums the CPU seconds the tasks used.

    With `budget_bytes`, calls are admitted in order while the memory declared by those in flight fits the
    budget (one at least), so a training stays within its own budget whatever the node's memory.
    """

    def __init__(self):
        self.cpu_s = 0.0

    def __call__(self, fn, calls: list[dict], memory_bytes, on_done=None, budget_bytes: int | None = None) -> list:
        mem = memory_bytes if isinstance(memory_bytes, list) else [memory_bytes] * len(calls)
        node_mem = ray.cluster_resources().get("memory", float("inf"))  # a larger ask would wait forever
        mem = [max(1, int(min(m, node_mem))) for m in mem]
        out, flight, nxt, done = [None] * len(calls), {}, 0, 0
        while done < len(calls):
            while nxt < len(calls) and (not flight or budget_bytes is None
                                        or sum(mem[i] for i in flight.values()) + mem[nxt] <= budget_bytes):
                ref = _run_call.options(memory=mem[nxt]).remote(fn, calls[nxt])
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


def train_distributed(source: TextSource, tokenizer_name: str, out_dir, **options) -> IBaseInfo:
    """`train_instance_base` with the out-of-core stages on Ray CPU tasks (default: one per cluster CPU)."""
    options.setdefault("workers", cluster_cpus())
    return train_instance_base(source, tokenizer_name, out_dir, run_map=RayMap(), **options)


def train_with_energy(source: TextSource, tokenizer_name: str, out_dir, *, power_sources: Sequence[str] = ("auto",),
                      power_hz: float = 10.0, **options) -> IBaseInfo:
    """`train_instance_base` with its out-of-core stages on Ray CPU tasks, power-logged; energy by CPU-time share.

    Several trainings (and the sweep) may share the machine over overlapping windows: each is given its share of the
    measured energy by its CPU seconds (its own processes: this one and the tasks it ran), as
    `workers.power.attribution` defines it, so concurrent trainings' shares add up to at most the measured energy.
    """
    from workers.memwatch import machine_busy_cpu_s
    from workers.power.attribution import training_energy_j

    options.setdefault("count_map", ray_count_map if options.get("shards", 1) > 1 else local_count_map)
    options.setdefault("workers", cluster_cpus())
    machine0 = machine_busy_cpu_s()
    with _sampler(power_sources, power_hz) as sampler:
        with sampler.measure() as span:
            info = train_instance_base(source, tokenizer_name, out_dir, run_map=RayMap(), **options)
    w = span.window
    energy = training_energy_j(sampler, w, info.cpu_s or 0.0, machine_busy_cpu_s() - machine0)
    return dataclasses.replace(info, energy_j=energy, power_source=w.source_label, power_measured=w.measured,
                               energy_attribution=ENERGY_ATTRIBUTION)


@ray.remote(num_cpus=1)
def train_task(source: TextSource, tokenizer_name: str, out_dir: str, **options) -> IBaseInfo:
    """Train one instance base on a Ray CPU worker (`train_with_energy`)."""
    return train_with_energy(source, tokenizer_name, out_dir, **options)


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
                ray.init(address="local", num_cpus=os.cpu_count(), include_dashboard=False, log_to_driver=False,
                         configure_logging=False)
            self.started = True
        return self

    def __exit__(self, *exc) -> None:
        if self.started:
            ray.shutdown()


@ray.remote(num_cpus=1)
def build_task(job: ArtifactJob) -> ArtifactInfo:
    """Build one non-IGTree artifact (a datastore, a distilled instance base) on a Ray CPU worker, power-logged."""
    from workers.builders import build

    with _sampler(job.power_sources, job.power_hz) as sampler:
        with sampler.measure() as span:
            info = build(job)
    w = span.window
    return dataclasses.replace(info, energy_j=w.energy_j, power_source=w.source_label, power_measured=w.measured)

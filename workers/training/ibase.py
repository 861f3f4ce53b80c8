"""The pure training: corpus -> tokens -> instances -> instance base on disk (no Ray; its adapters: `ray_tasks`).

`train_instance_base(IBaseRequest(...))` tokenises the source, then builds the tree either in memory (when the
instances fit the memory budget: count shard by shard in training order, merge, build) or out of core
(`workers.igtree.partitioned`: partitions spilled to disk and built one by one, or in parallel through a task
map), saves it atomically under a name derived from the inputs and returns `IBaseInfo`. Both paths and any number
of shards or workers give the bit-identical file. The intermediate files live in a locked work folder
(`workers.training.workdir`): a killed training resumes, two of the same file never mix.

Example:
    >>> info = train_instance_base(IBaseRequest(TextSource(name="plays", path="plays.txt"), "mistral", "runs/ibases"))
    >>> info.path, info.nodes_after_prune
    ('runs/ibases/plays-3f9c0a1b2d4e.igtree', 121850)
    >>> info = train_instance_base(IBaseRequest(source, "mistral", "runs/ibases", memory_gb=1.0))  # out of core
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import logging
import os
import shutil
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psutil

from workers.corpora import TextSource
from workers.errors import CorpusError, IBaseError
from workers.files import file_sha256
from workers.igtree import FORMAT_VERSION, ORDERS, IGTree, TimblIGTree, merge_counts
from workers.igtree.instances import (
    CountMap,
    TokenFile,
    local_bytes,
    local_count_map,
    make_instances,
    shard_bounds,
    source_fingerprint,
    tokenize_parallel,
    tokenize_source,
)
from workers.igtree.partitioned import (
    IN_MEMORY_BYTES_PER_ROW,
    BuildSummary,
    BuildTarget,
    Plan,
    Progress,
    TaskMap,
    build_partitioned,
    local_map,
    plan_training,
)
from workers.memwatch import PeakRss
from workers.models.tokenizer import load_tokenizer, tokenizer_id
from workers.training.workdir import remove_tmp, training_lock, work_folder

logger = logging.getLogger(__name__)

BACKENDS = ("native", "timbl")
DEFAULT_BUDGET_SHARE = 0.5  # without memory_gb: half the memory available when the training starts
PARALLEL_TOKENISE_BYTES = 64 << 20  # smaller local sources tokenise faster in one process than over tasks


@dataclass(frozen=True)
class IBaseRequest:
    """What to train: the corpus, the tokenizer, where the file goes, the tree's options and the resources.

    `memory_gb` bounds the training's resident memory (None: half of what is available); instances that do not fit
    are built out of core over `workers` concurrent tasks (None: 1 here, every CPU over Ray), which also tokenise
    a local source of at least `parallel_tokenise_bytes` by document ranges. `shards` splits the in-memory
    counting (same file). `out_path` replaces `out_dir/<artifact name>`; `reuse` returns an existing file of the
    same inputs (and source files).
    """

    source: TextSource
    tokenizer: str
    out_dir: str
    window: int = 4
    backend: str = "native"
    order: str = "gain_ratio"
    max_tokens: int | None = None
    shards: int = 1
    memory_gb: float | None = None
    workers: int | None = None
    out_path: str | None = None
    reuse: bool = False
    parallel_tokenise_bytes: int = PARALLEL_TOKENISE_BYTES

    def __post_init__(self) -> None:
        _check_options(self.window, self.backend, self.order, self.shards, self.memory_gb)
        object.__setattr__(self, "out_dir", str(self.out_dir))
        if self.out_path is not None:
            object.__setattr__(self, "out_path", str(self.out_path))

    def budget_bytes(self) -> int:
        """The memory budget in bytes: `memory_gb`, or a share of what this machine has available now."""
        return int(self.memory_gb * 1e9) if self.memory_gb else default_budget_bytes()


@dataclass(frozen=True)
class IBaseInfo:
    """What training produced: the file, its identity and size, and what it cost (energy filled in later).

    `partitions` is 0 for the in-memory build; `peak_rss_bytes` is the training's process tree (Ray's daemons
    aside); `cpu_s` its CPU seconds over all its processes; `energy_attribution` how `energy_j` was assigned;
    `node_id` the Ray node whose disk holds the file (None outside Ray). A train cell's row in `instance_bases`
    is these fields by name (`storage.results.store_ibase`).
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
    manifest_path: str | None = None  # `<path>.manifest.json`: what it was trained on (workers.training.manifest)
    manifest_sha256: str | None = None
    node_id: str | None = None


@dataclass(frozen=True)
class BuiltTree:
    """A tree written by one of the three builds: its bytes, nodes before/after pruning, partitions (0: in memory)."""

    n_bytes: int
    nodes_before_prune: int | None
    nodes_after_prune: int | None
    partitions: int = 0


def artifact_name(
    source: TextSource, tok_id: str, *, window: int, backend: str, order: str, max_tokens: int | None
) -> str:
    """`<name>-<hash>.<ext>`: the same inputs always give the same file name (shards, budget and workers do not
    change the result)."""
    key = json.dumps(
        {
            "source": source.identity(),
            "tokenizer": tok_id,
            "window": window,
            "backend": backend,
            "order": order,
            "max_tokens": max_tokens,
            "format": FORMAT_VERSION,
        },
        sort_keys=True,
    )
    ext = "igtree" if backend == "native" else "ibase"
    return f"{source.name}-{hashlib.sha256(key.encode()).hexdigest()[:12]}.{ext}"


def default_budget_bytes() -> int:
    """The default memory budget: a share of what this machine has available now."""
    return int(psutil.virtual_memory().available * DEFAULT_BUDGET_SHARE)


def train_instance_base(
    req: IBaseRequest,
    *,
    count_map: CountMap = local_count_map,
    run_map: TaskMap | None = None,
    progress: Progress | None = None,
) -> IBaseInfo:
    """Train one instance base as `req` asks and write it (resuming a killed training of the same file).

    `count_map` counts the in-memory path's shards, `run_map` runs the out-of-core stages (and, when given, the
    in-memory build as one task declaring its memory); both default to this process. `train_s` covers
    tokenising to saving; `cpu_s` this process and the tasks `run_map` ran.
    """
    t0, cpu0 = time.perf_counter(), time.process_time()
    tok = load_tokenizer(req.tokenizer)
    tok_id = tokenizer_id(tok)
    name = artifact_name(
        req.source, tok_id, window=req.window, backend=req.backend, order=req.order, max_tokens=req.max_tokens
    )
    path = Path(req.out_path) if req.out_path else Path(req.out_dir) / name
    fingerprint = source_fingerprint(req.source)
    with training_lock(path):  # a second training of the same file waits for the first
        if req.reuse and (info := _reused(path, fingerprint, req.backend, req.order)):
            return info
        budget = req.budget_bytes()
        plan = plan_training(budget, req.workers or 1)
        with PeakRss() as peak:
            tf = _tokens(req, tok, work_folder(path), fingerprint, run_map, progress)
            meta = {
                "name": req.source.name,
                "source": req.source.describe(),
                "tokenizer_id": tok_id,
                "tokens": tf.n_tokens,
                "source_fingerprint": fingerprint,
            }
            built = _build(req, tf, plan, path, meta, count_map, run_map, progress)
        shutil.rmtree(work_folder(path), ignore_errors=True)
        info = IBaseInfo(
            name=req.source.name,
            path=str(path),
            sha256=file_sha256(path),
            backend=req.backend,
            window=req.window,
            order=req.order,
            tokenizer_id=tok_id,
            tokens=tf.n_tokens,
            instances=tf.n_instances,
            nodes_before_prune=built.nodes_before_prune,
            nodes_after_prune=built.nodes_after_prune,
            bytes=built.n_bytes,
            train_s=time.perf_counter() - t0,
            partitions=built.partitions,
            memory_budget_bytes=budget,
            peak_rss_bytes=peak.peak_bytes,
            cpu_s=time.process_time() - cpu0 + float(getattr(run_map, "cpu_s", 0.0)),
        )
    _log_trained(info)
    return info


def _log_trained(info: IBaseInfo) -> None:
    logger.info(
        "trained %s: %d tokens, %d instances, %d partitions -> %s (%d bytes, %.2f s, peak %.2f GB)",
        info.name,
        info.tokens,
        info.instances,
        info.partitions,
        info.path,
        info.bytes,
        info.train_s,
        info.peak_rss_bytes / 1e9,
    )


def _tokens(
    req: IBaseRequest, tok: Any, work: Path, fingerprint: str, run_map: TaskMap | None, progress: Progress | None
) -> TokenFile:
    """The token file (over `run_map` tasks for a large local source); a bad corpus leaves no work folder behind
    (a kill keeps it, to resume)."""
    parallel = (req.workers or 1) > 1 and local_bytes(req.source) >= req.parallel_tokenise_bytes
    try:
        return _token_file(
            req, (req.tokenizer, tok), work, fingerprint, progress, (run_map or local_map) if parallel else None
        )
    except CorpusError:
        shutil.rmtree(work, ignore_errors=True)
        raise


def _build(
    req: IBaseRequest,
    tf: TokenFile,
    plan: Plan,
    path: Path,
    meta: dict,
    count_map: CountMap,
    run_map: TaskMap | None,
    progress: Progress | None,
) -> BuiltTree:
    """The tree written to `path` by the build that fits: TiMBL's, in memory, or out of core."""
    work = work_folder(path)
    if req.backend == "timbl":
        contexts, targets = make_instances(tf.tokens(), tf.offsets(), req.window)
        tree = TimblIGTree.fit(contexts, targets, order=req.order, workdir=work / "timbl", **meta)
        return BuiltTree(tree.save(path), None, tree.n_nodes)
    if tf.n_instances <= plan.in_memory_rows:
        if run_map is None or count_map is not local_count_map:
            return build_in_memory(tf, req.window, req.order, req.shards, meta, str(path), count_map)
        memory = max(1, tf.n_instances) * IN_MEMORY_BYTES_PER_ROW
        (built,) = run_map(
            build_in_memory,
            [dict(tf=tf, window=req.window, order=req.order, shards=req.shards, meta=meta, out=str(path))],
            memory,
        )
        return built
    target = BuildTarget(path, work / "partitioned", meta)
    summary: BuildSummary = build_partitioned(tf, req.window, req.order, target, plan, run_map, progress)
    return BuiltTree(summary.bytes, summary.nodes_before_prune, summary.nodes_after_prune, summary.partitions)


def build_in_memory(
    tf: TokenFile, window: int, order: str, shards: int, meta: dict, out: str, count_map: CountMap = local_count_map
) -> BuiltTree:
    """Count the shards (through `count_map`), merge them in training order, build the tree, save it to `out`."""
    bounds = shard_bounds(tf.n_tokens, shards)
    parts = [p for p in count_map(tf.tokens(), tf.offsets(), window, bounds) if p is not None]
    tree = IGTree.from_counts(merge_counts(parts), order=order, **meta)
    return BuiltTree(tree.save(out), tree.meta["nodes_before_prune"], tree.meta["nodes_after_prune"])


def _token_file(
    req: IBaseRequest,
    tok: tuple,
    work: Path,
    fingerprint: str,
    progress: Progress | None,
    run_map: TaskMap | None = None,
) -> TokenFile:
    """The tokenised corpus in `work` (over `run_map` tasks by document ranges when given): reused when a killed
    training left it complete, else (re)made. `tok` is (name, tokenizer).

    Only local sources are tokenised in parallel: each task reads the documents before its range (cheap next to
    tokenising them), which for a streamed hub dataset would mean downloading them again.
    """
    manifest = work / "tokens.json"
    if manifest.exists():
        saved = json.loads(manifest.read_text())
        if saved.get("fingerprint") == fingerprint and Path(saved["tf"]["tokens_path"]).exists():
            remove_tmp(work)
            logger.info("resuming %s from %s", req.source.name, work)
            return TokenFile(**saved["tf"])
    shutil.rmtree(work, ignore_errors=True)  # leftovers of another, unfinished training of these inputs
    work.mkdir(parents=True)
    on_tokens = (lambda n: progress("tokenise", n, req.max_tokens or 0)) if progress else None
    if run_map is None:
        tf = tokenize_source(req.source, tok[1], work, max_tokens=req.max_tokens, on_tokens=on_tokens)
    else:
        tf = tokenize_parallel(
            req.source, tok[0], work, run_map, workers=req.workers or 1, max_tokens=req.max_tokens, on_tokens=on_tokens
        )
        shutil.rmtree(work / "parts", ignore_errors=True)
    tmp = manifest.with_name("tokens.json.tmp")
    tmp.write_text(json.dumps({"fingerprint": fingerprint, "tf": dataclasses.asdict(tf)}))
    os.replace(tmp, manifest)
    return tf


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
    return IBaseInfo(
        name=m["name"],
        path=str(path),
        sha256=file_sha256(path),
        backend=backend,
        window=tree.window,
        order=order,
        tokenizer_id=m["tokenizer_id"],
        tokens=m["tokens"],
        instances=m["instances"],
        nodes_before_prune=m["nodes_before_prune"],
        nodes_after_prune=m["nodes_after_prune"],
        bytes=path.stat().st_size,
        train_s=0.0,
        reused=True,
    )


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

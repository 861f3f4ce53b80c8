"""`greenspec train`: build one corpus's instance base exactly as a run would, with a progress bar.

Same tokenizer (the verifier's), window, order and backend as the run's train cell; without `out` the file goes
to the spec's artifact store under the name a run uses, so a later `run` of the spec finds it (the trainer
reuses a file built from the same inputs). The out-of-core stages run on Ray CPU tasks over the whole cluster.

Example:
    >>> info = train_corpus(TrainRequest("spec.toml", "topics", out="/tmp/x.igtree", memory_gb=0.002))
    >>> print(closing_line(info))     # measured here: Python's docs topics, 60k tokens, 2 Ray workers
    topics: 58,604 instances, 33,307 nodes, 0.3 MB, 0:00:12, peak 1.68 GB, 218 J (estimate, estimated; cpu-time
    share); 9 partitions -> /tmp/x.igtree
"""

from __future__ import annotations

import sys
from dataclasses import dataclass

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn

from orchestrator.run.inputs import materialize
from orchestrator.run.spec_paths import check_paths, load_spec
from workers.errors import SpecError


@dataclass(frozen=True)
class TrainRequest:
    """What `greenspec train` was asked: the spec, the corpus, where to write, the memory budget, the cluster."""

    spec_path: str
    corpus: str
    out: str | None = None
    memory_gb: float | None = None
    address: str | None = None


def train_corpus(req: TrainRequest, progress=None):
    """Train the corpus's instance base as a run would; returns workers.training.ibase.IBaseInfo."""
    from workers.training.ibase import IBaseRequest
    from workers.training.ray_tasks import RaySession, train_with_energy

    spec = load_spec(req.spec_path)
    check_paths(spec)
    names = [c.name for c in spec.corpora]
    if req.corpus not in names:
        raise SpecError(f"{req.spec_path}: no [[corpora]] named {req.corpus!r} (have {', '.join(names) or 'none'})")
    tokenizer = spec.verifier.tokenizer or spec.verifier.model
    corpus = _materialized(spec, req.corpus, tokenizer)
    with RaySession(req.address):
        request = IBaseRequest(
            corpus.source(),
            tokenizer,
            spec.experiment.artifacts,
            window=corpus.window,
            backend=corpus.backend,
            order=corpus.order,
            max_tokens=corpus.max_tokens,
            shards=corpus.shards,
            memory_gb=req.memory_gb or corpus.memory_gb,
            out_path=req.out,
            reuse=req.out is None,
        )
        return train_with_energy(
            request, power_sources=tuple(spec.power.sources), power_hz=spec.power.hz, progress=progress
        )


def _materialized(spec, name: str, tokenizer: str):
    """The corpus with a `demo:` path made real (the demo models are built only if the tokenizer is one)."""
    only = spec.model_copy(
        update={
            "verifier": spec.verifier.model_copy(update={"model": tokenizer}),
            "corpora": [spec.corpus(name)],
            "tasks": [],
            "strategies": [],
        }
    )
    return materialize(only).corpora[0]


def closing_line(info) -> str:
    """One line: instances, nodes, file size, time, peak memory, energy (and how it was attributed)."""
    h, rem = divmod(int(info.train_s), 3600)
    how = "in memory" if not info.partitions else f"{info.partitions} partitions"
    if info.reused:
        return f"{info.name}: reused {info.path} ({info.instances:,} instances, {info.nodes_after_prune:,} nodes)"
    energy = (
        "energy n/a"
        if info.energy_j is None
        else (
            f"{info.energy_j:,.0f} J ({info.power_source}{'' if info.power_measured else ', estimated'}; "
            f"{info.energy_attribution})"
        )
    )
    return (
        f"{info.name}: {info.instances:,} instances, {info.nodes_after_prune:,} nodes, {info.bytes / 1e6:,.1f} MB, "
        f"{h}:{rem // 60:02d}:{rem % 60:02d}, peak {info.peak_rss_bytes / 1e9:.2f} GB, {energy}; {how} "
        f"-> {info.path}"
    )


class TrainBar:
    """The progress of one training on stderr: tokens tokenised, then partitions built, with elapsed time and ETA."""

    def __init__(self):
        self._bar = Progress(
            TextColumn("[bold]{task.description:<12}"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            TextColumn("ETA"),
            TimeRemainingColumn(),
            console=Console(file=sys.stderr),
            refresh_per_second=4,
        )
        self._tasks: dict[str, int] = {}

    def __enter__(self) -> TrainBar:
        self._bar.start()
        return self

    def __exit__(self, *exc) -> None:
        self._bar.stop()

    def __call__(self, stage: str, done: int, total: int) -> None:
        """A workers.igtree.partitioned.Progress: ('tokenise', tokens, max_tokens or 0) or ('partitions', n, of)."""
        label = {"tokenise": "tokens", "statistics": "statistics", "partitions": "partitions"}.get(stage, stage)
        if label not in self._tasks:
            self._tasks[label] = self._bar.add_task(label, total=total or None)
        self._bar.update(self._tasks[label], completed=done, total=total or None)

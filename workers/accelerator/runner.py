"""The accelerator worker's core: one verifier loaded once, drafts loaded lazily, jobs run and measured.

Pure Python/torch (no Ray): `workers.accelerator.actor` wraps it in a Ray actor. A job comes in as a
`workers.contracts.SweepJob` and goes out as a `JobOutcome` with its generation or reference record.
"""

from __future__ import annotations

import logging
import os
import socket
import time
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any

from workers.contracts import (
    CostModelJob,
    CostModelRecord,
    GenerationRecord,
    JobOutcome,
    LabelJob,
    LabelRecord,
    ReferenceRecord,
    SweepJob,
    attach_energy,
)
from workers.decoding.records import GenerationResult
from workers.power.base import PowerSample
from workers.replay.rounds import rounds_differ

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class RunnerConfig:
    """What the accelerator worker needs to build its verifier and measure power."""

    model: str
    tokenizer: str | None = None
    revision: str | None = None
    dtype: str = "auto"
    device: str = "auto"
    max_new_tokens: int = 100
    warmup: bool = True
    power_sources: tuple[str, ...] = ("auto",)
    power_hz: float = 10.0
    idle_baseline_s: float = 0.0
    threads: int | None = None
    label_threads: int | None = None  # torch threads while labelling (None: as `threads`)
    repeats: int = 1  # timed runs per generation; the fastest is kept (the same tokens each time)
    max_drafts: int = 32  # drafts kept loaded (least recently used released): a prompt's strategies take turns


def job_options(job: SweepJob, max_new_tokens: int, eos_id: int | None, trees: bool):
    """The one DecodeOptions of a sweep job: its regime, k, sampling and the worker's length and EOS."""
    from workers.decoding.options import DecodeOptions, Warp  # torch: the driver imports this module without it

    warp = Warp(job.temperature, job.top_k, job.top_p)
    return DecodeOptions(
        job.cell.regime, job.cell.k, max_new_tokens, eos_id=eos_id, warp=warp, seed=job.seed, trees=trees
    )


def fastest(runs: list[GenerationResult], strategy: str = "?") -> GenerationResult:
    """The fastest of a generation's timed runs, after checking that every run made the same tokens and rounds
    (`workers.replay.rounds.rounds_differ`: a repeat only re-times the same work; a draft or sampler that differs
    between runs cannot be timed so)."""
    first = runs[0]
    for i, r in enumerate(runs[1:], start=2):
        why = "[sweep] repeats needs a generation that repeats exactly"
        differs = rounds_differ(first, r, ("run 1", f"run {i}", why))
        if differs or list(r.tokens) != list(first.tokens):
            raise RuntimeError(
                f"timed run {i} of strategy {strategy!r} made other tokens or passes than run 1: {differs or why}"
            )
    return min(runs, key=lambda r: r.wall_s)


class SweepRunner:
    """Holds the verifier, the current draft and the power sampler; runs cells one by one."""

    def __init__(self, cfg: RunnerConfig):
        import torch

        from workers.models.tokenizer import load_tokenizer
        from workers.power import PowerSampler, find_sources
        from workers.verifier import Verifier, load_verifier

        if cfg.threads:
            torch.set_num_threads(cfg.threads)
        self.cfg = cfg
        self.verifier: Verifier = load_verifier(cfg.model, dtype=cfg.dtype, device=cfg.device, revision=cfg.revision)
        self.tokenizer = load_tokenizer(cfg.tokenizer or cfg.model)
        self.eos_id = self.tokenizer.eos_token_id
        self.sampler = PowerSampler(find_sources(cfg.power_sources), hz=cfg.power_hz)
        self.sampler.start()
        self.idle = self.sampler.idle_baseline(cfg.idle_baseline_s) if cfg.idle_baseline_s > 0 else None
        self._drafts: OrderedDict[tuple, Any] = OrderedDict()  # loaded drafts by strategy, least recent first
        self._warm: set[tuple] = set()
        self._prefetched: dict[str, tuple[list[int], float]] = {}  # reference job key -> (tokens, wall share)
        self.worker = f"{socket.gethostname()}:{os.getpid()}:{self.verifier.device}"

    def info(self) -> dict[str, Any]:
        """Device and power sources, for the experiment row."""
        return {
            "device": str(self.verifier.device),
            "worker": self.worker,
            "power_sources": [s.name for s in self.sampler.sources],
            "idle_power_w": self.idle["mean_power_w"] if self.idle else None,
        }

    def close(self) -> None:
        """Stop sampling and free the draft."""
        self.sampler.stop()
        self._drafts.clear()

    def drain_samples(self) -> tuple[PowerSample, ...]:
        """Raw power samples taken since the last drain."""
        return tuple(self.sampler.drain_samples())

    def run(self, job: SweepJob | LabelJob | CostModelJob) -> JobOutcome:
        """Run one job; exceptions propagate (the actor boundary records them)."""
        if isinstance(job, LabelJob):
            return JobOutcome(key=job.key, worker=self.worker, label=self._label(job))
        if isinstance(job, CostModelJob):
            return JobOutcome(key=job.key, worker=self.worker, cost_model=self._cost_model(job))
        if job.kind == "reference":
            return JobOutcome(key=job.key, worker=self.worker, reference=self._reference(job))
        return JobOutcome(key=job.key, worker=self.worker, generation=self._sweep(job))

    def _prompt_ids(self, text: str) -> list[int]:
        return list(self.tokenizer(text).input_ids)

    def prefetch_references(self, jobs: list) -> None:
        """Make the greedy references of a batch's reference jobs together (`greedy_references`: batched, each
        checked against the unbatched verifier); `_reference` then takes its own, its wall time a share of the
        batch's."""
        from workers.decoding import greedy_references

        refs = [j for j in jobs if isinstance(j, SweepJob) and j.kind == "reference"]
        if len(refs) < 2:
            return
        prompts = [self._prompt_ids(j.prompt) for j in refs]
        t0 = time.perf_counter()
        made = greedy_references(self.verifier, prompts, self.cfg.max_new_tokens, eos_id=self.eos_id)
        share = (time.perf_counter() - t0) / len(refs)
        self._prefetched = {j.key: (tokens, share) for j, tokens in zip(refs, made)}

    def _reference(self, job: SweepJob) -> ReferenceRecord:
        from workers.decoding import greedy_reference

        prompt_ids = self._prompt_ids(job.prompt)
        t0 = time.perf_counter()
        if job.key in self._prefetched:
            tokens, wall_s = self._prefetched.pop(job.key)
        else:
            tokens = greedy_reference(self.verifier, prompt_ids, self.cfg.max_new_tokens, eos_id=self.eos_id)
            wall_s = time.perf_counter() - t0
        return ReferenceRecord(
            prompt_text=job.prompt,
            prompt_tokens=tuple(prompt_ids),
            tokens=tuple(tokens),
            text=self.tokenizer.decode(list(tokens), skip_special_tokens=True),
            wall_s=wall_s,
            vocab_size=self.verifier.vocab_size,
            eos_id=self.eos_id,
        )

    def _label(self, job: LabelJob) -> LabelRecord:
        """The verifier's greedy next token over a corpus (teacher forcing, batched), written beside its tokens."""
        import torch

        from workers.training.labels import label_corpus

        self._drafts.clear()  # free the drafts' memory for the large batched passes
        before = torch.get_num_threads()
        torch.set_num_threads(self.cfg.label_threads or before)
        try:
            return label_corpus(self.verifier, self.tokenizer, job)
        finally:
            torch.set_num_threads(before)

    def _cost_model(self, job: CostModelJob) -> CostModelRecord:
        """The verifier's round-cost table, real rounds timed on this device over the contexts the sweep sees."""
        from workers.decoding.roundtimer import measure_round_costs

        started_at, t0 = time.time(), time.perf_counter()
        table, samples = measure_round_costs(
            self.verifier,
            self._prompt_ids(job.prompt),
            max_n=job.max_n,
            tree_sizes=job.tree_sizes,
            regimes=job.regimes,
            max_context=job.max_context,
            min_context=job.min_context,
            repeats=job.repeats,
            budget_s=job.budget_s,
        )
        return CostModelRecord(
            verifier=table.verifier,
            device=table.device,
            costs=table.to_json(),
            samples=tuple(samples),
            measure_s=time.perf_counter() - t0,
            started_at=started_at,
            ended_at=time.time(),
        )

    def _draft_for(self, job: SweepJob):
        """The draft of this job's strategy, kept loaded; the least recently used of more than `cfg.max_drafts` is
        released first (the paired order runs one prompt's strategies in turn; the strategy order needs only one)."""
        from workers.drafts import BuildContext, build_draft

        key = (job.cell.strategy, job.cell.draft, tuple(sorted(job.cell.artifacts.items())))
        if key in self._drafts:
            self._drafts.move_to_end(key)
            return self._drafts[key]
        while self._drafts and len(self._drafts) >= max(1, self.cfg.max_drafts):
            self._drafts.popitem(last=False)  # release before loading the next
        ctx = BuildContext(tokenizer=self.tokenizer, device=self.verifier.device, artifacts=dict(job.cell.artifacts))
        draft = build_draft(job.cell.draft, dict(job.cell.options), ctx)
        self._drafts[key] = draft
        logger.info("loaded draft %s for strategy %s", job.cell.draft, job.cell.strategy)
        return draft

    def _sweep(self, job: SweepJob) -> GenerationRecord:
        from workers.decoding import generate, warmup
        from workers.decoding.autok import decoding_plan
        from workers.decoding.roundtimer import pace_seconds

        draft = self._draft_for(job)
        prompt_ids = self._prompt_ids(job.prompt)
        k = job.cell.k  # 0 for a draft that proposes nothing
        draft, plan = decoding_plan(  # trees, auto (its curve from the experiment's round-cost table)
            self.verifier, draft, dict(job.cell.options), job.cell.regime, prompt_ids, k, job.costs
        )
        options = job_options(job, self.cfg.max_new_tokens, self.eos_id, plan["trees"])
        warm_key = (job.cell.strategy, k, job.cell.regime)
        if self.cfg.warmup and warm_key not in self._warm:  # first call pays allocation/JIT costs: not timed
            warmup(self.verifier, draft, prompt_ids, options)
            self._warm.add(warm_key)
        pace_s = pace_seconds(self.verifier) if job.pace else None
        runs = [
            generate(self.verifier, draft, prompt_ids, options) for _ in range(max(1, job.repeats or self.cfg.repeats))
        ]
        res = fastest(runs, job.cell.strategy)
        text = self.tokenizer.decode(list(res.tokens), skip_special_tokens=True)
        device, wall_s_runs = str(self.verifier.device), tuple(r.wall_s for r in runs)
        return GenerationRecord(res.decoded, len(prompt_ids), text, device, wall_s_runs=wall_s_runs, pace_s=pace_s)

    def attach_energy(self, outcomes: list[JobOutcome]) -> list[JobOutcome]:
        """Integrate the power trace over each generation's, label pass's or cost measurement's [started_at, ended_at]
        window."""
        return attach_energy(outcomes, self.sampler)

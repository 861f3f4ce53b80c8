"""The one accelerator worker, seen from the driver: how many torch threads it gets, how many batches wait for
it, starting it (and failing fast on a verifier that cannot load) and closing it."""

from __future__ import annotations

import logging
import os

import ray
from ray.actor import ActorHandle

from orchestrator.run.options import RunOptions
from orchestrator.run.ray_startup import driver_settings
from orchestrator.run.spec import Spec
from workers.accelerator.runner import RunnerConfig
from workers.errors import ModelError

logger = logging.getLogger(__name__)

IN_FLIGHT = 2  # accelerator batches queued at once: the next is ready the moment one finishes


def runner_config(spec: Spec, threads: int | None) -> RunnerConfig:
    """What the accelerator worker needs from the spec."""
    v = spec.verifier
    return RunnerConfig(
        model=v.model,
        tokenizer=v.tokenizer,
        revision=v.revision,
        dtype=v.dtype,
        device=v.device,
        max_new_tokens=spec.sweep.max_new_tokens,
        warmup=spec.sweep.warmup,
        power_sources=tuple(spec.power.sources),
        power_hz=spec.power.hz,
        idle_baseline_s=spec.power.idle_baseline_s,
        threads=threads,
        # labelling is long batched passes with little beside it (the replays of a distilled base wait for it):
        # every core, unless `[verifier] threads` says otherwise
        label_threads=v.threads or os.cpu_count(),
        repeats=spec.sweep.repeats,
        max_drafts=1 if spec.sweep.order == "strategy" else RunnerConfig.max_drafts,
    )


def worker_threads(asked: int | None, beside: bool, cpus: int) -> int:
    """The accelerator worker's torch threads: `[verifier] threads` if given, else every core, one fewer where CPU
    work runs `beside` it (the training with `overlap`, the replays beside the references of a replayed run). Where
    other processes share the cores, fewer threads can be far faster: torch's threads wait for each other, and a busy
    core stalls them all (figures in BENCHMARKS.md: a replayed study's references took 11 s each with a thread on
    both cores beside a replay task)."""
    return asked or (max(1, cpus - 1) if beside else cpus)


def batches_in_flight(device: str, threads: int, cpus: int) -> int:
    """Accelerator batches queued at once. Two keep the worker busy while the driver stores the last batch's
    results; but where the worker computes on the CPU with a torch thread on every core, that bookkeeping runs
    beside the next timed generation and slows it (the strategy timed right after another strategy's batch came
    out slower on identical verifier passes). There one batch goes at a time."""
    return 1 if device.startswith("cpu") and threads >= cpus else IN_FLIGHT


def start_actor(spec: Spec, opts: RunOptions) -> tuple[ActorHandle, dict, int]:
    """Start the worker and wait for its verifier to load: (actor, its `info()`, batches to keep in flight).
    A verifier that cannot load is a `ModelError` in one line."""
    from workers.accelerator.actor import AcceleratorWorker  # deferred: it imports torch

    cls = opts.worker_cls or AcceleratorWorker
    cpus = os.cpu_count() or 1
    threads = worker_threads(spec.verifier.threads, spec.experiment.overlap or spec.sweep.replay, cpus)
    env = {**driver_settings(), **opts.worker_env}  # its own runtime environment: it inherits none of the driver's
    options = {"runtime_env": {"env_vars": env}} if env else {}
    actor = cls.options(**options).remote(runner_config(spec, threads))
    try:
        info = ray.get(actor.info.remote())
    except (ray.exceptions.RayActorError, ray.exceptions.RayTaskError) as err:
        cause = getattr(err, "cause", None) or err
        first = next((ln for ln in str(cause).splitlines() if ln.strip()), type(cause).__name__)
        raise ModelError(
            f"verifier.model: {spec.verifier.model} could not be loaded by the accelerator "
            f"worker ({first.strip()[:200]})"
        ) from err
    return actor, info, batches_in_flight(str(info["device"]), threads, cpus)


def close_actor(actor: ActorHandle) -> None:
    """Let the worker flush (its power sampler) and stop it; a worker already gone is no error."""
    try:
        ray.get(actor.close.remote(), timeout=30)
    except Exception:  # the actor may already be gone; the run's results are stored either way
        logger.debug("accelerator worker close failed", exc_info=True)
    ray.kill(actor)

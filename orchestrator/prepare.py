"""Preparation before any write: built-in inputs, path and model checks, prompts, grid expansion.

Everything that can refuse bad input runs here, so a refused spec leaves the database untouched.
"""

from __future__ import annotations

import logging
import os

from orchestrator.cells import CellSpec, TaskPrompts, expand
from orchestrator.spec import Spec, check_paths, model_options
from workers.errors import ModelError
from workers.runner import RunnerConfig

logger = logging.getLogger(__name__)


def load_prompts(spec: Spec) -> list[TaskPrompts]:
    """Every task's prompts, read before anything is stored so a missing source changes nothing."""
    from workers.tasks import load_prompts as load

    out = []
    for t in spec.tasks:
        ps = load(t.source(), t.prompts, t.prompt_words, articles=t.articles)
        out.append(TaskPrompts(task=t.name, texts=tuple(p.text for p in ps.prompts), skipped_short=ps.skipped_short))
        if len(ps.prompts) < t.prompts:
            logger.warning("task %s: only %d usable prompts of %d asked", t.name, len(ps.prompts), t.prompts)
    return out


def preflight_models(spec: Spec) -> None:
    """Refuse a local model path that holds no loadable model config (one line, before any write)."""
    from transformers import AutoConfig

    paths = [("verifier.model", spec.verifier.model), *(kv for s in spec.strategies for kv in model_options(s))]
    for key, value in paths:
        if value and os.path.isabs(value):
            try:
                AutoConfig.from_pretrained(value)
            except (OSError, ValueError) as err:
                raise ModelError(f"{key}: {value} is not a loadable model ({str(err).splitlines()[0][:120]})") from err


def prepare(spec: Spec) -> tuple[Spec, list[TaskPrompts], list[CellSpec]]:
    """Resolve built-in sources, check paths and models, load prompts, expand the grid."""
    from orchestrator.demo.builtin import materialize

    spec = materialize(spec)
    check_paths(spec)
    preflight_models(spec)
    prompts = load_prompts(spec)
    return spec, prompts, expand(spec, prompts)


def runner_config(spec: Spec, threads: int | None) -> RunnerConfig:
    """What the accelerator worker needs from the spec."""
    v = spec.verifier
    return RunnerConfig(model=v.model, tokenizer=v.tokenizer, revision=v.revision, dtype=v.dtype, device=v.device,
                        max_new_tokens=spec.sweep.max_new_tokens, warmup=spec.sweep.warmup,
                        power_sources=tuple(spec.power.sources), power_hz=spec.power.hz,
                        idle_baseline_s=spec.power.idle_baseline_s, threads=threads)

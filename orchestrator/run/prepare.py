"""Preparation before any write: built-in inputs, path and model checks, prompts, grid expansion.

Everything that can refuse bad input runs here, so a refused spec leaves the database untouched: paths,
models (config and weights present, before the verifier is ever loaded), the verifier's context length
against prompt_words + max_new_tokens + k, and cells that would collide on one key.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Iterator
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np

from orchestrator.run.cells import TaskPrompts, grid_keys, iter_cells
from orchestrator.run.inputs import materialize
from orchestrator.run.model_names import check_model_names
from orchestrator.run.spec import BUILTIN, Spec
from orchestrator.run.spec_paths import check_paths, model_options
from storage.cell_spec import CellSpec
from workers.accelerator.runner import RunnerConfig
from workers.corpora import scan_source
from workers.corpora.tasks import load_prompts as read_prompts
from workers.errors import CorpusError, ModelError, SpecError
from workers.models.pretrained import gguf_context_length, is_gguf
from workers.training.artifacts import BY_CELL_KIND as ARTIFACT_KINDS

logger = logging.getLogger(__name__)

# Files of which at least one must exist in a local model folder for from_pretrained to find weights.
WEIGHT_FILES = (
    "model.safetensors",
    "model.safetensors.index.json",
    "pytorch_model.bin",
    "pytorch_model.bin.index.json",
)
CONTEXT_KEYS = ("max_position_embeddings", "n_positions", "max_sequence_length", "seq_length")


def load_prompts(spec: Spec) -> list[TaskPrompts]:
    """Every task's prompts, read before anything is stored; a prompt repeated within a task is used once."""
    out = []
    for i, t in enumerate(spec.tasks):
        try:
            ps = read_prompts(t.source(), t.prompts, t.prompt_words, articles=t.articles)
        except CorpusError as err:  # the key first, as every refusal of the spec names it
            raise CorpusError(f"tasks[{i}].{'path' if t.path else 'dataset'}: {err}") from err
        texts = tuple(dict.fromkeys(p.text for p in ps.prompts))  # same first prompt_words words: one prompt
        if len(texts) < len(ps.prompts):
            logger.warning(
                "task %s: %d prompts repeat an earlier one (same first %d words) and are used once",
                t.name,
                len(ps.prompts) - len(texts),
                t.prompt_words,
            )
        out.append(TaskPrompts(task=t.name, texts=texts, skipped_short=ps.skipped_short))
    return out


# ----------------------------------------------------------------------------- models


def _weights_present(folder: Path) -> bool:
    """Whether a local model folder holds weights (every shard an index names, too)."""
    for name in WEIGHT_FILES:
        path = folder / name
        if path.is_file() and name.endswith(".index.json"):
            try:
                shards = set(json.loads(path.read_text()).get("weight_map", {}).values())
            except (OSError, ValueError, AttributeError):
                return False
            return bool(shards) and all((folder / s).is_file() for s in shards)
        if path.is_file():
            return True
    return False


def _load_config(key: str, value: str):
    """The model config of a local folder (refused in one line when unloadable or without weights)."""
    from transformers import AutoConfig  # deferred: transformers takes seconds to import

    try:
        config = AutoConfig.from_pretrained(value)
    except (OSError, ValueError, KeyError) as err:
        raise ModelError(f"{key}: {value} is not a loadable model ({str(err).splitlines()[0][:120]})") from err
    if Path(value).is_dir() and not _weights_present(Path(value)):
        raise ModelError(
            f"{key}: {value} has a config.json but no weights ({' or '.join(WEIGHT_FILES[::2])} "
            "expected); copy the model's weight files there"
        )
    return config


def context_length(config) -> int | None:
    """The most positions the model accepts, from its config (None when the config does not say)."""
    for name in CONTEXT_KEYS:
        if isinstance(n := getattr(config, name, None), int) and n > 0:
            return n
    return None


def check_context(spec: Spec, n_ctx: int, where: str) -> None:
    """Refuse prompts + max_new_tokens + k that cannot fit the verifier's context, in one line."""
    k_max = max([*spec.sweep.k, *(k for s in spec.strategies for k in (s.k or []))])
    sw = spec.sweep
    for t in spec.tasks:
        need = t.prompt_words + sw.max_new_tokens + k_max + 1  # every word is at least one token
        if need > n_ctx:
            raise SpecError(
                f"sweep.max_new_tokens = {sw.max_new_tokens}: task {t.name!r} (prompt_words = "
                f"{t.prompt_words}) with k up to {k_max} needs at least {need} positions, more than "
                f"the verifier's context of {n_ctx} ({where}); lower max_new_tokens, prompt_words or k"
            )


def preflight_models(spec: Spec) -> None:
    """Refuse a local model that has no loadable config or no weights, and a grid longer than the verifier's
    context (one line, before any write; hub ids are checked only from the local cache)."""
    entries = [("verifier.model", spec.verifier.model), *(kv for s in spec.strategies for kv in model_options(s))]
    for key, value in entries:
        if is_gguf(value):  # a built-in name or a .gguf file: present, and its context from the GGUF's metadata
            n_ctx = gguf_context_length(value)
            if n_ctx and key == "verifier.model":
                check_context(spec, n_ctx, f"{value} (GGUF metadata)")
        elif value and os.path.isabs(value):
            config = _load_config(key, value)
            n_ctx = context_length(config) if key == "verifier.model" else None
            if n_ctx:
                check_context(spec, n_ctx, f"{value}/config.json")


# ----------------------------------------------------------------------------- the grid


def _collision(a: CellSpec, b: CellSpec) -> str:
    """One line saying why two cells have the same key."""
    if a.kind in ARTIFACT_KINDS:
        return f"corpora {a.corpus!r} and {b.corpus!r} are the same source with the same options; keep one"
    if a.kind in ("sweep", "replay") and a.strategy != b.strategy:
        return (
            f"strategies {a.strategy!r} and {b.strategy!r} are the same draft with the same options "
            f"(k={a.k}, {a.regime}); change one's options or drop it"
        )
    words = " ".join((a.params.prompt or "").split()[:6])
    return (
        f"tasks {a.task!r} (prompt {a.prompt_index}) and {b.task!r} (prompt {b.prompt_index}) give the same "
        f"prompt ({words!r}...): two tasks read the same documents; keep one"
    )


def check_unique(cells: list[CellSpec]) -> None:
    """Refuse a grid in which two cells share one key (they would be one cell stored twice)."""
    seen: dict[str, CellSpec] = {}
    for c in cells:
        if c.key in seen:
            raise SpecError(f"duplicate cells: {_collision(seen[c.key], c)}")
        seen[c.key] = c


def check_unique_keys(spec: Spec, prompts: list[TaskPrompts]) -> None:
    """`check_unique` over the grid without holding its cells: 8 bytes a cell (its key's first 64 bits, from
    `grid_keys`), the cells made again only where two keys share those bits, to tell a true collision (refused with
    the same line) from two keys that only begin alike."""
    heads = np.sort(np.fromiter((int(key[:16], 16) for key in grid_keys(spec, prompts)), dtype=np.uint64))
    repeated = {int(h) for h in heads[1:][heads[1:] == heads[:-1]]}
    if repeated:
        check_unique([c for c in iter_cells(spec, prompts) if int(c.key[:16], 16) in repeated])


def link_references(cells: list[CellSpec]) -> list[CellSpec]:
    """Each sweep and replay cell names the reference cell of its prompt (`params.reference`): results are matched by
    the prompt they were made for, never by position. A replay cell also needs it (it replays from its tokens).
    (`prepare` makes them linked: `iter_cells(..., linked=True)`.)"""
    refs = {(c.task, c.params.prompt): c.key for c in cells if c.kind == "reference"}
    out = []
    for c in cells:
        if c.kind in ("sweep", "replay"):
            ref = refs.get((c.task, c.params.prompt))
            needs = {**c.params.needs, "reference": ref} if c.kind == "replay" and ref else c.params.needs
            c = replace(c, params=replace(c.params, reference=ref, needs=needs))
        out.append(c)
    return out


def check_grid(spec: Spec) -> None:
    """What `validate` can check without data or models: strategies or corpora that would collide."""
    stand_in = [TaskPrompts(task=t.name, texts=(f"<prompt of {t.name}>",)) for t in spec.tasks]
    check_unique_keys(spec, stand_in)


def check_corpora(spec: Spec) -> None:
    """Refuse a local corpus that training could not read, naming the key and the file, line or byte at fault: read
    as training reads it (`workers.corpora.scan_source`: decoded, parsed, the column checked, bounded in time)."""
    for i, c in enumerate(spec.corpora):
        if c.path and not c.path.startswith(BUILTIN):
            try:
                n_docs = scan_source(c.source())
            except CorpusError as err:
                raise SpecError(f"corpora[{i}].path: {err}") from err
            if n_docs == 0:
                raise SpecError(f"corpora[{i}].path: {c.path} has no text (corpus {c.name!r} would train nothing)")


def validate_spec(spec: Spec) -> None:
    """`greenspec validate`: what `run` checks before any write (paths, corpora, models and their context, prompts,
    colliding cells), with built-in `demo:` data written (cheap) but no built-in model trained."""
    check_paths(spec)
    check_model_names(spec)
    check_grid(spec)
    spec = materialize(spec, models=False)
    check_corpora(spec)
    preflight_models(spec)
    if all(t.path and not t.path.startswith(BUILTIN) for t in spec.tasks):
        check_unique_keys(spec, load_prompts(spec))


@dataclass(frozen=True)
class Grid:
    """A prepared spec's cells, made again on each pass and never all held at once (a grid of 10^6 cells is about
    0.7 GB as objects): iterate it for the cells (references linked), `keys()` for their keys alone."""

    spec: Spec
    prompts: list[TaskPrompts]

    def __iter__(self) -> Iterator[CellSpec]:
        return iter_cells(self.spec, self.prompts, linked=True)

    def keys(self) -> Iterator[str]:
        return grid_keys(self.spec, self.prompts)

    def __len__(self) -> int:
        return sum(1 for _ in self.keys())


def prepare(spec: Spec) -> tuple[Spec, list[TaskPrompts], Grid]:
    """Resolve built-in sources, check paths and models, load prompts, check the grid's keys unique (refusing a
    collision in one line); the grid itself is made when it is iterated."""
    check_model_names(spec)  # a misspelt model is refused before a demo: model trains
    spec = materialize(spec)
    check_paths(spec)
    check_corpora(spec)
    preflight_models(spec)
    prompts = load_prompts(spec)
    check_unique_keys(spec, prompts)
    return spec, prompts, Grid(spec, prompts)


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

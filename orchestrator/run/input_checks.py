"""A run's second step: what stands behind the spec's names is usable, checked before any write.

With its names found and its built-ins made, each local corpus is read as training reads it, and
each local model's config and weights are looked for (before the verifier is ever loaded), the verifier's context
length held against prompt_words + max_new_tokens + k. Each refusal is one line naming the key at fault.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from orchestrator.run.spec import Spec
from orchestrator.run.spec_sections import BUILTIN, model_options
from workers.corpora import scan_source
from workers.errors import CorpusError, ModelError, SpecError
from workers.models.pretrained import gguf_context_length, is_gguf

# Files of which at least one must exist in a local model folder for from_pretrained to find weights.
WEIGHT_FILES = (
    "model.safetensors",
    "model.safetensors.index.json",
    "pytorch_model.bin",
    "pytorch_model.bin.index.json",
)
CONTEXT_KEYS = ("max_position_embeddings", "n_positions", "max_sequence_length", "seq_length")


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


def check_inputs(spec: Spec) -> None:
    """Refuse a corpus training could not read, a local model without a config or weights, and a grid longer than
    the verifier's context, of a spec whose names are found and built-ins made."""
    check_corpora(spec)
    preflight_models(spec)

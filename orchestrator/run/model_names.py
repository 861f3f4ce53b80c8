"""Every model a spec names, resolved without loading weights (and without importing torch): a built-in GGUF name
(`smollm2-135m`), a `demo:` name, a local folder or `.gguf` file, or a hub id in the local Hugging Face cache. A
name that is none of these is refused in one line naming the built-ins and where it looked, so a typo never reaches
a run that trains for minutes and then fails on the network.

A hub id shaped `owner/name` that is not cached yet is let through (with a warning) unless the hub is switched off
(`HF_HUB_OFFLINE`): the run downloads it, as `examples/paper.toml` needs on a fresh GPU machine.

Example:
    >>> check_model_name("verifier.model", "smollm2-135")
    SpecError: verifier.model: 'smollm2-135' is not a model greenspec can find; did you mean 'smollm2-135m'? ...
"""

from __future__ import annotations

import difflib
import logging
import os

from orchestrator.run.spec import Spec
from orchestrator.run.spec_sections import BUILTIN, model_options
from orchestrator.run.spec_sections import BUILTIN_MODELS as DEMO_MODELS
from workers.errors import SpecError
from workers.models.pretrained import BUILTIN_MODELS as PRETRAINED
from workers.models.pretrained import is_gguf

logger = logging.getLogger(__name__)


def builtin_names() -> list[str]:
    """Every model name greenspec knows without a folder or the hub: the GGUF built-ins, then the demo: ones."""
    return [*PRETRAINED, *(BUILTIN + m for m in DEMO_MODELS)]


def hub_cache() -> tuple[str, bool]:
    """The local Hugging Face hub cache folder, and whether the hub is switched off (HF_HUB_OFFLINE)."""
    from huggingface_hub import constants  # deferred: a tenth of a second, and only for hub ids

    return constants.HF_HUB_CACHE, bool(constants.HF_HUB_OFFLINE)


def in_hub_cache(repo_id: str, revision: str | None = None) -> bool:
    """Whether the local Hugging Face cache holds `repo_id`'s config.json (at `revision`), read from disk only."""
    from huggingface_hub import try_to_load_from_cache

    try:
        found = try_to_load_from_cache(repo_id, "config.json", revision=revision)
    except ValueError:  # not a valid repo id (HFValidationError): it cannot be cached either
        return False
    return isinstance(found, str)


def _looks_like_hub_id(value: str) -> bool:
    """`owner/name` with nothing else: the shape of a hub id a run could download."""
    owner, _, name = value.partition("/")
    return bool(owner and name) and "/" not in name and not value.startswith((".", "~"))


def check_model_name(key: str, value: str, revision: str | None = None) -> None:
    """Refuse a model name that is no built-in, `demo:` name, local path or cached hub id, in one line."""
    if not value or value.startswith(BUILTIN) or is_gguf(value) or os.path.isabs(value):
        return  # demo: names are checked by check_paths; local files and GGUFs by input_checks.preflight_models
    if in_hub_cache(value, revision):
        return
    cache, offline = hub_cache()
    if _looks_like_hub_id(value) and not offline:
        logger.warning("%s: %s is not in the Hugging Face cache (%s); the run downloads it", key, value, cache)
        return
    close = difflib.get_close_matches(value, builtin_names(), n=1, cutoff=0.6)
    hint = f"; did you mean {close[0]!r}?" if close else ""
    off = "; HF_HUB_OFFLINE is set, so the run could not download it" if offline else ""
    raise SpecError(
        f"{key}: {value!r} is not a model greenspec can find{hint} (built-ins: {', '.join(builtin_names())}; "
        f"looked for a folder {value!r} beside the spec and a hub id in the Hugging Face cache {cache}{off})"
    )


def check_model_names(spec: Spec) -> None:
    """Refuse the first model of the spec (the verifier's, then each strategy's) that cannot be found."""
    check_model_name("verifier.model", spec.verifier.model, spec.verifier.revision)
    for s in spec.strategies:
        for key, value in model_options(s):
            check_model_name(key, value)

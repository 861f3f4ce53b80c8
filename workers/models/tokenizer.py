"""Tokenizers by name: the real Mistral-7B SentencePiece tokenizer offline, or any HF tokenizer.

Example:
    >>> tok = load_tokenizer("mistral")          # mistral-common's tokenizer.model.v1, vocab 32000
    >>> tok("Hello world").input_ids[:1]
    [1]
"""

from __future__ import annotations

import functools
import hashlib
import importlib.util
import logging
import os
import shutil
from pathlib import Path

from workers.errors import ModelError
from workers.files import cache_dir
from workers.models.pretrained import resolve_model

logger = logging.getLogger(__name__)

MISTRAL = "mistral"  # the offline name of mistral-common's v1 SentencePiece model


def mistral_tokenizer_dir() -> Path:
    """A directory holding mistral-common's tokenizer.model.v1 as `tokenizer.model` (what LlamaTokenizer loads).
    The package is found, not imported: only its data file is read, and importing it (0.5 s) asks the installed
    package metadata for its version, which a process's metadata search can fail to find."""
    spec = importlib.util.find_spec("mistral_common")
    if spec is None or not spec.submodule_search_locations:
        raise ModelError(
            "mistral-common is not installed (`make install` installs it); the offline Mistral tokenizer needs it"
        )
    src = Path(list(spec.submodule_search_locations)[0]) / "data" / "tokenizer.model.v1"
    if not src.is_file():
        raise ModelError(f"mistral-common has no {src.name} at {src}; reinstall mistral-common")
    dst_dir = cache_dir() / "tokenizers" / "mistral-v1"
    dst = dst_dir / "tokenizer.model"
    if not dst.is_file() or dst.stat().st_size != src.stat().st_size:
        dst_dir.mkdir(parents=True, exist_ok=True)
        tmp = dst.with_suffix(f".{os.getpid()}.tmp")  # per process: two first runs at once must not share it
        shutil.copyfile(src, tmp)
        os.replace(tmp, dst)
    return dst_dir


@functools.lru_cache(maxsize=8)
def load_tokenizer(name: str = MISTRAL):
    """Load a tokenizer: "mistral" (offline Mistral-7B v1), a built-in model's ("smollm2-135m"), a .gguf file's,
    a local directory, or a hub id."""
    from transformers import AutoTokenizer, LlamaTokenizer  # deferred: transformers is heavy

    try:
        if name == MISTRAL:
            return LlamaTokenizer.from_pretrained(str(mistral_tokenizer_dir()), add_bos_token=True)
        return AutoTokenizer.from_pretrained(resolve_model(name))
    except (OSError, ValueError) as err:
        raise ModelError(f"tokenizer {name!r} cannot be loaded: {str(err).splitlines()[0]}") from err


def tokenizer_id(tokenizer) -> str:
    """A short stable fingerprint of a tokenizer's vocabulary (stored with instance bases and cells)."""
    vocab = tokenizer.get_vocab()
    items = sorted(vocab.items(), key=lambda kv: kv[1])
    digest = hashlib.sha256("\n".join(f"{i}\t{t}" for t, i in items).encode()).hexdigest()[:16]
    return f"v{len(vocab)}-{digest}"

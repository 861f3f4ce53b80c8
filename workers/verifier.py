"""The verifier: any transformers causal LM on cuda, mps or cpu, with and without a KV cache.

Uncached regime: `logits(ids)` runs a full forward over the whole context every step. Cached regime:
`prefill(ids)` once, `extend(new_ids)` per step, `crop(n_tokens)` back to the accepted prefix.

Example:
    >>> v = load_verifier("smollm2-135m", dtype="float32", device="auto")   # the built-in real verifier, offline
    >>> v = load_verifier("mistralai/Mistral-7B-v0.1", dtype="bfloat16", device="auto")
    >>> v.prefill([1, 415, 2936]).shape           # (T, V)
    torch.Size([3, 32000])
    >>> v.extend([9060]).shape; v.cached_len
    (torch.Size([1, 32000]), 4)
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

import torch

from workers.errors import ModelError, first_line

logger = logging.getLogger(__name__)

DEVICES = ("auto", "cuda", "mps", "cpu")


def resolve_device(name: str = "auto") -> torch.device:
    """A torch device from "auto" (cuda > mps > cpu), "cuda", "mps" or "cpu"; unavailable ones raise ModelError."""
    if name not in DEVICES and not str(name).startswith("cuda:"):
        raise ModelError(f"device {name!r} is not accepted; give one of {', '.join(DEVICES)}")
    has_mps = getattr(torch.backends, "mps", None) is not None and torch.backends.mps.is_available()
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "mps" if has_mps else "cpu")
    if str(name).startswith("cuda") and not torch.cuda.is_available():
        raise ModelError(f"device {name!r} is not available here; use 'auto' or 'cpu'")
    if name == "mps" and not has_mps:
        raise ModelError("device 'mps' is not available here; use 'auto' or 'cpu'")
    return torch.device(name)


def sync_device(device: torch.device) -> None:
    """Wait for queued kernels on `device`, so a clock read after it measures finished work."""
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    elif device.type == "mps":
        torch.mps.synchronize()


class Verifier:
    """A causal LM that scores drafted tokens: a full forward, or prefill/extend/crop over a KV cache."""

    def __init__(self, model, device: str | torch.device | None = None):
        if device is not None:
            model = model.to(resolve_device(device) if isinstance(device, str) else device)
        self.model = model.eval()
        self.device = next(model.parameters()).device
        self.vocab_size = int(model.config.vocab_size)
        self.cache = None
        self.last_shape: tuple[int, int, int] = (0, 0, 0)  # the last forward's (tokens fed, tokens cached, rows kept)

    def _shape(self, fed: int, cached: int, keep: int) -> None:
        """Note a forward's shape, which is what its cost depends on (`workers.decoding.costmodel`)."""
        self.last_shape = (fed, cached, keep if 0 < keep < fed else fed)

    def sync(self) -> None:
        """Synchronize the verifier's device (call before every clock read)."""
        sync_device(self.device)

    @property
    def cached_len(self) -> int:
        """Tokens whose keys/values the cache holds (0 before prefill)."""
        return 0 if self.cache is None else int(self.cache.get_seq_length())

    @torch.inference_mode()
    def logits(self, ids: Sequence[int], keep: int = 0) -> torch.Tensor:
        """Uncached full forward over `ids`; logits (T, V), or of the last `keep` positions when keep > 0."""
        self._shape(len(ids), 0, keep)
        out = self.model(input_ids=self._tensor(ids), use_cache=False, logits_to_keep=keep)
        return out.logits[0]

    @torch.inference_mode()
    def prefill(self, ids: Sequence[int], keep: int = 0) -> torch.Tensor:
        """Start a fresh KV cache with `ids`; logits (T, V) (last `keep` positions when keep > 0)."""
        self.cache = new_cache()
        return self.extend(ids, keep)

    @torch.inference_mode()
    def extend(self, new_ids: Sequence[int], keep: int = 0) -> torch.Tensor:
        """Feed `new_ids` after the cached tokens; logits (T_new, V) (last `keep` positions when keep > 0)."""
        if self.cache is None:
            raise RuntimeError("Verifier.extend before prefill")
        self._shape(len(new_ids), self.cached_len, keep)
        out = self.model(input_ids=self._tensor(new_ids), cache=self.cache, use_cache=True, logits_to_keep=keep)
        self.cache = out.cache
        return out.logits[0]

    @torch.inference_mode()
    def masked(
        self, ids: Sequence[int], positions: Sequence[int], mask: torch.Tensor, cache: str, keep: int = 0
    ) -> torch.Tensor:
        """A forward over `ids` at `positions` under a 4-D additive `mask` (a token tree); logits (T, V), or of the
        last `keep` positions when keep > 0.

        cache: "none" (uncached), "fresh" (a new cache holds them) or "extend" (they join the cached tokens; cut
        them back with `keep_rows`).
        """
        if cache == "fresh":
            self.cache = new_cache()
        elif cache == "extend" and self.cache is None:
            raise RuntimeError("Verifier.masked(cache='extend') before prefill")
        cached = cache != "none"
        self._shape(len(ids), self.cached_len if cache == "extend" else 0, keep)
        out = self.model(
            input_ids=self._tensor(ids),
            position_ids=self._tensor(positions),
            attention_mask=layer_masks(self.model.config, mask.to(self.device), positions),
            cache=self.cache if cached else None,
            use_cache=cached,
            logits_to_keep=keep,
        )
        if cached:
            self.cache = out.cache
        return out.logits[0]

    @property
    def dtype(self) -> torch.dtype:
        """The model's floating dtype (attention masks are built in it)."""
        return next(self.model.parameters()).dtype

    @torch.inference_mode()
    def keep_rows(self, n_prefix: int, rows: Sequence[int]) -> None:
        """Keep the cache's first `n_prefix` tokens and then only the tokens at `rows` (>= n_prefix), in order."""
        index = torch.tensor(list(range(n_prefix)) + list(rows), dtype=torch.long, device=self.device)
        for layer in self.cache.layers:
            if layer.is_initialized and layer.keys.numel():
                layer.keys = layer.keys.index_select(-2, index)
                layer.values = layer.values.index_select(-2, index)

    def crop(self, n_tokens: int) -> None:
        """Cut the cache back to its first `n_tokens` tokens (a rejected draft's keys/values go)."""
        have = self.cached_len
        if n_tokens < have:
            self.cache.crop(-(have - n_tokens))  # transformers 5: a negative count of tokens to drop

    def _tensor(self, ids: Sequence[int]) -> torch.Tensor:
        """ids as a (1, T) long tensor on the verifier's device."""
        return torch.tensor([list(ids)], dtype=torch.long, device=self.device)


def new_cache():
    """An empty KV cache whose every layer keeps all its tokens. Not `DynamicCache(config=...)`: for a model with
    sliding-window layers (Gemma 3: 5 in 6, window 512) that one drops keys past the window, and a cache grown past it
    by a rejected proposal cannot be cut back to the accepted prefix (transformers refuses the crop); the masks the
    model builds (or `layer_masks`) do the windowing over the full keys instead, exactly."""
    from transformers import DynamicCache

    return DynamicCache()


def layer_masks(config, mask: torch.Tensor, positions: Sequence[int]):
    """The additive token-tree `mask` (1, 1, Q, KV) as the model's layers need it: as it is for a model without
    sliding-window layers; else {layer type: mask}, the sliding layers' copy also hiding keys `sliding_window` or
    more positions behind the query (transformers applies a 4-D mask unchanged to every layer). The keys are the
    cached tokens at positions 0, 1, ... followed by the fed ones at `positions`. A model windowed without layer
    types (Mistral's `sliding_window`) takes the mask unchanged: a tree longer than its window is refused."""
    types = set(getattr(config, "layer_types", None) or ())
    if "sliding_attention" not in types:
        window = getattr(config, "sliding_window", None)
        if window and not types and mask.shape[-1] > window:
            raise ModelError(f"token trees over {mask.shape[-1]} tokens exceed the model's sliding window ({window})")
        return mask
    if types - {"full_attention", "sliding_attention"}:
        raise ModelError(f"token trees on layer types {sorted(types)} are not supported (only full and sliding)")
    query = torch.as_tensor(list(positions), device=mask.device)
    keys = torch.cat([torch.arange(mask.shape[-1] - len(query), device=mask.device), query])
    far = (query[:, None] - keys[None, :]) >= config.sliding_window  # (Q, KV)
    return {"full_attention": mask, "sliding_attention": mask.masked_fill(far, torch.finfo(mask.dtype).min)}


def load_verifier(
    model_id_or_path: str, dtype: str = "auto", device: str = "auto", revision: str | None = None
) -> Verifier:
    """Load a causal LM by hub id (at `revision`), local path, built-in name ("smollm2-135m", "gemma3-270m") or .gguf path onto
    `device`; failures raise ModelError in one line."""
    from transformers import AutoModelForCausalLM

    from workers.models.pretrained import is_gguf, resolve_model

    target = resolve_device(device)
    torch_dtype = dtype if dtype == "auto" else getattr(torch, dtype, None)
    if not isinstance(torch_dtype, (str, torch.dtype)):
        raise ModelError(f"dtype {dtype!r} is not accepted; give 'auto', 'float32', 'float16' or 'bfloat16'")
    try:
        folder = resolve_model(model_id_or_path)  # a GGUF model: its converted folder (converted once, cached)
        model = AutoModelForCausalLM.from_pretrained(
            folder, dtype=torch_dtype, revision=None if is_gguf(model_id_or_path) else revision
        )
    except (OSError, ValueError) as err:
        raise ModelError(f"verifier {model_id_or_path!r} cannot be loaded: {first_line(err)}") from err
    logger.info("verifier %s loaded on %s (%s)", model_id_or_path, target, model.dtype)
    return Verifier(model, device=target)

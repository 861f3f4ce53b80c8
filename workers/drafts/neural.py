"""The `neural` draft: a small causal LM drafting k tokens greedily with its own KV cache.

The cache survives across calls: each call crops it to the longest prefix it shares with the new context
and feeds only the rest, so a step costs the accepted tokens plus k single-token passes. A draft whose
tokenizer differs from the verifier's is bridged through text: decode the verifier's context, re-encode
it for the draft, decode the draft's tokens and re-encode them with the verifier's tokenizer.

Example:
    >>> draft = NeuralDraft(model="TinyLlama/TinyLlama-1.1B-Chat-v1.0", tokenizer=tiny_tok,
    ...                     verifier_tokenizer=mistral_tok)    # different vocabularies: bridged
    >>> draft.propose(context_ids, k=5)

With `gate=AdaptiveLength(...)` (spec: `adaptive = true`, `threshold`, `online`) each guess is scored by the
draft model's probability of it (softmax max) and drafting stops at the first one below the threshold, which
also saves the draft passes after it (`workers.decoding.adaptive`); only for a draft sharing the verifier's ids.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import TYPE_CHECKING, Annotated

from pydantic import Field

from workers.drafts.adaptive import AdaptiveLength, AdaptiveOptions
from workers.drafts.continuation import continuation_ids
from workers.drafts.registry import BuildContext, DraftEntry
from workers.errors import DraftError, ModelError, first_line
from workers.interfaces import Draft, common_prefix_len

if TYPE_CHECKING:
    import torch

logger = logging.getLogger(__name__)


def load_draft_model(model, device=None):
    """A transformers causal LM object as is (eval mode), or one loaded from a hub id or local path."""
    if isinstance(model, str):
        from transformers import AutoModelForCausalLM

        from workers.models.pretrained import resolve_model

        try:
            model = AutoModelForCausalLM.from_pretrained(resolve_model(model), dtype="auto")
        except (OSError, ValueError) as err:
            raise ModelError(f"neural draft: model {model!r} cannot be loaded: {first_line(err)}") from err
    if not callable(getattr(model, "forward", None)):
        raise DraftError(f"neural: model={type(model).__name__} is not accepted; give a causal LM, a hub id or a path")
    if device is not None:
        model = model.to(device)
    return model.eval()


def needs_bridge(tokenizer, verifier_tokenizer) -> bool:
    """True when both tokenizers are given and their vocabularies differ."""
    if tokenizer is None or verifier_tokenizer is None or tokenizer is verifier_tokenizer:
        return False
    from workers.models.tokenizer import tokenizer_id

    return tokenizer_id(tokenizer) != tokenizer_id(verifier_tokenizer)


class NeuralDraft(Draft):
    """Greedy drafting with a small causal LM; bridged through text when its tokenizer differs."""

    name = "neural"

    def __init__(self, model, tokenizer=None, verifier_tokenizer=None, device=None, gate: AdaptiveLength | None = None):
        if model is None:
            raise DraftError("neural: needs model=<a causal LM object, hub id or local path>")
        if isinstance(tokenizer, str) or (
            tokenizer is None and isinstance(model, str) and verifier_tokenizer is not None
        ):
            from workers.models.tokenizer import load_tokenizer

            tokenizer = load_tokenizer(tokenizer or model)  # a name: "mistral", a local directory or a hub id
        self.model = load_draft_model(model, device)
        self.device = next(self.model.parameters()).device
        self.tokenizer, self.verifier_tokenizer = tokenizer, verifier_tokenizer
        self.bridged = needs_bridge(tokenizer, verifier_tokenizer)
        if gate is not None and self.bridged:
            raise DraftError("neural: adaptive drafting scores the draft's own ids; it needs the verifier's tokenizer")
        self.gate = gate
        self.reset()

    def reset(self) -> None:
        """Drop the KV cache (a new generation starts from an empty one)."""
        self._cache = None
        self._cached_ids: list[int] = []  # the draft-vocabulary ids whose keys/values the cache holds
        if getattr(self, "gate", None) is not None:
            self.gate.reset()

    def propose(self, context: Sequence[int], k: int) -> list[int]:
        """Up to k greedy tokens of the draft model after `context` (verifier ids)."""
        if k <= 0 or not context:
            return []
        if self.gate is not None:
            self.gate.observe(context)
            return self.gate.cut(self.scored([int(t) for t in context], k), context)
        if not self.bridged:
            return self._greedy([int(t) for t in context], k)
        text = self.verifier_tokenizer.decode(list(context), skip_special_tokens=True)
        ids = self.tokenizer.encode(text, add_special_tokens=True)
        guesses = self._greedy(ids, k)
        return continuation_ids(self.verifier_tokenizer, text, self._continuation_text(ids, guesses))[:k]

    def propose_with_probs(self, context: Sequence[int], k: int, warp, generator, vocab_size: int | None = None):
        """Up to k tokens sampled from the draft's warped distribution q, with q's rows (n, V) float64 on CPU.

        For speculative sampling (min(1, p/q)). `warp`: a workers.decoding.sampling.Warp; `generator`: a CPU
        torch.Generator; ids >= `vocab_size` (the verifier's) get no mass. A bridged draft has no q over the
        verifier's ids: it returns its greedy guesses and None (judged as point masses).
        """
        import torch

        if self.bridged or k <= 0 or not context:
            return self.propose(context, k), None
        with torch.inference_mode():
            return self._sample_k([int(t) for t in context], k, warp, generator, vocab_size)

    def _sample_k(self, ids: list[int], k: int, warp, generator, vocab_size: int | None):
        """k tokens sampled from the warped draft distribution after `ids`, and the rows q (k, V)."""
        import torch

        from workers.decoding.sampling import sample, warped_probs

        logits = self._feed(ids)
        tokens, rows = [], []
        for i in range(k):
            scores = logits[-1]
            if vocab_size is not None and vocab_size < len(scores):
                scores = scores.clone()
                scores[vocab_size:] = -float("inf")  # the verifier cannot take these ids: q keeps none of them
            q = warped_probs(scores, warp)
            tokens.append(sample(q, generator))
            rows.append(q)
            if i < k - 1:
                logits = self._forward([tokens[-1]])
        return tokens, torch.stack(rows)

    def _continuation_text(self, ids: list[int], guesses: list[int]) -> str:
        """The text the guesses add after `ids`, decoded jointly so word-initial spaces survive."""
        head = self.tokenizer.decode(ids, skip_special_tokens=True)
        full = self.tokenizer.decode(ids + guesses, skip_special_tokens=True)
        if full.startswith(head):
            return full[len(head) :]
        return self.tokenizer.decode(guesses, skip_special_tokens=True)

    def _greedy(self, ids: list[int], k: int) -> list[int]:
        """k greedy tokens after `ids`, reusing the cached prefix; the cache ends holding ids + guesses[:-1]."""
        import torch

        with torch.inference_mode():
            logits = self._feed(ids)
            out: list[int] = []
            for i in range(k):
                token = int(logits[-1].argmax())
                out.append(token)
                if i < k - 1:
                    logits = self._forward([token])
        return out

    def scored(self, ids: list[int], k: int) -> list[tuple[int, float]]:
        """Greedy guesses with the draft's probability of each, ending at the first the gate would refuse."""
        import torch

        out: list[tuple[int, float]] = []
        with torch.inference_mode():
            logits = self._feed(ids)
            for i in range(k):
                probs = torch.softmax(logits[-1].float(), dim=-1)
                p, token = probs.max(dim=-1)
                out.append((int(token), float(p)))
                if self.gate is not None and self.gate.estimate(float(p)) < self.gate.threshold:
                    break  # the stop rule ends here: no pass for guesses nobody will draft
                if i < k - 1:
                    logits = self._forward([int(token)])
        return out

    def _feed(self, ids: list[int]) -> "torch.Tensor":
        """Crop the cache to the prefix it shares with `ids` (keeping >= 1 token to feed) and feed the rest."""
        from transformers import DynamicCache

        keep = min(common_prefix_len(self._cached_ids, ids), len(ids) - 1)
        have = len(self._cached_ids)
        if self._cache is None or keep == 0:
            self._cache, keep = DynamicCache(config=self.model.config), 0
        elif have > keep:
            self._cache.crop(-(have - keep))  # transformers 5: a negative count of tokens to drop
        self._cached_ids = ids[:keep]
        return self._forward(ids[keep:])

    def _forward(self, new_ids: list[int]) -> "torch.Tensor":
        """Feed new ids through the model with the cache; logits (1, V) of the last new position."""
        import torch

        x = torch.tensor([new_ids], dtype=torch.long, device=self.device)  # (1, T)
        out = self.model(input_ids=x, cache=self._cache, use_cache=True, logits_to_keep=1)
        self._cache = out.cache
        self._cached_ids = self._cached_ids + list(new_ids)
        return out.logits[0]  # (1, V): only the last position is ever read


class NeuralOptions(AdaptiveOptions):
    """`model`: hub id or local path of a small causal LM; `tokenizer`: its own, when it differs from the verifier's."""

    path_fields = ("model", "tokenizer")
    model_fields_ = ("model",)
    model: Annotated[str, Field(min_length=1)]
    tokenizer: str | None = None


def build(opts: NeuralOptions, ctx: BuildContext) -> NeuralDraft:
    return NeuralDraft(
        model=opts.model,
        device=ctx.device,
        tokenizer=opts.tokenizer,
        verifier_tokenizer=ctx.tokenizer,
        gate=opts.gate(),
    )


ENTRY = DraftEntry(
    "neural", NeuralDraft, NeuralOptions, build, summary="a small causal LM drafting greedily", paper="TinyLlama"
)

"""Plain greedy decoding by transformers' own `generate`: the independent reference every speculative generation
must equal at temperature 0 (and the reference cells replay reads, `workers.replay.verifier`).

Example:
    >>> ref = greedy_reference(verifier, prompt_ids, 100)
    >>> is_greedy(verifier, prompt_ids, ref, 100, eos_id=None)
    True
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from transformers import GenerationConfig

from workers.decoding.rounds import greedy_tokens
from workers.verifier import Verifier


@torch.inference_mode()
def greedy_reference(
    model_or_verifier, prompt_ids: Sequence[int], max_new_tokens: int, eos_id: int | None = None
) -> list[int]:
    """Plain greedy new tokens from transformers' own `generate` (the independent reference)."""
    model = model_or_verifier.model if isinstance(model_or_verifier, Verifier) else model_or_verifier
    device = next(model.parameters()).device
    ids = torch.tensor([list(prompt_ids)], dtype=torch.long, device=device)  # (1, T)
    config = GenerationConfig(
        do_sample=False,
        max_new_tokens=max_new_tokens,
        eos_token_id=eos_id,
        pad_token_id=eos_id if eos_id is not None else 0,
    )
    out = model.generate(ids, attention_mask=torch.ones_like(ids), generation_config=config)
    return out[0, ids.shape[1] :].tolist()


@torch.inference_mode()
def greedy_references(
    verifier: Verifier, prompts: Sequence[Sequence[int]], max_new_tokens: int, eos_id: int | None = None
) -> list[list[int]]:
    """Plain greedy new tokens of several prompts in one batched `generate` (left-padded), each checked by one
    teacher-forced pass of the unbatched verifier (`is_greedy`); a reference that fails the check (batched kernels
    can break a near tie the other way) is made again alone by `greedy_reference`."""
    if len(prompts) <= 1:
        return [greedy_reference(verifier, p, max_new_tokens, eos_id) for p in prompts]
    pad = eos_id if eos_id is not None else 0
    width = max(len(p) for p in prompts)
    ids = torch.tensor([[pad] * (width - len(p)) + list(p) for p in prompts], device=verifier.device)
    mask = torch.tensor([[0] * (width - len(p)) + [1] * len(p) for p in prompts], device=verifier.device)
    config = GenerationConfig(do_sample=False, max_new_tokens=max_new_tokens, eos_token_id=eos_id, pad_token_id=pad)
    out = verifier.model.generate(ids, attention_mask=mask, generation_config=config)[:, width:].tolist()
    refs = []
    for prompt, row in zip(prompts, out):
        ref = row[: row.index(eos_id) + 1] if eos_id is not None and eos_id in row else row
        ok = is_greedy(verifier, prompt, ref, max_new_tokens, eos_id)
        refs.append(ref if ok else greedy_reference(verifier, prompt, max_new_tokens, eos_id))
    return refs


def is_greedy(
    verifier: Verifier, prompt: Sequence[int], ref: Sequence[int], max_new_tokens: int, eos_id: int | None
) -> bool:
    """Whether `ref` is the verifier's greedy continuation of `prompt`: every token the argmax at its position in one
    uncached pass, and its length max_new_tokens unless it ends at EOS."""
    ref = [int(t) for t in ref]
    if not ref or (len(ref) < max_new_tokens and (eos_id is None or ref[-1] != eos_id)):
        return len(ref) == max_new_tokens
    if eos_id is not None and eos_id in ref[:-1]:
        return False
    return greedy_tokens(verifier.logits(list(prompt) + ref[:-1], len(ref))) == ref

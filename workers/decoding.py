"""Greedy speculative decoding as a ladder of small functions (after gpt-fast's `generate.py`).

A *round* asks the draft for up to k tokens and lets the verifier keep the longest prefix equal to its own
argmax, so the output equals plain greedy decoding token for token.

- Uncached regime (`cached=False`): one full forward over context + drafts per round; its k+1 predictions
  accept n drafts and add the verifier's next token (the bonus): n + 1 new tokens per pass.
- Cached regime (`cached=True`): prefill once and keep the KV cache. The previous pass already predicts the
  next token, so the first draft token is checked against it for free (the *rejection fast-path*): on a
  mismatch the verifier's token is taken and only that one token is fed; on a match the drafts are fed in
  one k-token pass, the cache is cropped back to the accepted prefix, and the prediction after the last
  accepted token is carried into the next round. n >= 1 new tokens per k-token pass, 1 per fast-path reject.

`steps` counts verifier forward passes (the cached prefill included); `accept_hist`, `drafted_per_step`,
`accepted_per_step` and `tokens_per_step` are per round: in round i the first `accepted_per_step[i]` of its
`tokens_per_step[i]` tokens came from the draft, the rest from the verifier.

Example:
    >>> result = speculative_generate(verifier, make_draft("ngram"), prompt_ids, 100, k=5, cached=True)
    >>> result.tokens == tuple(greedy_reference(verifier, prompt_ids, 100))
    True
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass, field

import torch

from workers.drafts.base import Draft, common_prefix_len
from workers.verifier import Verifier

logger = logging.getLogger(__name__)

STOP_EOS = "eos"
STOP_MAX = "max_new_tokens"


@dataclass(frozen=True)
class GenerationResult:
    """One generation: the new tokens, the verifier/draft counts and the timings (seconds, epoch for *_at)."""

    tokens: tuple[int, ...]  # new tokens only; an EOS that stopped generation is included, as HF generate does
    steps: int  # verifier forward passes
    drafted: int
    accepted: int
    accept_hist: tuple[int, ...]  # rounds by accepted draft tokens 0..k
    accepted_per_step: tuple[int, ...]  # per round: tokens taken from the draft
    drafted_per_step: tuple[int, ...]  # per round: tokens the draft proposed
    tokens_per_step: tuple[int, ...]  # per round: new tokens (draft ones first)
    wall_s: float
    draft_s: float
    verify_s: float
    started_at: float  # time.time() at the start, for integrating the power trace over the window
    ended_at: float
    fastpath_rejects: int = 0  # cached: rounds whose k-token pass was skipped by the first-token check
    bridged: bool = False
    stopped: str = STOP_MAX

    @property
    def n_tokens(self) -> int:
        """Number of new tokens."""
        return len(self.tokens)


@dataclass
class Tally:
    """Running counts and timers of one generation (mutable; frozen into a GenerationResult at the end)."""

    k: int
    tokens: list[int] = field(default_factory=list)
    steps: int = 0
    drafted: int = 0
    fastpath_rejects: int = 0
    draft_s: float = 0.0
    verify_s: float = 0.0
    accepted_per_step: list[int] = field(default_factory=list)
    drafted_per_step: list[int] = field(default_factory=list)
    tokens_per_step: list[int] = field(default_factory=list)
    stopped: str = STOP_MAX

    def record(self, new: list[int], n_accepted: int, eos_id: int | None, max_new_tokens: int) -> None:
        """Append a round's tokens, cut at EOS or at max_new_tokens, and count the accepted ones kept."""
        room = max_new_tokens - len(self.tokens)
        if eos_id is not None and eos_id in new[:room]:
            room = new.index(eos_id) + 1
            self.stopped = STOP_EOS
        kept = new[:room]
        self.tokens.extend(kept)
        self.accepted_per_step.append(min(n_accepted, len(kept)))
        self.tokens_per_step.append(len(kept))

    def done(self, max_new_tokens: int) -> bool:
        """True once EOS was emitted or max_new_tokens reached."""
        return self.stopped == STOP_EOS or len(self.tokens) >= max_new_tokens


def greedy_tokens(logits: torch.Tensor) -> list[int]:
    """Argmax token id of every position: (T, V) -> T ints."""
    return logits.argmax(dim=-1).tolist()


def accept_length(drafts: Sequence[int], targets: Sequence[int]) -> int:
    """Length of the longest prefix of `drafts` equal to the verifier's `targets`."""
    return common_prefix_len(drafts, targets)


def propose(draft: Draft, context: Sequence[int], k: int, verifier: Verifier, tally: Tally) -> list[int]:
    """Ask the draft for up to k tokens, timed into tally.draft_s."""
    if k <= 0:
        tally.drafted_per_step.append(0)
        return []
    verifier.sync()
    t0 = time.perf_counter()
    drafts = [int(t) for t in draft.propose(context, k)[:k]]
    verifier.sync()  # a neural draft may share the verifier's device
    tally.draft_s += time.perf_counter() - t0
    bad = next((i for i, t in enumerate(drafts) if not 0 <= t < verifier.vocab_size), None)
    if bad is not None:  # an id the verifier cannot embed is never its argmax: cut the draft there
        drafts = drafts[:bad]
    tally.drafted += len(drafts)
    tally.drafted_per_step.append(len(drafts))
    return drafts


def timed_pass(verifier: Verifier, tally: Tally, fn, *args) -> torch.Tensor:
    """Run one verifier forward pass `fn(*args)`, counted as a step and timed into tally.verify_s."""
    verifier.sync()
    t0 = time.perf_counter()
    logits = fn(*args)
    verifier.sync()
    tally.verify_s += time.perf_counter() - t0
    tally.steps += 1
    return logits


def uncached_round(verifier: Verifier, draft: Draft, context: list[int], k: int, tally: Tally) -> tuple[list[int], int]:
    """One full forward over context + drafts: (accepted drafts + the verifier's next token, n accepted)."""
    drafts = propose(draft, context, k, verifier, tally)
    logits = timed_pass(verifier, tally, verifier.logits, context + drafts, len(drafts) + 1)  # (k+1, V)
    targets = greedy_tokens(logits)  # targets[i]: the verifier's token after context + drafts[:i]
    n = accept_length(drafts, targets)
    return drafts[:n] + [targets[n]], n


def cached_round(
    verifier: Verifier, draft: Draft, context: list[int], target: int, k: int, tally: Tally, more: bool
) -> tuple[list[int], int, torch.Tensor | None]:
    """One cached round: (new tokens, n accepted, logits after them); `more` False skips a pass nobody reads.

    The cache holds all of `context`; `target` is the verifier's token after it (from the previous pass).
    """
    drafts = propose(draft, context, k, verifier, tally)
    if drafts and drafts[0] == target:
        logits = timed_pass(verifier, tally, verifier.extend, drafts)  # (len(drafts), V)
        targets = greedy_tokens(logits)  # targets[i]: the verifier's token after drafts[i]
        n = 1 + accept_length(drafts[1:], targets[:-1])
        verifier.crop(len(context) + n)
        return drafts[:n], n, logits[n - 1]
    tally.fastpath_rejects += bool(drafts)
    if not more:
        return [target], 0, None
    logits = timed_pass(verifier, tally, verifier.extend, [target])  # (1, V)
    return [target], 0, logits[-1]


def generate_uncached(
    verifier: Verifier, draft: Draft, prompt: list[int], max_new: int, k: int, eos_id: int | None, tally: Tally
) -> None:
    """Rounds of full forwards until EOS or max_new tokens (drafts capped so the bonus token still fits)."""
    while not tally.done(max_new):
        room = max_new - len(tally.tokens)
        new, n = uncached_round(verifier, draft, prompt + tally.tokens, min(k, room - 1), tally)
        tally.record(new, n, eos_id, max_new)


def generate_cached(
    verifier: Verifier, draft: Draft, prompt: list[int], max_new: int, k: int, eos_id: int | None, tally: Tally
) -> None:
    """Prefill once, then cached rounds until EOS or max_new tokens."""
    if max_new == 0:
        return
    last = timed_pass(verifier, tally, verifier.prefill, prompt, 1)[-1]  # (V,)
    while not tally.done(max_new):
        room = max_new - len(tally.tokens)
        # with one token left, or EOS predicted, the verifier's own token ends the generation: no draft, no pass
        target = int(last.argmax())
        more = room > 1 and target != eos_id
        k_round = min(k, room) if more else 0
        new, n, last = cached_round(verifier, draft, prompt + tally.tokens, target, k_round, tally, more)
        tally.record(new, n, eos_id, max_new)


def speculative_generate(
    verifier: Verifier,
    draft: Draft,
    prompt_ids: Sequence[int],
    max_new_tokens: int,
    k: int,
    cached: bool,
    eos_id: int | None = None,
) -> GenerationResult:
    """Generate up to max_new_tokens greedy tokens after prompt_ids, drafting k per round; see the module doc."""
    prompt = [int(t) for t in prompt_ids]
    if not prompt:
        raise ValueError("speculative_generate: prompt_ids is empty; give at least one token (e.g. BOS)")
    if k < 0 or max_new_tokens < 0:
        raise ValueError(f"speculative_generate: k={k} and max_new_tokens={max_new_tokens} must be >= 0")
    draft.reset()
    tally = Tally(k=k)
    verifier.sync()
    started_at, t0 = time.time(), time.perf_counter()
    run = generate_cached if cached else generate_uncached
    run(verifier, draft, prompt, max_new_tokens, k, eos_id, tally)
    verifier.sync()
    wall_s, ended_at = time.perf_counter() - t0, time.time()
    return freeze(tally, wall_s, started_at, ended_at, bool(getattr(draft, "bridged", False)))


def freeze(tally: Tally, wall_s: float, started_at: float, ended_at: float, bridged: bool) -> GenerationResult:
    """The immutable result of a finished tally."""
    hist = [0] * (tally.k + 1)
    for n in tally.accepted_per_step:
        hist[n] += 1
    return GenerationResult(
        tokens=tuple(tally.tokens),
        steps=tally.steps,
        drafted=tally.drafted,
        accepted=sum(tally.accepted_per_step),
        accept_hist=tuple(hist),
        accepted_per_step=tuple(tally.accepted_per_step),
        drafted_per_step=tuple(tally.drafted_per_step),
        tokens_per_step=tuple(tally.tokens_per_step),
        wall_s=wall_s,
        draft_s=tally.draft_s,
        verify_s=tally.verify_s,
        started_at=started_at,
        ended_at=ended_at,
        fastpath_rejects=tally.fastpath_rejects,
        bridged=bridged,
        stopped=tally.stopped,
    )


def warmup(
    verifier: Verifier, draft: Draft, prompt_ids: Sequence[int], k: int, cached: bool, max_new_tokens: int = 8
) -> None:
    """One short untimed generation so kernels, caches and allocators are warm before measuring."""
    speculative_generate(verifier, draft, prompt_ids, max_new_tokens, k, cached)


@torch.inference_mode()
def greedy_reference(
    model_or_verifier, prompt_ids: Sequence[int], max_new_tokens: int, eos_id: int | None = None
) -> list[int]:
    """Plain greedy new tokens from transformers' own `generate` (the independent reference)."""
    from transformers import GenerationConfig

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
    return out[0, ids.shape[1]:].tolist()

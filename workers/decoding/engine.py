"""Speculative decoding as a ladder of small functions (after gpt-fast's `generate.py`), greedy or sampled.

A *round* asks the draft for up to k tokens and lets the verifier judge them left to right. At temperature 0
a draft token passes when it equals the verifier's argmax, so the output equals plain greedy decoding token for
token. At temperature > 0 a token passes by speculative sampling (`workers.sampling`): the output is then
distributed exactly as sampling from the verifier's warped distribution.

- Uncached regime (`cached=False`): one full forward over context + drafts per round; its k+1 predictions
  judge the drafts and give the next token (the bonus, or the replacement of the first rejected draft):
  n + 1 new tokens per pass.
- Cached regime, the paper's (`cached=True, fastpath=True`): prefill once and keep the KV cache. The previous
  pass already gives the next position's distribution, so the first draft token is judged against it for
  free (the *rejection fast-path*): on a rejection the verifier's token is taken and only that one token is
  fed; on a pass the drafts are fed in one k-token pass, the cache is cropped back to the accepted prefix, and
  the distribution of the next position (after a rejection: what is left of it, the residual) is carried
  into the next round, whose first draft is judged against it. n >= 1 new tokens per k-token pass, 1 per
  fast-path reject.
- Cached regime, the standard one (`cached=True, fastpath=False`; transformers, vLLM): the last new token is
  pending (not yet fed); each round feeds it plus the k drafts in one pass (the first round: the whole prompt
  plus the drafts) and keeps the accepted drafts plus the next token: up to k+1 new tokens per pass.

With `trees=True` (greedy only) each round drafts a token tree of up to k tokens instead of a chain and verifies
it in one pass under an ancestors-only attention mask, the cache keeping the accepted path only
(`workers.tree_rounds`, `workers.tokentree`); with trees off the chain rounds below run unchanged.

A draft that can report the distribution it samples from implements, beside `propose`,
`propose_with_probs(context, k, warp, generator, vocab_size=None) -> (tokens, q)` with q (len(tokens), V) its
warped probabilities (float64, no mass on ids >= vocab_size), or None to be judged as point masses; it is
used at temperature > 0 only (the neural draft has it).

`steps` counts verifier forward passes (the cached prefill included); `accept_hist`, `drafted_per_step`,
`accepted_per_step` and `tokens_per_step` are per round: in round i the first `accepted_per_step[i]` of its
`tokens_per_step[i]` tokens came from the draft, the rest from the verifier.

Example:
    >>> result = speculative_generate(verifier, draft, prompt_ids, 100, k=5, cached=True)  # any workers.drafts draft
    >>> result.tokens == tuple(greedy_reference(verifier, prompt_ids, 100))
    True
    >>> sampled = speculative_generate(verifier, draft, prompt_ids, 100, k=5, cached=True, temperature=0.8, seed=1)
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass, field

import torch

from workers.drafts.base import Draft
from workers.judges import (  # noqa: F401 (GreedyJudge, SamplingJudge, fit_vocab, accept_length re-exported)
    GreedyJudge,
    Judge,
    QRows,
    Row,
    SamplingJudge,
    accept_length,
    fit_vocab,
    greedy_tokens,
    make_judge,
)
from workers.sampling import EXACT, ExactRule, Warp
from workers.verifier import Verifier

logger = logging.getLogger(__name__)

STOP_EOS = "eos"
STOP_MAX = "max_new_tokens"
# spec regime name -> (cached, fastpath) arguments of speculative_generate
REGIMES = {"uncached": (False, True), "cached": (True, True), "cached-standard": (True, False)}


def regime_flags(regime: str) -> tuple[bool, bool]:
    """(cached, fastpath) for a spec regime name; an unknown name raises ValueError naming the accepted ones."""
    if regime not in REGIMES:
        raise ValueError(f"regime {regime!r} is not accepted; give one of {', '.join(REGIMES)}")
    return REGIMES[regime]


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
    first_checked: int = 0  # rounds whose first draft token was judged (every regime)
    first_accepted: int = 0  # ... and accepted: first-token acceptance = first_accepted / first_checked
    seed: int | None = None  # temperature > 0: the seed the sampling started from (reproduces the generation)
    depth_per_step: tuple[int, ...] = ()  # token trees: per round, the drafted tree's depth (its longest path)
    passes: tuple[tuple[int, int, int], ...] = ()  # per verifier pass: (tokens fed, tokens cached, rows kept)

    @property
    def n_tokens(self) -> int:
        """Number of new tokens."""
        return len(self.tokens)

    @property
    def path_acceptance(self) -> float:
        """Token trees: accepted tokens over the summed depths of the drafted trees (for a chain: the acceptance)."""
        depth = sum(self.depth_per_step) if self.depth_per_step else self.drafted
        return self.accepted / depth if depth else 0.0


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
    depth_per_step: list[int] = field(default_factory=list)
    passes: list[tuple[int, int, int]] = field(default_factory=list)
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


def propose(
    draft: Draft, context: Sequence[int], k: int, verifier: Verifier, tally: Tally, judge: Judge
) -> tuple[list[int], QRows]:
    """Ask the draft for up to k tokens (and their q rows when sampled), timed into tally.draft_s."""
    if k <= 0:
        tally.drafted_per_step.append(0)
        return [], []
    verifier.sync()
    t0 = time.perf_counter()
    drafts, qs = judge.propose(draft, context, k, verifier.vocab_size)
    verifier.sync()  # a neural draft may share the verifier's device
    tally.draft_s += time.perf_counter() - t0
    bad = next((i for i, t in enumerate(drafts) if not 0 <= t < verifier.vocab_size), None)
    if bad is not None:  # an id the verifier cannot embed has p = 0: cut the draft there
        drafts, qs = drafts[:bad], qs[:bad]
    tally.drafted += len(drafts)
    tally.drafted_per_step.append(len(drafts))
    return drafts, qs


def timed_pass(verifier: Verifier, tally: Tally, fn, *args) -> torch.Tensor:
    """Run one verifier forward pass `fn(*args)`, counted as a step and timed into tally.verify_s."""
    verifier.sync()
    t0 = time.perf_counter()
    logits = fn(*args)
    verifier.sync()
    tally.verify_s += time.perf_counter() - t0
    tally.steps += 1
    tally.passes.append(verifier.last_shape)
    return logits


def uncached_round(
    verifier: Verifier, draft: Draft, context: list[int], k: int, tally: Tally, judge: Judge
) -> tuple[list[int], int]:
    """One full forward over context + drafts: (accepted drafts + the verifier's next token, n accepted)."""
    drafts, qs = propose(draft, context, k, verifier, tally, judge)
    logits = timed_pass(verifier, tally, verifier.logits, context + drafts, len(drafts) + 1)  # (k+1, V)
    n, row = judge.chain(logits, drafts, qs)  # logits[i]: the verifier after context + drafts[:i]
    return drafts[:n] + [judge.pick(row)], n


def cached_round(
    verifier: Verifier,
    draft: Draft,
    context: list[int],
    pending: Row,
    room: int,
    k: int,
    tally: Tally,
    judge: Judge,
    eos_id: int | None,
) -> tuple[list[int], int, Row | None]:
    """One round of the paper's cached scheme: (new tokens, n accepted, row of the next position or None at the end).

    The cache holds all of `context`; `pending` is the next position's row (from the previous pass).
    """
    known = judge.known(pending)
    if room <= 1 or (known is not None and known == eos_id):
        # the verifier's own token ends the generation: no draft, no pass
        tally.drafted_per_step.append(0)
        return [judge.pick(pending)], 0, None
    drafts, qs = propose(draft, context, min(k, room), verifier, tally, judge)
    if drafts and judge.check(pending, drafts[0], qs[0]):
        logits = timed_pass(verifier, tally, verifier.extend, drafts)  # (len(drafts), V): after each draft
        n, row = judge.chain(logits, drafts[1:], qs[1:])
        verifier.crop(len(context) + 1 + n)
        return drafts[: 1 + n], 1 + n, row
    tally.fastpath_rejects += bool(drafts)
    token = judge.pick(judge.reject(pending, drafts[0], qs[0]) if drafts else pending)
    if token == eos_id:
        return [token], 0, None
    logits = timed_pass(verifier, tally, verifier.extend, [token])  # (1, V)
    return [token], 0, judge.dist(logits[-1])


def standard_round(
    verifier: Verifier, draft: Draft, context: list[int], k: int, tally: Tally, judge: Judge, first: bool
) -> tuple[list[int], int]:
    """One round of the standard cached scheme: feed the pending token (the whole prompt at first) + drafts."""
    drafts, qs = propose(draft, context, k, verifier, tally, judge)
    if first:
        logits = timed_pass(verifier, tally, verifier.prefill, context + drafts, len(drafts) + 1)
    else:  # the cache holds context[:-1]
        logits = timed_pass(verifier, tally, verifier.extend, context[-1:] + drafts, len(drafts) + 1)
    n, row = judge.chain(logits, drafts, qs)  # logits[i]: the verifier after context + drafts[:i]
    verifier.crop(len(context) + n)
    return drafts[:n] + [judge.pick(row)], n


def generate_uncached(
    verifier: Verifier,
    draft: Draft,
    prompt: list[int],
    max_new: int,
    k: int,
    eos_id: int | None,
    tally: Tally,
    judge: Judge,
) -> None:
    """Rounds of full forwards until EOS or max_new tokens (drafts capped so the bonus token still fits)."""
    while not tally.done(max_new):
        room = max_new - len(tally.tokens)
        new, n = uncached_round(verifier, draft, prompt + tally.tokens, min(k, room - 1), tally, judge)
        tally.record(new, n, eos_id, max_new)


def generate_standard(
    verifier: Verifier,
    draft: Draft,
    prompt: list[int],
    max_new: int,
    k: int,
    eos_id: int | None,
    tally: Tally,
    judge: Judge,
) -> None:
    """Standard cached rounds until EOS or max_new tokens (drafts capped so the bonus token still fits)."""
    while not tally.done(max_new):
        room = max_new - len(tally.tokens)
        first = not tally.tokens_per_step
        new, n = standard_round(verifier, draft, prompt + tally.tokens, min(k, room - 1), tally, judge, first)
        tally.record(new, n, eos_id, max_new)


def generate_cached(
    verifier: Verifier,
    draft: Draft,
    prompt: list[int],
    max_new: int,
    k: int,
    eos_id: int | None,
    tally: Tally,
    judge: Judge,
) -> None:
    """Prefill once, then rounds of the paper's cached scheme until EOS or max_new tokens."""
    if max_new == 0:
        return
    pending = judge.dist(timed_pass(verifier, tally, verifier.prefill, prompt, 1)[-1])  # (V,)
    while not tally.done(max_new):
        room = max_new - len(tally.tokens)
        new, n, pending = cached_round(verifier, draft, prompt + tally.tokens, pending, room, k, tally, judge, eos_id)
        tally.record(new, n, eos_id, max_new)


def speculative_generate(
    verifier: Verifier,
    draft: Draft,
    prompt_ids: Sequence[int],
    max_new_tokens: int,
    k: int,
    cached: bool,
    eos_id: int | None = None,
    fastpath: bool = True,
    temperature: float = 0.0,
    top_k: int = 0,
    top_p: float = 1.0,
    seed: int | None = None,
    *,
    rule: ExactRule = EXACT,
    trees: bool = False,
) -> GenerationResult:
    """Generate up to max_new_tokens tokens after prompt_ids, drafting k per round; see the module doc.

    temperature 0: greedy (top_k, top_p, seed ignored). temperature > 0: sampled from the verifier's
    distribution warped as transformers warps it, reproducibly for a given `seed`. `rule` is a test seam.
    trees: each round drafts a token tree of up to k tokens (`workers.tree_rounds`; greedy only).
    """
    prompt = [int(t) for t in prompt_ids]
    if not prompt:
        raise ValueError("speculative_generate: prompt_ids is empty; give at least one token (e.g. BOS)")
    if k < 0 or max_new_tokens < 0:
        raise ValueError(f"speculative_generate: k={k} and max_new_tokens={max_new_tokens} must be >= 0")
    judge, used_seed = make_judge(Warp(temperature, top_k, top_p), seed, rule)
    if trees and not isinstance(judge, GreedyJudge):
        raise ValueError(f"speculative_generate: token trees are greedy only; got temperature={temperature}")
    draft.reset()
    tally = Tally(k=k)
    verifier.sync()
    started_at, t0 = time.time(), time.perf_counter()
    if trees:
        from workers import tree_rounds as tr

        run = (
            (tr.generate_cached_tree if fastpath else tr.generate_standard_tree)
            if cached
            else tr.generate_uncached_tree
        )
        run(verifier, draft, prompt, max_new_tokens, k, eos_id, tally)
    else:
        run = (generate_cached if fastpath else generate_standard) if cached else generate_uncached
        run(verifier, draft, prompt, max_new_tokens, k, eos_id, tally, judge)
    verifier.sync()
    wall_s, ended_at = time.perf_counter() - t0, time.time()
    return freeze(tally, wall_s, started_at, ended_at, bool(getattr(draft, "bridged", False)), used_seed)


def freeze(
    tally: Tally, wall_s: float, started_at: float, ended_at: float, bridged: bool, seed: int | None = None
) -> GenerationResult:
    """The immutable result of a finished tally."""
    hist = [0] * (tally.k + 1)
    for n in tally.accepted_per_step:
        hist[n] += 1
    checked = [a for a, d in zip(tally.accepted_per_step, tally.drafted_per_step) if d > 0]
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
        first_checked=len(checked),
        first_accepted=sum(a > 0 for a in checked),
        seed=seed,
        depth_per_step=tuple(tally.depth_per_step),
        passes=tuple(tally.passes),
    )


def warmup(
    verifier: Verifier,
    draft: Draft,
    prompt_ids: Sequence[int],
    k: int,
    cached: bool,
    max_new_tokens: int = 8,
    **options,
) -> None:
    """One short untimed generation so kernels, caches and allocators are warm before measuring.

    `options`: speculative_generate's fastpath, temperature, top_k, top_p, seed.
    """
    speculative_generate(verifier, draft, prompt_ids, max_new_tokens, k, cached, **options)


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
    return out[0, ids.shape[1] :].tolist()


@torch.inference_mode()
def greedy_references(
    verifier: Verifier, prompts: Sequence[Sequence[int]], max_new_tokens: int, eos_id: int | None = None
) -> list[list[int]]:
    """Plain greedy new tokens of several prompts in one batched `generate` (left-padded), each checked by one
    teacher-forced pass of the unbatched verifier (`is_greedy`); a reference that fails the check (batched kernels
    can break a near tie the other way) is made again alone by `greedy_reference`."""
    from transformers import GenerationConfig

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

"""The generation loop: `generate` drives one regime's round (`workers.decoding.regimes`) over a chain or a token
tree (`workers.decoding.shapes`) with one `DecodeOptions`; `speculative_generate` is its keyword front door and
`warmup` one short untimed generation with the timed run's options.

Example:
    >>> opts = DecodeOptions.of(100, k=5, cached=True)
    >>> warmup(verifier, draft, prompt_ids, opts)                    # kernels and caches warm, nothing timed
    >>> generate(verifier, draft, prompt_ids, opts).tokens == tuple(greedy_reference(verifier, prompt_ids, 100))
    True
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import replace

from workers.decoding.judges import make_judge
from workers.decoding.options import DecodeOptions
from workers.decoding.records import GenerationResult
from workers.decoding.regimes import ROUNDS, run_rounds
from workers.decoding.rounds import Tally
from workers.decoding.sampling import EXACT, ExactRule
from workers.decoding.seam import VerifierLike
from workers.decoding.shapes import Chain, Tree
from workers.interfaces import Draft

WARMUP_TOKENS = 8  # a warm-up's length at most: enough to run every kind of pass its regime makes


def generate(
    verifier: VerifierLike, draft: Draft, prompt_ids: Sequence[int], options: DecodeOptions
) -> GenerationResult:
    """Up to options.max_new_tokens new tokens after prompt_ids, k drafted per round (`workers.decoding`'s doc)."""
    prompt = [int(t) for t in prompt_ids]
    if not prompt:
        raise ValueError("speculative_generate: prompt_ids is empty; give at least one token (e.g. BOS)")
    judge, used_seed = make_judge(options.warp, options.seed, options.rule)
    shape = Tree(judge) if options.trees else Chain(judge)  # DecodeOptions refuses sampled trees
    draft.reset()
    tally = Tally(k=options.k)
    rnd = ROUNDS[options.regime](verifier, draft, shape, tally, options.k, options.eos_id)
    verifier.sync()
    started_at, t0 = time.time(), time.perf_counter()
    run_rounds(rnd, prompt, options.max_new_tokens, options.eos_id, tally)
    verifier.sync()
    wall_s, ended_at = time.perf_counter() - t0, time.time()
    return tally.freeze(wall_s, started_at, ended_at, bool(getattr(draft, "bridged", False)), used_seed)


# wide: the public keywords of the documented front door (docs/timing.md); they become one DecodeOptions at once
def speculative_generate(
    verifier: VerifierLike,
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
    """Generate up to max_new_tokens tokens after prompt_ids, drafting k per round; see the package doc.

    temperature 0: greedy (top_k, top_p, seed ignored). temperature > 0: sampled from the verifier's
    distribution warped as transformers warps it, reproducibly for a given `seed`. `rule` is a test seam.
    trees: each round drafts a token tree of up to k tokens (greedy only). The flags become one `DecodeOptions`.
    """
    flags = dict(fastpath=fastpath, temperature=temperature, top_k=top_k, top_p=top_p)
    options = DecodeOptions.of(max_new_tokens, k, cached, eos_id=eos_id, seed=seed, rule=rule, trees=trees, **flags)
    return generate(verifier, draft, prompt_ids, options)


def warmup(verifier: VerifierLike, draft: Draft, prompt_ids: Sequence[int], options: DecodeOptions) -> None:
    """One short untimed generation (`WARMUP_TOKENS` at most) with the timed run's options, so kernels, caches and
    allocators are warm before measuring, on the timed run's own path (regime, shape, warping)."""
    generate(verifier, draft, prompt_ids, replace(options, max_new_tokens=min(WARMUP_TOKENS, options.max_new_tokens)))

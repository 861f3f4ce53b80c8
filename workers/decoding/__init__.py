"""Speculative decoding as a ladder of small parts (after gpt-fast's `generate.py`), greedy or sampled.

A *round* asks the draft for up to k tokens and lets the verifier judge them left to right. At temperature 0
a draft token passes when it equals the verifier's argmax, so the output equals plain greedy decoding token for
token. At temperature > 0 a token passes by speculative sampling (`sampling`): the output is then distributed
exactly as sampling from the verifier's warped distribution.

The package, bottom up:
- `seam`: what a round asks of a verifier (`workers.verifier.Verifier`, and replay's stand-in, both fit it);
- `records`: a generation's measured fields, declared once (`Decoded`), and the `GenerationResult` holding them;
- `rounds`: the running `Tally` (frozen into a `GenerationResult`), the timed pass and draft call;
- `sampling`, `judges`: transformers' warping, the lossless acceptance rules, the greedy and sampling judges;
- `tokentree`, `shapes`: a round's proposal as a chain or a token tree, verified and accepted the same way;
- `regimes`: one `Round` per regime (uncached; cached, the paper's, with its first-token fast path;
  cached-standard) and the one loop that drives them;
- `options`, `engine`: one `DecodeOptions` per generation; `generate`, `speculative_generate`, `warmup`;
- `references`: plain greedy decoding by transformers, the reference every greedy generation equals;
- `replay`: a greedy generation recomputed from its reference with no model, through the same rounds;
- `adaptive`, `autok`, `costcurve`: the draft-length policy (a confidence stop rule; k = "auto" from the
  verifier's pass-cost curve).

A draft that can report the distribution it samples from implements, beside `propose`,
`propose_with_probs(context, k, warp, generator, vocab_size=None) -> (tokens, q)` with q (len(tokens), V) its
warped probabilities (float64, no mass on ids >= vocab_size), or None to be judged as point masses; it is
used at temperature > 0 only (the neural draft has it). A draft with `propose_tree(context, budget)` gives token
trees (greedy only, `trees=True`).

`steps` counts verifier forward passes (the cached prefill included); `accept_hist`, `drafted_per_step`,
`accepted_per_step` and `tokens_per_step` are per round: in round i the first `accepted_per_step[i]` of its
`tokens_per_step[i]` tokens came from the draft, the rest from the verifier. These are a result's `Decoded`'s fields,
read as the result's own (`result.accepted`).

The names below load their module on first use, so that `costcurve` (read by the storage and the dashboard),
`adaptive` (the drafts' stop rule) and `records` (held by `workers.contracts`) import without torch or transformers.

Example:
    >>> result = speculative_generate(verifier, draft, prompt_ids, 100, k=5, cached=True)  # any workers.drafts draft
    >>> result.tokens == tuple(greedy_reference(verifier, prompt_ids, 100))
    True
    >>> sampled = speculative_generate(verifier, draft, prompt_ids, 100, k=5, cached=True, temperature=0.8, seed=1)
"""

from __future__ import annotations

import importlib

# name -> the module of this package that defines it
_EXPORTS = {
    "DecodeOptions": "options",
    "REGIMES": "options",
    "regime_flags": "options",
    "regime_name": "options",
    "Decoded": "records",
    "GenerationResult": "records",
    "STOP_EOS": "records",
    "STOP_MAX": "records",
    "Tally": "rounds",
    "greedy_tokens": "rounds",
    "timed_pass": "rounds",
    "GreedyJudge": "judges",
    "SamplingJudge": "judges",
    "accept_length": "judges",
    "fit_vocab": "judges",
    "generate": "engine",
    "speculative_generate": "engine",
    "warmup": "engine",
    "greedy_reference": "references",
    "greedy_references": "references",
    "is_greedy": "references",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str):
    """A re-exported name, imported from its module the first time it is asked for."""
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{module}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_EXPORTS})

"""The comparisons every replay test makes: a replayed generation has a real run's rounds, list for list, and every
pass is the shape its regime states."""

from __future__ import annotations

from workers.decoding.passes import PASSES

ROUND_FIELDS = (
    "tokens",
    "steps",
    "drafted",
    "accepted",
    "accept_hist",
    "accepted_per_step",
    "drafted_per_step",
    "tokens_per_step",
    "depth_per_step",
    "fastpath_rejects",
    "first_checked",
    "first_accepted",
    "stopped",
    "passes",
)


def assert_same_rounds(real, replayed, label=None) -> None:
    """Every count and per-round list of the two generations is equal (time fields are not compared)."""
    for name in ROUND_FIELDS:
        assert getattr(replayed, name) == getattr(real, name), (label, name)


def assert_stated_shapes(res, regime: str, n_prompt: int, trees: bool = False) -> None:
    """Every pass the decoding loop recorded is the shape its regime states (`workers.decoding.passes`) for the
    round it read it as, at that round's context (the prompt + the tokens before it)."""
    passes = PASSES[regime]
    starts = [n_prompt + sum(res.tokens_per_step[:i]) for i in range(len(res.tokens_per_step))]
    for i, p in enumerate(res.passes):
        kind, n, context = passes.key(p, trees)
        first = kind.endswith("first")
        assert first == (regime != "uncached" and i == 0), (regime, i, p)
        assert passes.shape(n, context, first) == tuple(p), (regime, i, p)
        at = i - 1 if regime == "cached" else i  # the paper's cached regime opens with a prefill of its own
        assert context == (n_prompt if at < 0 else starts[at]), (regime, i, p)

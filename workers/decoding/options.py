"""A generation's settings in one frozen object: regime, k, length, EOS, shape (chain or token tree), warping, seed.

Built once (`DecodeOptions.of` takes `speculative_generate`'s flags) and passed down whole: the engine, the
warm-up and replay read it, nothing re-passes its fields one by one. It is checked when built, so a bad value is
refused in one line before any pass runs.

Example:
    >>> opts = DecodeOptions.of(100, k=5, cached=True, temperature=0.8, seed=1)
    >>> opts.regime, opts.warp.greedy
    ('cached', False)
    >>> DecodeOptions(regime="cached-standard", k=4, max_new_tokens=64, trees=True).cached
    True
"""

from __future__ import annotations

from dataclasses import dataclass, field

from workers.decoding.sampling import EXACT, ExactRule, Warp

# spec regime name -> (cached, fastpath) arguments of speculative_generate
REGIMES = {"uncached": (False, True), "cached": (True, True), "cached-standard": (True, False)}


def regime_flags(regime: str) -> tuple[bool, bool]:
    """(cached, fastpath) for a spec regime name; an unknown name raises ValueError naming the accepted ones."""
    if regime not in REGIMES:
        raise ValueError(f"regime {regime!r} is not accepted; give one of {', '.join(REGIMES)}")
    return REGIMES[regime]


def regime_name(cached: bool, fastpath: bool = True) -> str:
    """The regime name of speculative_generate's (cached, fastpath) flags (fastpath means nothing uncached)."""
    if not cached:
        return "uncached"
    return "cached" if fastpath else "cached-standard"


@dataclass(frozen=True)
class DecodeOptions:
    """How one generation decodes: `k` drafted tokens (or tree nodes) per round in `regime`, up to
    `max_new_tokens`, stopping at `eos_id`; temperature 0 in `warp` is greedy, else sampled from `seed`
    (None: a fresh one, recorded in the result). `rule` is the sampling rule (a test seam)."""

    regime: str
    k: int
    max_new_tokens: int
    eos_id: int | None = None
    warp: Warp = field(default_factory=Warp)
    seed: int | None = None
    trees: bool = False  # each round drafts a token tree of up to k tokens (greedy only)
    rule: ExactRule = EXACT

    def __post_init__(self):
        regime_flags(self.regime)
        if self.k < 0 or self.max_new_tokens < 0:
            raise ValueError(f"decoding: k={self.k} and max_new_tokens={self.max_new_tokens} must be >= 0")
        if self.trees and not self.warp.greedy:
            raise ValueError(f"decoding: token trees are greedy only; got temperature={self.warp.temperature}")

    @classmethod
    def of(
        cls,
        max_new_tokens: int,
        k: int,
        cached: bool,
        fastpath: bool = True,
        temperature: float = 0.0,
        top_k: int = 0,
        top_p: float = 1.0,
        **rest,
    ) -> DecodeOptions:
        """The options of speculative_generate's flags; `rest`: eos_id, seed, trees, rule."""
        warp = Warp(temperature, top_k, top_p)
        return cls(regime_name(cached, fastpath), k, max_new_tokens, warp=warp, **rest)

    @property
    def cached(self) -> bool:
        """Whether the regime keeps a KV cache."""
        return regime_flags(self.regime)[0]

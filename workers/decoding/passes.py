"""The shape of each regime's verifier pass, stated once: what a round drafting n tokens (or a tree of n nodes) after
`context` tokens feeds the verifier, and, the other way, which round a recorded pass was. No torch: the cost model,
replay's predictions, k = "auto" and the dashboard read it without a model.

A shape is `(fed, cached, kept)`: tokens fed, tokens already in the KV cache, logits rows kept (what
`Verifier.last_shape` records). A pass's *key* is `(kind, n, context)`:

- `kind`: "chain" or "tree" for a round's pass, "first" / "tree-first" for the pass that opens a generation where the
  regime has one (the cached prefill; cached-standard's first round over the whole prompt);
- `n`: drafted tokens (tree nodes) the pass verifies, canonical per regime (the paper's cached regime feeds one
  token both after a fast-path reject and for a one-token draft: both are n = 0);
- `context`: the tokens before the round (prompt + tokens generated so far).

| regime | round of n after context c | first pass |
|---|---|---|
| uncached | (c + n, 0, n + 1) | none |
| cached (the paper's) | (max(n, 1), c, max(n, 1)) | prefill (c, 0, 1) |
| cached-standard | (n + 1, c - 1, n + 1): the pending token + n | (c + n, 0, n + 1) |

Example:
    >>> PASSES["cached-standard"].shape(4, 60)
    (5, 59, 5)
    >>> PASSES["cached-standard"].key((5, 59, 5))
    ('chain', 4, 60)
    >>> PASSES["cached"].key((1, 60, 1)), PASSES["cached"].key((40, 0, 1))
    (('chain', 0, 60), ('first', 0, 40))
"""

from __future__ import annotations

from dataclasses import dataclass

Shape = tuple[int, int, int]  # (tokens fed, tokens cached, logits rows kept)
Key = tuple[str, int, int]  # (kind, n, context)
KINDS = ("chain", "tree", "first", "tree-first")


def kind_of(first: bool, tree: bool) -> str:
    """A pass's kind from whether it opens a generation and whether it verifies a token tree."""
    return ("tree-" if tree else "") + "first" if first else ("tree" if tree else "chain")


@dataclass(frozen=True)
class RegimePasses:
    """One regime's pass: its shape for a round of n after a context, and the inverse."""

    regime: str

    def shape(self, n: int, context: int, first: bool = False) -> Shape:
        """The pass of a round drafting n after `context` tokens (`first`: the generation's opening pass)."""
        if self.regime == "uncached":
            return (context + n, 0, n + 1)
        if self.regime == "cached":
            return (context, 0, 1) if first else (max(n, 1), context, max(n, 1))
        return (context + n, 0, n + 1) if first else (n + 1, context - 1, n + 1)

    def key(self, shape: Shape, tree: bool = False) -> Key:
        """(kind, n, context) of a recorded pass; `tree`: the generation verifies token trees."""
        fed, cached, kept = (int(v) for v in shape)
        if self.regime == "uncached":
            return (kind_of(False, tree), kept - 1, fed - kept + 1)
        if self.regime == "cached":
            if cached == 0:  # the prefill: causal, whatever the rounds draft
                return ("first", 0, fed)
            return (kind_of(False, tree), fed if fed > 1 else 0, cached)
        if cached == 0:
            return (kind_of(True, tree), kept - 1, fed - kept + 1)
        return (kind_of(False, tree), fed - 1, cached + 1)

    def widths(self, max_n: int) -> list[int]:
        """The distinct n of this regime's rounds up to max_n (the cached regime's n = 1 is its n = 0 pass)."""
        return [n for n in range(max_n + 1) if not (self.regime == "cached" and n == 1)]

    def first_widths(self, max_n: int) -> list[int]:
        """The n of this regime's opening pass: none uncached, 0 (the prefill) cached, every n cached-standard."""
        return {"uncached": [], "cached": [0]}.get(self.regime, list(range(max_n + 1)))


REGIMES = ("uncached", "cached", "cached-standard")
BANDS = ("plain", "k = 1", "k 2-4", "k 5+", "tree", "auto")  # pass-width bands of a coordinate
PASSES: dict[str, RegimePasses] = {r: RegimePasses(r) for r in REGIMES}


def regime_passes(regime: str) -> RegimePasses:
    """The regime's pass, or one line naming the regimes there are."""
    if regime not in PASSES:
        raise ValueError(f"regime {regime!r} is not accepted; give one of {', '.join(REGIMES)}")
    return PASSES[regime]


def width_band(strategy: str, k: int) -> str:
    """A coordinate's pass-width band: plain (k = 0), trees (`<base>-tree`), k = "auto" (`<base>-auto`), else by k."""
    if k == 0:
        return "plain"
    if "-tree" in strategy:
        return "tree"
    if strategy.endswith("-auto"):
        return "auto"
    return "k = 1" if k == 1 else "k 2-4" if k <= 4 else "k 5+"

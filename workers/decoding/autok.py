"""k = "auto": each round's draft length (or tree size) from the verifier's pass-cost curve and the running acceptance.

The paper's cost model (section 5.1): a pass that feeds n draft tokens costs c(n), and a round yields
1 + E[accepted | n] tokens, so the best length maximises (1 + E[accepted | n]) / c(n) (tokens per second; with
`optimise = "energy"` c is in joules). c(n) is measured once per verifier, device and regime
(`measure_pass_costs`) and cached as a JSON file (`cost_curve`), which the dashboard plots. E[accepted | n]:
- a chain: sum_{i=1..n} a^i, a being this generation's acceptance so far ((accepted + 1) / (judged + 2));
- a tree (best-first, `workers.drafts.trees`): the sum of the first n nodes' path probabilities, scaled by this
  generation's ratio of accepted tokens to the probabilities it was promised so far (the instance base's
  shares are its training text's, not the verifier's).
SuffixDecoding's adaptive length (k grows with the match length) is the baseline this replaces: here the length
follows the measured cost of a longer pass, so a verifier whose passes cost the same for 1 and 8 tokens (a GPU,
the uncached regime) drafts long, and one whose cost grows with every token (a CPU, cached) drafts short.

Without a power counter per pass length, the energy curve is the time curve times one mean power: the same
choice as speed (stated with the curve as `energy_from`).

Example:
    >>> auto = AutoLength(draft, costs=[0.030, 0.031, 0.033, 0.036, 0.040, 0.045])   # c(0..5), seconds
    >>> speculative_generate(verifier, auto, prompt_ids, 100, k=5, cached=True).tokens    # greedy, as always
"""

from __future__ import annotations

import logging
import statistics
import time
from collections.abc import Sequence
from pathlib import Path

from workers.costmodel import PassCostModel
from workers.decoding.costcurve import PassCosts, load_curves, save_curve, verifier_name
from workers.decoding.tokentree import TokenTree
from workers.drafts.base import Draft
from workers.verifier import Verifier

logger = logging.getLogger(__name__)

REPEATS = 3  # timed rounds over the lengths; the curve is the Theil-Sen line through them


def timed(verifier: Verifier, fn, *args) -> float:
    """Seconds of one call, between device syncs."""
    verifier.sync()
    t0 = time.perf_counter()
    fn(*args)
    verifier.sync()
    return time.perf_counter() - t0


def measure_pass_costs(
    verifier: Verifier, regime: str, context: Sequence[int], max_len: int, repeats: int = REPEATS
) -> PassCosts:
    """c(0..max_len) in `regime` after `context`, as the line through `repeats` timed passes per length (after one
    warm pass); the lengths are timed in turn, round after round, so a busy spell slows them all alike.

    uncached: a full forward over context + n; cached (the paper's): n tokens fed after the cached context (one
    for n = 0, the fast path's pass); cached-standard: the pending token + n. The line (a robust Theil-Sen fit, the
    paper's cost model is linear in the tokens fed) keeps one slow pass on a shared machine from bending the
    curve; the per-length medians are kept beside it (`measured`).
    """
    context = [int(t) for t in context]
    filler = (context * (max_len + 1))[: max_len + 1]  # real token ids; the cost does not depend on which

    def once(n: int) -> float:
        if regime == "uncached":
            return timed(verifier, verifier.logits, context + filler[:n], n + 1)
        verifier.prefill(context[:-1])
        fed = filler[: max(n, 1)] if regime == "cached" else context[-1:] + filler[:n]
        return timed(verifier, verifier.extend, fed, len(fed))

    once(max_len)
    samples = [(n, once(n)) for _ in range(repeats) for n in range(max_len + 1)]
    verifier.cache = None
    intercept, slope = theil_sen(samples)
    medians = tuple(statistics.median(t for m, t in samples if m == n) for n in range(max_len + 1))
    return PassCosts(
        verifier_name(verifier),
        str(verifier.device),
        regime,
        len(context),
        tuple(intercept + slope * n for n in range(max_len + 1)),
        measured=medians,
    )


def theil_sen(points: Sequence[tuple[float, float]]) -> tuple[float, float]:
    """(intercept, slope) of the Theil-Sen line: the median pairwise slope (never below 0), the median intercept."""
    slopes = [(y2 - y1) / (x2 - x1) for i, (x1, y1) in enumerate(points) for x2, y2 in points[i + 1 :] if x2 != x1]
    slope = max(0.0, statistics.median(slopes)) if slopes else 0.0
    return statistics.median(y - slope * x for x, y in points), slope


def cost_curve(
    verifier: Verifier, regime: str, context: Sequence[int], max_len: int, folder: Path | None = None
) -> PassCosts:
    """The cached curve of this verifier, device and regime, measured (and saved) the first time."""
    name, device = verifier_name(verifier), str(verifier.device)
    for costs in load_curves(folder):
        same = (costs.verifier, costs.device, costs.regime) == (name, device, regime)
        if same and len(costs.seconds) > max_len and costs.measured:  # a curve without `measured` predates the fit
            return costs
    costs = measure_pass_costs(verifier, regime, context, max_len)
    logger.info(
        "pass-cost curve %s %s %s: %s", name, device, regime, ", ".join(f"{s * 1e3:.1f}" for s in costs.seconds)
    )
    save_curve(costs, folder)
    return costs


def best_length(gains: Sequence[float], costs: PassCosts) -> int:
    """The n in 0..len(gains) maximising (1 + gains[:n] summed) / c(n); the shorter on ties."""
    best, best_rate, expected = 0, 1 / costs.cost(0), 1.0
    for n, g in enumerate(gains, start=1):
        expected += g
        rate = expected / costs.cost(n)
        if rate > best_rate:
            best, best_rate = n, rate
    return best


def tree_accepted(tree: TokenTree, new_tokens: Sequence[int]) -> int:
    """How many of a tree's nodes the verifier accepted, read off the tokens the context gained."""
    at, n = -1, 0
    for token in new_tokens:
        child = next((i for i in range(at + 1, len(tree)) if tree.parents[i] == at and tree.tokens[i] == token), None)
        if child is None:
            break
        at, n = child, n + 1
    return n


class AutoLength(Draft):
    """Wraps a draft: each round drafts the most and keeps the length (or tree prefix) the cost model picks."""

    def __init__(self, draft: Draft, costs: PassCosts):
        self.draft, self.costs = draft, costs
        self.name, self.bridged = f"{draft.name}-auto", getattr(draft, "bridged", False)
        self.chosen: list[int] = []  # per round, the length picked (for tests and logs)
        self.reset()

    def reset(self) -> None:
        """A new generation: the draft's state and the running acceptance restart."""
        self.draft.reset()
        self._accepted = self._judged = 0
        self._promised = 0.0
        self._last: tuple[int, TokenTree, tuple[float, ...]] | None = None
        self.chosen = []

    def _observe(self, context: Sequence[int]) -> None:
        """Learn from the previous round: its accepted nodes, read off how the context grew."""
        if self._last is None:
            return
        before, tree, scores = self._last
        self._last = None
        if len(context) <= before:
            return
        n = tree_accepted(tree, context[before:])
        self._accepted += n
        self._judged += n + (n < tree.depth)
        self._promised += sum(scores)

    def propose(self, context: Sequence[int], k: int) -> list[int]:
        """Up to k tokens, cut where a longer pass would cost more than it is expected to yield."""
        self._observe(context)
        tokens = [int(t) for t in self.draft.propose(context, k)[:k]]
        a = (self._accepted + 1) / (self._judged + 2)
        n = best_length([a**i for i in range(1, len(tokens) + 1)], self.costs)
        tree = TokenTree.chain(tokens[:n])
        self._last = (len(context), tree, tuple(a**i for i in range(1, n + 1)))
        self.chosen.append(n)
        return tokens[:n]

    def propose_tree(self, context: Sequence[int], budget: int) -> TokenTree:
        """The best-first tree's prefix of the size the cost model picks (a draft without trees: its chain)."""
        scored = getattr(self.draft, "scored_tree", None)
        if scored is None:
            return TokenTree.chain(self.propose(context, budget))
        self._observe(context)
        tree, scores = scored(context, budget)
        ratio = (self._accepted + 1) / (self._promised + 1)
        n = best_length([min(1.0, s * ratio) for s in scores], self.costs)
        self._last = (len(context), tree.truncated(n), scores[:n])
        self.chosen.append(n)
        return tree.truncated(n)


# Measured curves per (verifier, device, regime), kept for the process's life so that a worker measures each once
# (a measurement is many timed passes). `clear_curves` forgets them: a reloaded verifier, a test.
_CURVES: dict[tuple[str, str, str], PassCosts] = {}


def clear_curves() -> None:
    """Forget the measured curves `decoding_plan` keeps: the next k = "auto" cell measures (or loads) its own."""
    _CURVES.clear()


def curve_from_model(cost_model, regime: str, context: int, max_len: int) -> PassCosts:
    """c(0..max_len) of a regime's round after `context` tokens, from a pass-cost model (or its JSON): uncached, a
    full forward over context + n keeping n + 1 rows; cached (the paper's), n tokens fed after the cached context
    (one for n = 0, the fast path's pass); cached-standard, the pending token + n after context - 1."""
    model = cost_model if isinstance(cost_model, PassCostModel) else PassCostModel.from_json(cost_model)

    def cost(n: int) -> float:
        if regime == "uncached":
            return model.pass_seconds(context + n, 0, n + 1)
        if regime == "cached":
            return model.pass_seconds(max(n, 1), context, max(n, 1))
        return model.pass_seconds(n + 1, max(0, context - 1), n + 1)

    return PassCosts(model.verifier, model.device, regime, context, tuple(cost(n) for n in range(max_len + 1)))


def decoding_plan(
    verifier: Verifier | None,
    draft: Draft,
    options: dict,
    regime: str,
    prompt_ids: Sequence[int],
    k: int,
    cost_model=None,
) -> tuple[Draft, dict]:
    """The draft to run and speculative_generate's extra arguments for a strategy's options: token trees
    (`tree = N`), and k = "auto" (the draft wrapped in AutoLength over the regime's curve at this prompt's length,
    from `cost_model`, the experiment's `workers.costmodel.PassCostModel` or its JSON; without it, the verifier's
    curve measured once per process, `_CURVES`). A replay (no verifier) needs the model: the timed run's lengths come from the same one."""
    if not options.get("auto"):
        return draft, {"trees": bool(options.get("tree"))}
    if cost_model is not None:
        curve = curve_from_model(cost_model, regime, len(prompt_ids), max(k, 8))
        return AutoLength(draft, curve), {"trees": bool(options.get("tree"))}
    if verifier is None:
        raise ValueError('k = "auto" without a verifier needs its pass-cost curve (the experiment\'s cost model)')
    key = (verifier_name(verifier), str(verifier.device), regime)
    if key not in _CURVES or len(_CURVES[key].seconds) <= k:
        _CURVES[key] = cost_curve(verifier, regime, prompt_ids, max(k, 8))
    return AutoLength(draft, _CURVES[key]), {"trees": bool(options.get("tree"))}

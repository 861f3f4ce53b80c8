"""k = "auto": each round's draft length (or tree size) from the verifier's pass-cost curve and the running acceptance.

The paper's cost model (section 5.1): a round that drafts n tokens costs c(n), and yields 1 + E[accepted | n]
tokens, so the best length maximises (1 + E[accepted | n]) / c(n) (tokens per second; with `optimise = "energy"`
c is in joules). c(n) is read off the experiment's round-cost table (`workers.decoding.costmodel.RoundCosts.curve`, measured
once per verifier and device, stored with the experiment), at the prompt's length. E[accepted | n]:
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
from collections.abc import Sequence

from workers.decoding.costcurve import PassCosts, verifier_name
from workers.decoding.costmodel import RoundCosts
from workers.decoding.roundtimer import measure_round_costs
from workers.decoding.tokentree import TokenTree
from workers.interfaces import Draft
from workers.verifier import Verifier

logger = logging.getLogger(__name__)


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


# Tables measured per (verifier, device, regime) where no experiment's table is given, kept for the process's life so
# that a worker measures each once (a table is many timed rounds). `clear_curves` forgets them: a reloaded verifier,
# a test.
_TABLES: dict[tuple[str, str, str], RoundCosts] = {}


def clear_curves() -> None:
    """Forget the tables `decoding_plan` measured: the next k = "auto" cell without a table measures its own."""
    _TABLES.clear()


def decoding_plan(
    verifier: Verifier | None,
    draft: Draft,
    options: dict,
    regime: str,
    prompt_ids: Sequence[int],
    k: int,
    cost_model=None,
) -> tuple[Draft, dict]:
    """The draft to run and the decoding's extra options for a strategy's options: token trees (`tree = N`), and
    k = "auto" (the draft wrapped in AutoLength over the regime's curve at this prompt's length, from `cost_model`,
    the experiment's `workers.decoding.costmodel.RoundCosts` or its JSON; without it, a table of the verifier measured once per
    process, `_TABLES`). A replay (no verifier) needs the table: the timed run's lengths come from the same one."""
    trees = bool(options.get("tree"))
    if not options.get("auto"):
        return draft, {"trees": trees}
    if cost_model is not None:
        table = cost_model if isinstance(cost_model, RoundCosts) else RoundCosts.from_json(cost_model)
    elif verifier is None:
        raise ValueError('k = "auto" without a verifier needs its round-cost table (the experiment\'s cost model)')
    else:
        table = process_table(verifier, regime, prompt_ids, max(k, 8), trees)
    return AutoLength(draft, table.curve(regime, len(prompt_ids), max(k, 8), trees)), {"trees": trees}


def process_table(verifier: Verifier, regime: str, prompt_ids: Sequence[int], max_n: int, trees: bool) -> RoundCosts:
    """The verifier's table for one regime, measured the first time a process asks (`_TABLES`)."""
    key = (verifier_name(verifier), str(verifier.device), regime)
    table = _TABLES.get(key)
    if (
        table is None
        or max_n > max(table.widths(regime, "chain"), default=-1)
        or (trees and not table.widths(regime, "tree"))
    ):
        sizes = range(1, max_n + 1) if trees else ()
        table, _ = measure_round_costs(verifier, prompt_ids, max_n, tuple(sizes), (regime,), repeats=1)
        _TABLES[key] = table
    return table

"""How a verifier judges drafted tokens, greedy or sampled: the `GreedyJudge` (a token passes iff it is the
verifier's argmax, so the output is plain greedy decoding) and the `SamplingJudge` (speculative sampling by a rule
of `workers.decoding.sampling`, so the output is distributed as sampling from the verifier). The rounds
(`workers.decoding.regimes`) and their shapes ask a judge about each position and never look at logits themselves.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch

from workers.decoding.rounds import greedy_token, greedy_tokens
from workers.decoding.sampling import EXACT, ExactRule, Warp, make_generator, sample, warped_probs
from workers.interfaces import Draft, common_prefix_len


def accept_length(drafts: Sequence[int], targets: Sequence[int]) -> int:
    """Length of the longest prefix of `drafts` equal to the verifier's `targets`."""
    return common_prefix_len(drafts, targets)


Row = torch.Tensor  # a position's judging state: its logits (V,) when greedy, its distribution (V,) when sampled
QRows = list  # per drafted token: the distribution q (V,) it was sampled from, or None (a point mass)


class GreedyJudge:
    """Temperature 0: a position's row is the verifier's logits; a draft token passes iff it is the argmax."""

    def dist(self, logits: torch.Tensor) -> Row:
        """The row of one position from its logits (V,)."""
        return logits

    def known(self, row: Row) -> int | None:
        """The token this position will certainly get (greedy: always known)."""
        return greedy_token(row)

    def check(self, row: Row, token: int, q) -> bool:
        """Does the drafted token pass at this position?"""
        return token == greedy_token(row)

    def reject(self, row: Row, token: int, q) -> Row:
        """The position's row once `token` failed (greedy: unchanged, its argmax still stands)."""
        return row

    def pick(self, row: Row) -> int:
        """The verifier's own token at this position."""
        return greedy_token(row)

    def chain(self, logits: torch.Tensor, drafts: list[int], qs: QRows) -> tuple[int, Row | None]:
        """(n drafts accepted, row of the position after them or None) for logits (>= len(drafts), V)."""
        n = accept_length(drafts, greedy_tokens(logits))
        return n, logits[n] if n < len(logits) else None

    def propose(self, draft: Draft, context: Sequence[int], k: int, vocab_size: int) -> tuple[list[int], QRows]:
        """The draft's greedy guesses (no distributions)."""
        tokens = [int(t) for t in draft.propose(context, k)[:k]]
        return tokens, [None] * len(tokens)


@dataclass
class SamplingJudge:
    """Temperature > 0: rows are warped distributions and tokens pass by speculative sampling (`rule`)."""

    warp: Warp
    generator: torch.Generator
    rule: ExactRule = EXACT

    def dist(self, logits: torch.Tensor) -> Row:
        """The verifier's warped distribution (float64, CPU) at one position."""
        return warped_probs(logits, self.warp)

    def known(self, row: Row) -> int | None:
        """The token when the distribution is a point mass (e.g. top_k=1), else None."""
        return int(row.argmax()) if int(torch.count_nonzero(row)) == 1 else None

    def check(self, row: Row, token: int, q) -> bool:
        """Accept the drafted token by the rule (a random draw)."""
        return self.rule.accept(row, token, q, self.generator)

    def reject(self, row: Row, token: int, q) -> Row:
        """The residual distribution of the position once `token` is rejected."""
        return self.rule.residual(row, token, q)

    def pick(self, row: Row) -> int:
        """A token drawn from the row."""
        return sample(row, self.generator)

    def chain(self, logits: torch.Tensor, drafts: list[int], qs: QRows) -> tuple[int, Row | None]:
        """(n drafts accepted, row of the position after them or None): judged left to right, rows warped lazily."""
        for i, token in enumerate(drafts):
            row = self.dist(logits[i])
            if not self.check(row, token, qs[i]):
                return i, self.reject(row, token, qs[i])
        n = len(drafts)
        return n, self.dist(logits[n]) if n < len(logits) else None

    def propose(self, draft: Draft, context: Sequence[int], k: int, vocab_size: int) -> tuple[list[int], QRows]:
        """Sampled guesses with their q rows from a draft that has `propose_with_probs`, else point masses."""
        with_probs = getattr(draft, "propose_with_probs", None)
        if with_probs is None:
            tokens = [int(t) for t in draft.propose(context, k)[:k]]
            return tokens, [None] * len(tokens)
        tokens, q = with_probs(context, k, self.warp, self.generator, vocab_size=vocab_size)
        tokens = [int(t) for t in tokens[:k]]
        return tokens, [None] * len(tokens) if q is None else [fit_vocab(q[i], vocab_size) for i in range(len(tokens))]


def fit_vocab(q: torch.Tensor, vocab_size: int) -> torch.Tensor:
    """A draft's distribution (V_draft,) over the verifier's V ids: cut, or padded with zeros (float64, CPU).

    Cutting is exact only when q has no mass on ids >= V, which is why `propose_with_probs` gets vocab_size.
    """
    q = q.detach().to("cpu", torch.float64)[:vocab_size]
    return torch.nn.functional.pad(q, (0, vocab_size - len(q))) if len(q) < vocab_size else q


Judge = GreedyJudge | SamplingJudge


def make_judge(warp: Warp, seed: int | None, rule: ExactRule) -> tuple[Judge, int | None]:
    """The greedy judge at temperature 0, else a seeded sampling judge; with the seed used (None when greedy)."""
    if warp.greedy:
        return GreedyJudge(), None
    generator, used = make_generator(seed)
    return SamplingJudge(warp, generator, rule), used

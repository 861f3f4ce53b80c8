"""Replay: a greedy generation's rounds computed exactly from its prompt's greedy reference, without the verifier.

At temperature 0 a speculative generation emits exactly the verifier's greedy continuation, which the prompt's
reference cell stores. Every round is therefore fixed by the draft (given prompt + reference so far) and the
reference: the same decoding code (`workers.decoding.engine.generate`, every regime, chains and token trees,
adaptive length, `k = "auto"`) runs for real against `ReferenceVerifier`, a stand-in at the verifier seam
(`workers.decoding.seam`) whose greedy token after any
prefix of prompt + reference is the reference's next token. Off that path it answers `vocab_size`, an id no draft
can propose (drafts are cut at the vocabulary), so nothing off the path is ever accepted. The passes, drafted,
accepted and per-round lists come out as a timed generation's; only time and energy need the real verifier, and the
round-cost table (`workers.decoding.costmodel`) predicts them from the recorded pass shapes.

What replay refuses, in one line each: temperature > 0 (a sampled generation is not fixed by the reference), a draft
whose state outlives a generation (`suffix` with `remember_outputs`: its rounds depend on which generations ran
before it), and a reference that the replayed generation does not reproduce (`ReplayMismatch`, naming the round).

The worker's side (replay jobs, their drafts, comparing a timed generation's rounds with a replayed one's) is
`workers.replay`.

Example:
    >>> opts = DecodeOptions(regime="cached", k=5, max_new_tokens=100, eos_id=2)
    >>> res = replay_generate(draft, prompt_ids, reference, 49152, opts)      # any workers.drafts draft
    >>> res.tokens == tuple(reference)
    True
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from workers.decoding.engine import generate
from workers.decoding.options import DecodeOptions
from workers.decoding.records import GenerationResult
from workers.errors import GreenspecError
from workers.interfaces import Draft
from workers.replay.rounds import first_divergence


class ReplayError(GreenspecError):
    """A generation that cannot be replayed (sampled, or a draft with state across generations)."""


class ReplayMismatch(GreenspecError):
    """A replayed generation that does not reproduce its reference, or a timed one whose passes differ from replay's."""


def outlives_generation(draft: Draft) -> bool:
    """Whether a draft keeps state from one generation to the next (its rounds then depend on the run's order)."""
    inner = getattr(draft, "draft", None)  # wrappers (adaptive length, k = "auto") keep their draft here
    return bool(getattr(draft, "remember_outputs", False)) or (inner is not None and outlives_generation(inner))


class ReferenceVerifier:
    """A stand-in for `workers.verifier.Verifier` (a `workers.decoding.seam.VerifierLike`) whose greedy token after a prefix of `path` is the next one of it.

    It takes the same calls (uncached `logits`, `prefill`/`extend`/`crop` over a cache, token-tree `masked` passes
    and `keep_rows`) and records each pass's shape in `last_shape` as the real one does; its "cache" is the list of
    token ids fed. Logits are one-hot rows (uint8) over vocab_size + 1 ids, the last one being the off-path answer.
    """

    def __init__(self, path: Sequence[int], vocab_size: int):
        self.path = [int(t) for t in path]
        self.vocab_size = int(vocab_size)
        self.off_path = self.vocab_size  # no draft proposes it: off the reference path nothing is accepted
        self.device = torch.device("cpu")
        self.dtype = torch.float32
        self.cache: list[int] | None = None
        self.last_shape: tuple[int, int, int] = (0, 0, 0)

    def sync(self) -> None:
        """Nothing queued: the stand-in computes on the CPU at once."""

    @property
    def cached_len(self) -> int:
        """Tokens the cache holds (0 before prefill)."""
        return 0 if self.cache is None else len(self.cache)

    def _target(self, seq_len: int, on_path: bool) -> int:
        """The greedy token after a sequence of `seq_len` tokens that is (or is not) a prefix of the path."""
        return self.path[seq_len] if on_path and seq_len < len(self.path) else self.off_path

    def _one_hot(self, targets: Sequence[int]) -> torch.Tensor:
        # uint8, not float: a greedy judge only takes the argmax (replay refuses sampling), and a row of bytes is a
        # quarter of the memory to fill and scan over a 49k-id vocabulary: most of a replayed round's time
        logits = torch.zeros(len(targets), self.vocab_size + 1, dtype=torch.uint8)
        logits[torch.arange(len(targets)), torch.tensor(list(targets), dtype=torch.long)] = 1
        return logits

    def _linear(self, full: Sequence[int], n_new: int, keep: int) -> torch.Tensor:
        """Rows for the last `keep` (all `n_new` when 0) of the new tokens at the end of the causal sequence `full`."""
        n = len(full)
        match = 0
        while match < n and match < len(self.path) and full[match] == self.path[match]:
            match += 1
        rows = keep if 0 < keep < n_new else n_new
        return self._one_hot([self._target(j + 1, j + 1 <= match) for j in range(n - rows, n)])

    def _shape(self, fed: int, cached: int, keep: int) -> None:
        self.last_shape = (fed, cached, keep if 0 < keep < fed else fed)

    def logits(self, ids: Sequence[int], keep: int = 0) -> torch.Tensor:
        """Uncached: the rows of the last `keep` positions of `ids` (all when 0)."""
        ids = [int(t) for t in ids]
        self._shape(len(ids), 0, keep)
        return self._linear(ids, len(ids), keep)

    def prefill(self, ids: Sequence[int], keep: int = 0) -> torch.Tensor:
        """A fresh cache holding `ids`."""
        self.cache = []
        return self.extend(ids, keep)

    def extend(self, new_ids: Sequence[int], keep: int = 0) -> torch.Tensor:
        """`new_ids` after the cached tokens."""
        if self.cache is None:
            raise RuntimeError("ReferenceVerifier.extend before prefill")
        new_ids = [int(t) for t in new_ids]
        self._shape(len(new_ids), len(self.cache), keep)
        self.cache = self.cache + new_ids
        return self._linear(self.cache, len(new_ids), keep)

    def masked(
        self, ids: Sequence[int], positions: Sequence[int], mask: torch.Tensor, cache: str, keep: int = 0
    ) -> torch.Tensor:
        """A token-tree pass: each kept query's sequence is the keys its mask row lets it see, in order."""
        ids = [int(t) for t in ids]
        if cache == "extend" and self.cache is None:
            raise RuntimeError("ReferenceVerifier.masked(cache='extend') before prefill")
        prefix = self.cache if cache == "extend" else []
        self._shape(len(ids), len(prefix), keep)
        keys = prefix + ids
        rows = keep if 0 < keep < len(ids) else len(ids)
        seen = (mask[0, 0, -rows:] == 0).tolist()
        targets = []
        for row in seen:
            seq = [keys[c] for c, visible in enumerate(row) if visible]
            targets.append(self._target(len(seq), seq == self.path[: len(seq)]))
        if cache != "none":
            self.cache = keys
        return self._one_hot(targets)

    def keep_rows(self, n_prefix: int, rows: Sequence[int]) -> None:
        """Keep the cache's first `n_prefix` tokens, then only those at `rows`."""
        self.cache = self.cache[:n_prefix] + [self.cache[r] for r in rows]

    def crop(self, n_tokens: int) -> None:
        """Cut the cache back to its first `n_tokens` tokens."""
        if self.cache is not None:
            self.cache = self.cache[:n_tokens]


def replay_generate(
    draft: Draft, prompt_ids: Sequence[int], reference: Sequence[int], vocab_size: int, options: DecodeOptions
) -> GenerationResult:
    """The greedy generation of `draft` with `options` after `prompt_ids`, replayed against `reference` (the
    verifier's greedy new tokens for that prompt, as the reference cell stored them, over `vocab_size` ids); see the
    module doc."""
    if not options.warp.greedy:
        raise ReplayError(
            f"replay is greedy only: temperature {options.warp.temperature} > 0 is sampled; time it instead"
        )
    if outlives_generation(draft):
        raise ReplayError(
            f"draft {draft.name!r} keeps state across generations (remember_outputs), so its rounds depend on the "
            "order generations run in; time it instead"
        )
    prompt, reference = [int(t) for t in prompt_ids], [int(t) for t in reference]
    res = generate(ReferenceVerifier(prompt + reference, vocab_size), draft, prompt, options)
    expected = reference[: options.max_new_tokens]
    if list(res.tokens) != expected:
        at = first_divergence(res.tokens, expected)
        round_at = next((i for i, n in enumerate(_cumsum(res.tokens_per_step)) if n > (at or 0)), None)
        raise ReplayMismatch(
            f"replay of {draft.name!r} at k={options.k} {options.regime} left its reference at token {at} (round "
            f"{round_at}): the reference has {len(reference)} tokens for max_new_tokens={options.max_new_tokens}"
        )
    return res


def _cumsum(xs: Sequence[int]) -> list[int]:
    out, total = [], 0
    for x in xs:
        total += x
        out.append(total)
    return out

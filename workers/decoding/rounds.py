"""What every round shares: the running `Tally` of a generation, its timed verifier pass and draft call, the greedy
argmax; a finished tally freezes into a `GenerationResult` holding its `Decoded` (`workers.decoding.records`).

Every clock read follows a device sync (`verifier.sync()`), so a timer measures finished work; each pass is
counted as a step and its shape (tokens fed, tokens cached, rows kept) recorded for the round-cost table.

Example:
    >>> tally = Tally(k=3)
    >>> tally.record([7, 8, 9], n_accepted=2, eos_id=None, max_new_tokens=2)   # cut at the room left
    >>> tally.tokens, tally.accepted_per_step, tally.done(2)
    ([7, 8], [2], True)
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field, fields

import torch

from workers.decoding.records import DECODED_FIELDS, STOP_EOS, STOP_MAX, Decoded, GenerationResult
from workers.decoding.seam import VerifierLike


@dataclass
class Tally:
    """Running counts and timers of one generation (mutable; frozen into a GenerationResult at the end): the fields
    named as a `Decoded`'s (`TALLIED`) become its fields as they are."""

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

    def drafted_round(self, n: int, depth: int | None = None) -> None:
        """Count a round's drafted tokens (and, for a token tree, its depth)."""
        self.drafted += n
        self.drafted_per_step.append(n)
        if depth is not None:
            self.depth_per_step.append(depth)

    def freeze(
        self, wall_s: float, started_at: float, ended_at: float, bridged: bool, seed: int | None = None
    ) -> GenerationResult:
        """The immutable GenerationResult of this finished tally."""
        hist = [0] * (self.k + 1)
        for n in self.accepted_per_step:
            hist[n] += 1
        checked = [a for a, d in zip(self.accepted_per_step, self.drafted_per_step) if d > 0]
        decoded = Decoded(
            **{name: getattr(self, name) for name in TALLIED},
            accepted=sum(self.accepted_per_step),
            accept_hist=tuple(hist),
            wall_s=wall_s,
            started_at=started_at,
            ended_at=ended_at,
            bridged=bridged,
            first_checked=len(checked),
            first_accepted=sum(a > 0 for a in checked),
        )
        return GenerationResult(decoded, seed=seed, depth_per_step=tuple(self.depth_per_step))


# the tally's fields a `Decoded` holds as they are (tuples of its lists); freeze computes the rest
TALLIED = tuple(name for name in DECODED_FIELDS if name in {f.name for f in fields(Tally)})


def timed_pass(verifier: VerifierLike, tally: Tally, fn, *args) -> torch.Tensor:
    """Run one verifier forward pass `fn(*args)`, counted as a step and timed into tally.verify_s."""
    verifier.sync()
    t0 = time.perf_counter()
    logits = fn(*args)
    verifier.sync()
    tally.verify_s += time.perf_counter() - t0
    tally.steps += 1
    tally.passes.append(verifier.last_shape)
    return logits


def timed_draft(verifier: VerifierLike, tally: Tally, fn, *args):
    """Run one draft call `fn(*args)`, timed into tally.draft_s (a neural draft may share the verifier's device)."""
    verifier.sync()
    t0 = time.perf_counter()
    out = fn(*args)
    verifier.sync()
    tally.draft_s += time.perf_counter() - t0
    return out


def greedy_tokens(logits: torch.Tensor) -> list[int]:
    """Argmax token id of every position: (T, V) -> T ints. Replay's one-hot byte rows go through numpy, whose
    uint8 argmax is about 100x torch's (torch's was 85% of a replayed Gemma round, rows 262,145 wide); both take
    the first maximum, so the ids are the same."""
    if logits.dtype == torch.uint8 and logits.device.type == "cpu":
        return logits.numpy().argmax(axis=-1).tolist()
    return logits.argmax(dim=-1).tolist()


def greedy_token(row: torch.Tensor) -> int:
    """Argmax token id of one position's row (V,), as `greedy_tokens`."""
    if row.dtype == torch.uint8 and row.device.type == "cpu":
        return int(row.numpy().argmax())
    return int(row.argmax())

"""A generation's measured fields, declared once: `Decoded` (its tokens, rounds and times, as the decoding loop's
`Tally` freezes them or replay recomputes them), and `GenerationResult`, what `generate` returns, which holds one.

`workers.contracts.GenerationRecord` holds the same `Decoded` across the Ray boundary, and `storage.generation_row`
stores its fields as the `generations` columns of the same names. A record that holds a `Decoded` reads its fields
as its own (`result.tokens`, `record.accepted`); `replaced` changes them and the record's own fields in one call.
No torch: the driver and the storage import this module without a model.

Example:
    >>> decoded = Decoded(tokens=[5, 6], steps=2, drafted=3, accepted=1, accept_hist=(0, 1), accepted_per_step=(1,),
    ...                   tokens_per_step=(2,), wall_s=0.5, draft_s=0.1, verify_s=0.4, started_at=1.0, ended_at=1.5)
    >>> result = GenerationResult(decoded)
    >>> result.tokens, result.n_tokens, result.replaced(wall_s=0.25).wall_s
    ((5, 6), 2, 0.25)
"""

from __future__ import annotations

from dataclasses import dataclass, fields, replace

STOP_EOS = "eos"
STOP_MAX = "max_new_tokens"


@dataclass(frozen=True)
class Decoded:
    """One generation's tokens, rounds and times (seconds; epoch seconds for *_at); sequences are held as tuples.

    `steps` counts verifier forward passes (the cached prefill included); the *_per_step tuples are per round: in
    round i the first `accepted_per_step[i]` of its `tokens_per_step[i]` tokens came from the draft."""

    tokens: tuple[int, ...]  # new tokens only; an EOS that stopped generation is included, as HF generate does
    steps: int  # verifier forward passes
    drafted: int
    accepted: int
    accept_hist: tuple[int, ...]  # rounds by accepted draft tokens 0..k
    accepted_per_step: tuple[int, ...]  # per round: tokens taken from the draft
    tokens_per_step: tuple[int, ...]  # per round: new tokens (draft ones first)
    wall_s: float
    draft_s: float
    verify_s: float
    started_at: float  # time.time() at the start, for integrating the power trace over the window
    ended_at: float
    drafted_per_step: tuple[int, ...] = ()  # per round: tokens the draft proposed
    fastpath_rejects: int = 0  # cached: rounds whose k-token pass was skipped by the first-token check
    bridged: bool = False
    stopped: str = STOP_MAX
    first_checked: int | None = None  # rounds whose first draft token was judged (None: not counted)
    first_accepted: int | None = None  # ... and accepted: first-token acceptance = first_accepted / first_checked
    passes: tuple[tuple[int, int, int], ...] = ()  # per verifier pass: (tokens fed, tokens cached, rows kept)

    def __post_init__(self):
        for name in DECODED_FIELDS:  # a list given (a tally's, a test's) is held as a tuple: the record is frozen
            if isinstance(value := getattr(self, name), list):
                object.__setattr__(self, name, tuple(value))


DECODED_FIELDS = tuple(f.name for f in fields(Decoded))
_HELD = frozenset(DECODED_FIELDS)


class HoldsDecoded:
    """A frozen record holding a `Decoded` as `decoded`: its fields read as the record's own."""

    __slots__ = ()

    def __getattr__(self, name: str):
        if name in _HELD:  # only these: unpickling looks names up before `decoded` is set
            return getattr(self.decoded, name)
        raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")

    def replaced(self, **changes):
        """This record with `changes`, each to its own field or to its `Decoded`'s (`dataclasses.replace` both)."""
        held = {name: changes.pop(name) for name in list(changes) if name in _HELD}
        return replace(self, decoded=replace(self.decoded, **held) if held else self.decoded, **changes)


@dataclass(frozen=True)
class GenerationResult(HoldsDecoded):
    """One generation as `generate` returns it: its `Decoded` (read as its own: `result.tokens`, `result.accepted`,
    `result.wall_s`, ...), with the sampler's seed and the token trees' depths, which are not stored."""

    decoded: Decoded
    seed: int | None = None  # temperature > 0: the seed the sampling started from (reproduces the generation)
    depth_per_step: tuple[int, ...] = ()  # token trees: per round, the drafted tree's depth (its longest path)

    @property
    def n_tokens(self) -> int:
        """Number of new tokens."""
        return len(self.tokens)

    @property
    def path_acceptance(self) -> float:
        """Token trees: accepted tokens over the summed depths of the drafted trees (for a chain: the acceptance)."""
        depth = sum(self.depth_per_step) if self.depth_per_step else self.drafted
        return self.accepted / depth if depth else 0.0

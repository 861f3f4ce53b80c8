"""Whether two generations made the same rounds, without torch: the check a timed generation and its replay get,
and a generation's second timing (`storage.results.add_second_timing`) before it is paired as noise.

Example:
    >>> rounds_differ({"tokens_per_step": [2, 1]}, {"tokens_per_step": [2, 1]}) is None
    True
    >>> first_divergence([2, 1, 3], [2, 2, 3])
    1
"""

from __future__ import annotations

from collections.abc import Sequence

ROUND_LISTS = ("tokens_per_step", "accepted_per_step", "drafted_per_step")


def first_divergence(a: Sequence[int], b: Sequence[int]) -> int | None:
    """The first index where two per-round lists differ (their common length when one is a prefix), None if equal."""
    for i, (x, y) in enumerate(zip(a, b)):
        if x != y:
            return i
    return None if len(a) == len(b) else min(len(a), len(b))


def rounds_differ(timed, replayed) -> str | None:
    """None when a timed and a replayed generation (records or dicts of their per-round lists) made identical
    rounds; else one line naming the first round that differs (the reference and the verifier disagree there: fp16 on
    a GPU, a non-deterministic kernel). A list either side lacks is not compared."""

    def rounds(g, name):
        return list((g.get(name) if isinstance(g, dict) else getattr(g, name, None)) or [])

    for name in ROUND_LISTS:
        a, b = rounds(timed, name), rounds(replayed, name)
        if not a or not b:
            continue
        at = first_divergence(a, b)
        if at is not None:
            return (
                f"timed and replayed generations diverge at round {at} ({name}: timed {a[at : at + 1]}, replayed "
                f"{b[at : at + 1]}): the verifier's greedy tokens differ from its stored reference"
            )
    return None

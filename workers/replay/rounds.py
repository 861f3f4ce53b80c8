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


REPLAY = ("timed", "replayed", "the verifier's greedy tokens differ from its stored reference")
TWICE = ("first timing", "second timing", "the verifier's greedy tokens changed between its timings")


def rounds_differ(a, b, sides: tuple[str, str, str] = REPLAY) -> str | None:
    """None when two generations (records or dicts of their per-round lists) made identical rounds; else one line
    naming the first round that differs, each side by its name in `sides` (a's, b's, and why they can differ: by
    default a timed generation and its replay, whose reference and verifier disagree there: fp16 on a GPU, a
    non-deterministic kernel). A list either side lacks is not compared."""
    name_a, name_b, why = sides

    def rounds(g, name):
        return list((g.get(name) if isinstance(g, dict) else getattr(g, name, None)) or [])

    for name in ROUND_LISTS:
        x, y = rounds(a, name), rounds(b, name)
        if not x or not y:
            continue
        at = first_divergence(x, y)
        if at is not None:
            return (
                f"{name_a} and {name_b} generations diverge at round {at} ({name}: {name_a} {x[at : at + 1]}, "
                f"{name_b} {y[at : at + 1]}): {why}"
            )
    return None

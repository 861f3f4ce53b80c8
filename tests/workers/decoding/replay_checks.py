"""The comparison every replay test makes: a replayed generation has a real run's rounds, list for list."""

from __future__ import annotations

ROUND_FIELDS = (
    "tokens",
    "steps",
    "drafted",
    "accepted",
    "accept_hist",
    "accepted_per_step",
    "drafted_per_step",
    "tokens_per_step",
    "depth_per_step",
    "fastpath_rejects",
    "first_checked",
    "first_accepted",
    "stopped",
    "passes",
)


def assert_same_rounds(real, replayed, label=None) -> None:
    """Every count and per-round list of the two generations is equal (time fields are not compared)."""
    for name in ROUND_FIELDS:
        assert getattr(replayed, name) == getattr(real, name), (label, name)

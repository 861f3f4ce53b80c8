"""Families of verdicts corrected for multiplicity: Holm's step-down over one claim's or target's verdicts.

A family is one claim or target over tasks x regimes x k (`Check.family`, else its target). Reading 27 verdicts
each off its own 95% interval expects about 0.7 false "holds" by chance; Holm's step-down keeps the chance of any
false decisive verdict in the family at `rules.ALPHA` (one-sided 2.5%): the family's m testable verdicts are
ordered by their one-sided p (`analysis.checks.rules`), the i-th smallest (from 0) stands if p <= ALPHA / (m - i),
and from the first that does not, it and every later one are inconclusive. That equals widening each interval to
the one-sided level ALPHA / (m - i) in turn. A family of one is its 95% verdict. Verdicts that are no test ("not
testable here", "by construction") are left out of m.

Example:
    >>> [c.verdict for c in holm(checks)]  # two "holds" of a family of 27 with p 0.01 and 0.0001
    ['inconclusive', 'holds']
"""

from __future__ import annotations

import dataclasses

import pandas as pd

from analysis import stats
from analysis.checks.check import Check
from analysis.checks.rules import ALPHA

UNTESTED = (stats.NOT_TESTABLE, stats.BY_CONSTRUCTION)
DECISIVE = (stats.HOLDS, stats.FAILS, stats.TIE)


def family_of(c: Check) -> str:
    """The family a verdict belongs to: its `family`, else its target."""
    return c.family or c.target


def _p(c: Check) -> float:
    """A decisive verdict's p (0 for a count, which has no sampling error)."""
    return c.p if c.p == c.p else 0.0


def _step_down(members: list[Check]) -> dict[int, Check]:
    """Holm over one family's testable verdicts (by position in `members`): the corrected checks."""
    m = len(members)
    order = sorted((i for i, c in enumerate(members) if c.verdict in DECISIVE), key=lambda i: _p(members[i]))
    out, stopped = {}, False
    for rank, i in enumerate(order):
        c, level = members[i], ALPHA / (m - rank)
        stopped = stopped or _p(c) > level
        note = (
            f"; {c.verdict} at 95% alone, not after Holm (p {_p(c):.2g} > {level:.2g}, family of {m})"
            if stopped
            else ""
        )
        verdict = stats.INCONCLUSIVE if stopped else c.verdict
        out[i] = dataclasses.replace(c, verdict=verdict, detail=c.detail + note, before=c.verdict, family_size=m)
    return out


def holm(checks: list[Check]) -> list[Check]:
    """Every check with its family's Holm correction applied (order kept)."""
    out = list(checks)
    families: dict[str, list[int]] = {}
    for i, c in enumerate(checks):
        if c.verdict not in UNTESTED:
            families.setdefault(family_of(c), []).append(i)
    for positions in families.values():
        members = [checks[i] for i in positions]
        for j, c in _step_down(members).items():
            out[positions[j]] = c
        for j, c in enumerate(members):
            if c.verdict not in DECISIVE:
                out[positions[j]] = dataclasses.replace(c, family_size=len(members))
    return out


def families_text(checks: list[Check]) -> str:
    """One line per family of more than one verdict: its size, the correction, what it kept and what it changed."""
    rows = []
    for name, part in pd.DataFrame([(family_of(c), c.verdict, c.before, c.family_size) for c in checks]).groupby(
        0, sort=False
    ):
        m = int(part[3].max())
        if m < 2:
            continue
        counts = part[1].value_counts()
        changed = int(((part[2] != "") & (part[2] != part[1])).sum())
        kept = ", ".join(f"{int(counts[v])} {v}" for v in (*DECISIVE, stats.INCONCLUSIVE) if v in counts)
        rows.append(
            f"- {name}: {m} verdicts, Holm-Bonferroni at one-sided {ALPHA:.1%} family-wise; {kept}"
            + (f" ({changed} decisive at 95% alone made inconclusive)" if changed else "")
        )
    return "families corrected for multiplicity:\n" + "\n".join(rows) if rows else ""

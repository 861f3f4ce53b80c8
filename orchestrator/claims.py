"""The seed paper's findings, checked on a run's summary: each one holds or does not, with its numbers.

The paper (Mistral-7B verifying IGTree drafts) reports: each olifant instance base accepts most on its own domain
(the domain diagonal, Table 2); on its own domain an olifant base beats the in-session 4-gram; uncached speedups are
above 1; in the cached regime a draft breaks even near 20-25% first-token acceptance (§4.3); and uncached energy
ratios track the speedups (Table 3). `check_claims` reads them off `storage.queries.summary_frame` (one row per
strategy x task x k x regime) and returns `orchestrator.targets.Check` rows, so the demo, a test and the README
read the same verdicts.

An olifant strategy's *own domain* is the task named like its corpus (`olifant-pydoc` over corpus `pydoc`, task
`pydoc`), as in the paper's grid and the demo; strategies over a distilled corpus are not olifant bases here.

Example:
    >>> claims_table(check_claims(df, own_domains(spec), session_4gram(spec)))
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from orchestrator.targets import Check, _best, _rows

UNCACHED, CACHED = "uncached", "cached"
BREAK_EVEN = (0.20, 0.25)  # the paper's cached break-even, first-token acceptance
NEAR = 0.05  # "near": within 5 points of that range
TRACKS_R = 0.9  # energy ratios track speedups: Pearson r at least this ...
TRACKS_DEV = 0.10  # ... and the median |energy ratio / speedup - 1| at most this


def _instance_base_only(strategy) -> str | None:
    """The corpus of a strategy that drafts from one instance base alone at fixed length (an olifant base), else None."""
    reqs = list(strategy.options.requires().values())
    alone = len(reqs) == 1 and reqs[0].artifact == "ibase" and not strategy.entry.parts
    opts = strategy.options
    fixed = not (getattr(opts, "adaptive", False) or getattr(opts, "auto", False) or getattr(opts, "tree", None))
    return reqs[0].corpus if alone and fixed else None


def own_domains(spec) -> dict[str, str]:
    """olifant strategy -> the task of its own domain (the task named like its corpus-trained corpus)."""
    tasks = {t.name for t in spec.tasks}
    out = {}
    for s in spec.strategies:
        corpus = _instance_base_only(s)
        if corpus in tasks and not spec.corpus(corpus).distilled:
            out[s.name] = corpus
    return out


def session_4gram(spec) -> str | None:
    """The spec's first in-session 4-gram strategy: a fixed-length draft that needs no artifact, combines no other
    drafts, and has n-gram order `n = 4` (the paper's baseline); None if the spec has none."""
    for s in spec.strategies:
        if (
            s.entry.drafts
            and not s.entry.parts
            and not s.options.requires()
            and getattr(s.options, "n", None) == 4
            and not getattr(s.options, "adaptive", False)
        ):
            return s.name
    return None


def _acceptance(df: pd.DataFrame, strategy: str, task: str, regime: str = UNCACHED) -> float:
    """Mean acceptance of a strategy on a task in a regime over its k values (NaN if it did not run there)."""
    rows = _rows(df, strategy, task, regime)
    return float(rows["acceptance"].mean()) if len(rows) else float("nan")


def domain_diagonal(df: pd.DataFrame, own: dict[str, str]) -> list[Check]:
    """On each task, the olifant base of that domain accepts more (uncached) than every other olifant base."""
    out = []
    for strategy, task in sorted(own.items(), key=lambda kv: kv[1]):
        mine = _acceptance(df, strategy, task)
        others = {s: _acceptance(df, s, task) for s in own if s != strategy}
        others = {s: v for s, v in others.items() if v == v}
        ok = mine == mine and bool(others) and all(mine > v for v in others.values())
        detail = f"{strategy} {mine:.3f} vs " + ", ".join(f"{s} {v:.3f}" for s, v in sorted(others.items()))
        out.append(Check("domain diagonal: own base accepts most", task, UNCACHED, ok, detail))
    return out


def beats_ngram(df: pd.DataFrame, own: dict[str, str], ngram: str) -> list[Check]:
    """On its own domain, an olifant base accepts more than the in-session 4-gram strategy `ngram`, and is faster
    uncached."""
    out = []
    for strategy, task in sorted(own.items(), key=lambda kv: kv[1]):
        a, b = _acceptance(df, strategy, task), _acceptance(df, ngram, task)
        sa, sb = _best(df, strategy, task, UNCACHED), _best(df, ngram, task, UNCACHED)
        ok = a > b and sa > sb
        out.append(
            Check(
                f"{strategy} beats {ngram} on its domain",
                task,
                UNCACHED,
                ok,
                f"acceptance {a:.3f} vs {b:.3f}; speedup {sa:.2f} vs {sb:.2f}",
            )
        )
    return out


def uncached_speedups(df: pd.DataFrame, own: dict[str, str], noise: float) -> list[Check]:
    """Each olifant base's uncached speedup on its own domain is above 1 (the point estimate; `noise` is printed)."""
    out = []
    for strategy, task in sorted(own.items(), key=lambda kv: kv[1]):
        s = _best(df, strategy, task, UNCACHED)
        note = f" (within the {noise:.0%} timing noise of 1)" if abs(s - 1) < noise else ""
        out.append(Check(f"{strategy} uncached speedup > 1", task, UNCACHED, s > 1, f"{s:.2f}x{note}"))
    return out


def cached_break_even(df: pd.DataFrame) -> Check:
    """Where cached speedup crosses 1 as a function of first-token acceptance (a least-squares line over every drafted
    strategy, task and k): near the paper's 20-25%."""
    drafted = df[(df["regime"] == CACHED) & (df["k"] > 0)]  # k = 0: plain, which drafts nothing
    pts = drafted[["first_token_acceptance", "speedup"]].dropna()
    if len(pts) < 3 or pts["first_token_acceptance"].nunique() < 2:
        return Check("cached break-even near 20-25% first-token acceptance", "all", CACHED, False, "too few cells")
    slope, intercept = np.polyfit(pts["first_token_acceptance"], pts["speedup"], 1)
    above = pts[pts["speedup"] >= 1]
    seen = (
        f"; {len(above)} of {len(pts)} cells at speedup >= 1, the lowest first-token acceptance among them "
        f"{above['first_token_acceptance'].min():.2f}"
        if len(above)
        else f"; none of {len(pts)} cells reached 1"
    )
    span = f"first-token acceptance {pts['first_token_acceptance'].min():.2f}-{pts['first_token_acceptance'].max():.2f}"
    if slope <= 0:
        return Check(
            "cached break-even near 20-25% first-token acceptance",
            "all",
            CACHED,
            False,
            f"speedup does not rise with acceptance (slope {slope:.2f}); {span}{seen}",
        )
    x = (1 - intercept) / slope
    ok = BREAK_EVEN[0] - NEAR <= x <= BREAK_EVEN[1] + NEAR
    return Check(
        "cached break-even near 20-25% first-token acceptance",
        "all",
        CACHED,
        ok,
        f"line crosses 1.0 at {x:.2f} (speedup = {intercept:.2f} + {slope:.2f} x acceptance); {span}{seen}",
    )


def energy_tracks_speedup(df: pd.DataFrame) -> Check:
    """Uncached energy ratios (plain J / strategy J) follow the speedups: correlated, and close in size."""
    drafted = df[(df["regime"] == UNCACHED) & (df["k"] > 0)]  # k = 0: plain, which drafts nothing
    pts = drafted[["energy_ratio", "speedup"]].dropna()
    if len(pts) < 3:
        return Check("uncached energy ratio tracks speedup", "all", UNCACHED, False, "too few cells with energy")
    r = float(np.corrcoef(pts["energy_ratio"], pts["speedup"])[0, 1])
    dev = float((pts["energy_ratio"] / pts["speedup"] - 1).abs().median())
    source = "measured" if "power_measured" in df and df["power_measured"].fillna(False).all() else "estimated power"
    return Check(
        "uncached energy ratio tracks speedup",
        "all",
        UNCACHED,
        r >= TRACKS_R and dev <= TRACKS_DEV,
        f"Pearson r {r:.3f}, median |energy ratio / speedup - 1| {dev:.1%} over {len(pts)} cells ({source})",
    )


def check_claims(df: pd.DataFrame, own: dict[str, str], ngram: str | None = None, noise: float = 0.05) -> list[Check]:
    """Every claim of the paper this run can check: the olifant claims need olifant bases (`own`, from
    `own_domains`), the comparison with the in-session 4-gram its strategy (`ngram`, from `session_4gram`)."""
    out = domain_diagonal(df, own) if len(own) > 1 else []
    if ngram is not None:
        out += beats_ngram(df, own, ngram)
    return out + uncached_speedups(df, own, noise) + [cached_break_even(df), energy_tracks_speedup(df)]


def claims_table(checks: list[Check]) -> str:
    """The verdicts as a Markdown table, each claim marked "holds" or "does not hold"."""
    rows = [
        {
            "claim": c.target,
            "task": c.task,
            "regime": c.regime,
            "verdict": "holds" if c.ok else "does not hold",
            "numbers": c.detail,
        }
        for c in checks
    ]
    return pd.DataFrame(rows).to_markdown(index=False)

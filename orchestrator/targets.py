"""The targets of the future-work strategies (distilled, hybrid, adaptive), checked on a results summary.

Pure pandas over `storage.queries.summary_frame` (one row per strategy x task x k x regime): each check
returns `Check` rows, so a test, the README and a notebook read the same verdicts. Speedups are compared
within `noise` (relative), since tokens/s of a few short generations on a shared CPU vary by a few percent.

Example:
    >>> [c for c in check_all(df, ["pydoc", "shakespeare"]) if not c.ok]
    []
"""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

NOISE = 0.05  # relative: two runs of the same cells differ by about this much here


@dataclass(frozen=True)
class Check:
    """One verdict: which target, where, whether it holds, and the numbers behind it."""

    target: str
    task: str
    regime: str
    ok: bool
    detail: str


def _rows(df: pd.DataFrame, strategy: str, task: str, regime: str) -> pd.DataFrame:
    return df[(df["strategy"] == strategy) & (df["task"] == task) & (df["regime"] == regime)]


def distilled_acceptance(df: pd.DataFrame, domain: str) -> list[Check]:
    """distilled-<d> has a higher acceptance than olifant-<d> on task <d> at every k and regime."""
    out = []
    for regime in sorted(df["regime"].unique()):
        d = _rows(df, f"distilled-{domain}", domain, regime).set_index("k")["acceptance"]
        o = _rows(df, f"olifant-{domain}", domain, regime).set_index("k")["acceptance"]
        ks = sorted(set(d.index) & set(o.index))
        ok = bool(ks) and all(d[k] > o[k] for k in ks)
        detail = ", ".join(f"k={k}: {d[k]:.2f} vs {o[k]:.2f}" for k in ks) or "missing"
        out.append(Check("distilled acceptance > olifant", domain, regime, ok, detail))
    return out


def _best(df: pd.DataFrame, strategy: str, task: str, regime: str) -> float:
    s = _rows(df, strategy, task, regime)["speedup"]
    return float(s.max()) if len(s) else float("nan")


def hybrid_speedup(df: pd.DataFrame, domain: str, parts: tuple[str, ...] = ("ngram",),
                   noise: float = NOISE) -> list[Check]:
    """Uncached: hybrid's best speedup >= the better part's best (within noise); cached: never below plain."""
    out = []
    strategies = (f"olifant-{domain}", *parts)
    for task in sorted(df["task"].unique()):
        if not len(_rows(df, f"hybrid-{domain}", task, "uncached")):
            continue
        h = _best(df, f"hybrid-{domain}", task, "uncached")
        best_part = max(_best(df, p, task, "uncached") for p in strategies)
        out.append(Check("hybrid >= better part (uncached)", task, "uncached", h >= best_part * (1 - noise),
                         f"{h:.2f} vs {best_part:.2f}"))
        cached = _rows(df, f"hybrid-{domain}", task, "cached")["speedup"]
        if len(cached):
            out.append(Check("hybrid never loses to plain (cached)", task, "cached",
                             bool((cached >= 1 - noise).all()), ", ".join(f"{v:.2f}" for v in cached)))
    return out


def adaptive_speedup(df: pd.DataFrame, base: str, adaptive: str, noise: float = NOISE) -> list[Check]:
    """The adaptive strategy's speedup >= its base's at the best fixed k, per task and regime (within noise)."""
    out = []
    for (task, regime), part in df[df["strategy"] == adaptive].groupby(["task", "regime"]):
        a = float(part["speedup"].max())
        b = _best(df, base, task, regime)
        out.append(Check(f"{adaptive} >= {base} at its best k", task, regime, a >= b * (1 - noise),
                         f"{a:.2f} vs {b:.2f}"))
    return out


def exact_match(df: pd.DataFrame) -> list[Check]:
    """Every strategy's output equals plain greedy (exact match 1.0) in every cell of the summary."""
    bad = df[df["exact_match"] < 1.0]
    return [Check("exact match 1.0", "all", "all", bad.empty,
                  "everywhere" if bad.empty else ", ".join(sorted(set(bad["strategy"]))))]


def check_all(df: pd.DataFrame, domains: list[str]) -> list[Check]:
    """Every target for these domains."""
    out = exact_match(df)
    for d in domains:
        out += distilled_acceptance(df, d) + hybrid_speedup(df, d)
        out += adaptive_speedup(df, f"hybrid-{d}", f"hybrid-{d}-adaptive")
    return out


def checks_table(checks: list[Check]) -> str:
    """The verdicts as a Markdown table."""
    return pd.DataFrame([c.__dict__ for c in checks]).to_markdown(index=False)

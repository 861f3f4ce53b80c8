"""The demo tables of docs/demo.md and BENCHMARKS.md, from the database a `greenspec demo` run left.

Usage: python -m bench.demo_tables [DB_URL] [EXPERIMENT]   (default: sqlite:///greenspec.db, demo)

Prints, as Markdown: per regime, acceptance / speedup of every strategy on every task (docs/demo.md's "Demo results");
plain greedy's tokens/s and J per 100 tokens; and one row per strategy x task x k x regime with first-token
acceptance, tokens per pass, tokens/s, draft share and energy (BENCHMARKS.md). Nothing is measured here: every
figure is `greenspec export`'s, read back from the run.
"""

from __future__ import annotations

import sys

import pandas as pd

from orchestrator.run.spec import REGIMES


def strategy_order(df: pd.DataFrame) -> list[str]:
    """Session drafts first, then the corpus drafts grouped by kind, plain left out."""
    kinds = ("ngram", "lookup", "suffix", "neural", "olifant-", "rest-", "distilled-", "hybrid-")
    names = sorted(set(df["strategy"]) - {"plain"})
    return sorted(names, key=lambda s: (next((i for i, k in enumerate(kinds) if s.startswith(k)), len(kinds)), s))


TABLE_K = 5  # the regime tables' k for chains (a tree's k is its budget, k = "auto"'s its longest round)


def one_measure(df: pd.DataFrame) -> pd.DataFrame:
    """One row per coordinate: the replayed one where a coordinate was both replayed and timed (every prompt)."""
    if "measure" not in df:
        return df
    rank = df["measure"].map({"replay": 0}).fillna(1)
    keys = ["strategy", "task", "k", "regime", "temperature"]
    return df.assign(_rank=rank).sort_values("_rank").drop_duplicates(keys).drop(columns="_rank")


def at_table_k(df: pd.DataFrame) -> pd.DataFrame:
    """Each strategy's rows at the k nearest TABLE_K it ran (its only k for plain, trees and k = "auto")."""
    gap = (df["k"] - TABLE_K).abs()
    return df[gap == gap.groupby(df["strategy"]).transform("min")]


def _interval(x: pd.Series, name: str, fmt: str) -> str:
    lo, hi = x.get(f"{name}_lo"), x.get(f"{name}_hi")
    if lo is None or pd.isna(lo) or pd.isna(hi):
        return ""
    return f" [{lo:{fmt}}, {hi:{fmt}}]"


def regime_table(df: pd.DataFrame, regime: str, tasks: list[str]) -> str:
    """strategy x task: "acceptance / speedup [95% interval]" in one regime (blank where a strategy did not run)."""
    part = at_table_k(one_measure(df[df["regime"] == regime]))
    rows = []
    for s in strategy_order(part):
        row = {"strategy": s}
        for t in tasks:
            x = part[(part["strategy"] == s) & (part["task"] == t)]
            if len(x):
                r = x.iloc[0]
                row[t] = f"{r['acceptance']:.2f} / {r['speedup']:.2f}x{_interval(r, 'speedup', '.2f')}"
            else:
                row[t] = ""
        rows.append(row)
    return pd.DataFrame(rows).to_markdown(index=False)


def plain_table(df: pd.DataFrame) -> str:
    """Plain greedy per task and regime: the speedups' denominators."""
    cols = ["task", "regime", "measure", "tokens_per_s", "j_per_100_tokens", "mean_power_w"]
    plain = df[df["strategy"] == "plain"][[c for c in cols if c in df]]
    return plain.sort_values([c for c in ("task", "regime", "measure") if c in plain]).to_markdown(
        index=False, floatfmt=".1f"
    )


def cells_table(df: pd.DataFrame) -> str:
    """One row per drafted cell, the columns a reader compares drafts by."""
    cols = [
        "strategy",
        "task",
        "regime",
        "k",
        "acceptance",
        "first_token_acceptance",
        "mean_accepted_tokens",
        "tokens_per_s",
        "speedup",
        "draft_share",
        "j_per_100_tokens",
        "energy_ratio",
    ]
    df = one_measure(df)
    out = df[df["strategy"] != "plain"][cols].copy()
    out["strategy"] = pd.Categorical(out["strategy"], strategy_order(df), ordered=True)
    out = out.sort_values(["strategy", "task", "regime"]).rename(
        columns={
            "first_token_acceptance": "first-token acc.",
            "mean_accepted_tokens": "tokens/pass",
            "draft_share": "draft share",
            "j_per_100_tokens": "J/100 tok",
            "energy_ratio": "energy ratio",
        }
    )
    return out.to_markdown(index=False, floatfmt=".2f")


def main(argv: list[str]) -> int:
    from analysis.summary import summary_frame
    from storage.db import open_db

    url = argv[0] if argv else "sqlite:///greenspec.db"
    experiment = argv[1] if len(argv) > 1 else "demo"
    _, Session = open_db(url, migrate=False)
    with Session() as s:
        df = summary_frame(s, experiment)
    tasks = list(dict.fromkeys(df["task"]))
    for regime in (r for r in REGIMES if r in set(df["regime"])):
        print(f"\n{regime}: acceptance / speedup [95% interval over prompts]\n\n{regime_table(df, regime, tasks)}")
    print(f"\nplain greedy\n\n{plain_table(df)}\n\nevery drafted cell\n\n{cells_table(df)}")
    print(f"\nexact match: min {df['exact_match'].min():.2f} over {len(df)} cells")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

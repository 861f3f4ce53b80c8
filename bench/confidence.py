"""Benchmark: how well each IGTree confidence predicts that the instance base's guess is right.

Adaptive drafting stops at the first guess whose confidence is below a threshold, so the confidence should rank
right guesses above wrong ones. For each demo domain an IGTree (window 4, gain ratio) is trained on the train
split (Mistral tokenizer) and queried at every position of the held-out test split: is its guess the real next
token? The table gives each confidence's ROC AUC (0.5: no better than chance) and, at a few thresholds, the share
of guesses kept and the accuracy of those kept. Ground truth is the corpus's next token, not a verifier's (a
proxy: the verifier's greedy text is what a draft must match), so this ranks the scores, not the drafts. One row
per domain, each confidence figure given for the three confidences in turn.

Usage: python -m bench confidence [--quick]     (--quick: 5,000 test positions per domain)
"""

from __future__ import annotations

import sys
import tempfile
import time

import numpy as np
import pandas as pd

WINDOW = 4
THRESHOLDS = (0.3, 0.5, 0.7)
CONFIDENCES = ("depth / window", "majority share", "depth x share")


def _documents(path, tokenizer) -> list[list[int]]:
    docs = [d for d in path.read_text().split("\n\n") if d.strip()]
    return tokenizer(docs, add_special_tokens=False).input_ids


def _windows(docs: list[list[int]]) -> tuple[np.ndarray, np.ndarray]:
    """Every (left-padded context, next token) pair of the documents; PAD is 0."""
    from workers.igtree.counting import PAD

    xs, ys = [], []
    for doc in docs:
        padded = np.array([PAD] * WINDOW + list(doc), dtype=np.int64)
        xs.append(np.lib.stride_tricks.sliding_window_view(padded[:-1], WINDOW))
        ys.append(padded[WINDOW:])
    return np.concatenate(xs), np.concatenate(ys)


def roc_auc(score: np.ndarray, right: np.ndarray) -> float:
    """ROC AUC of `score` for the boolean `right` (Mann-Whitney with average ranks for ties)."""
    ranks = pd.Series(score).rank(method="average").to_numpy()
    pos, neg = int(right.sum()), int((~right).sum())
    return float((ranks[right].sum() - pos * (pos + 1) / 2) / (pos * neg)) if pos and neg else float("nan")


def measure(domain: str, train_path, test_path, tokenizer, max_test: int) -> list[dict]:
    """One row per confidence: AUC, and kept share / accuracy of kept at each threshold."""
    from workers.igtree import IGTree

    x, y = _windows(_documents(train_path, tokenizer))
    t0 = time.perf_counter()
    tree = IGTree.fit(x, y)
    fit_s = time.perf_counter() - t0
    xt, yt = _windows(_documents(test_path, tokenizer))
    xt, yt = xt[:max_test], yt[:max_test]
    scored = [tree.lookup_scored(list(row)) for row in xt]
    right = np.array([s[0] for s in scored]) == yt
    depth = np.array([s[1] for s in scored]) / WINDOW
    share = np.array([s[2] for s in scored])
    rows = []
    for name, score in zip(CONFIDENCES, (depth, share, depth * share)):
        row = {
            "domain": domain,
            "train tokens": len(y),
            "test positions": len(yt),
            "guess right": right.mean(),
            "confidence": name,
            "AUC": roc_auc(score, right),
            "fit s": fit_s,
        }
        for th in THRESHOLDS:
            kept = score >= th
            row[f"kept @{th}"] = kept.mean()
            row[f"right of kept @{th}"] = right[kept].mean() if kept.any() else float("nan")
        rows.append(row)
    return rows


def run(quick: bool = False) -> str:
    """The Markdown section."""
    from orchestrator.run.demo_corpora import write_demo_corpora
    from workers.models.tokenizer import load_tokenizer

    tokenizer = load_tokenizer("mistral")
    with tempfile.TemporaryDirectory() as tmp:
        corpora = write_demo_corpora(tmp)
        rows = [
            r
            for name, c in sorted(corpora.items())
            for r in measure(name, c.train_path, c.test_path, tokenizer, 5_000 if quick else 20_000)
        ]
    return render(pd.DataFrame(rows))


def render(df: pd.DataFrame) -> str:
    """The section from measure's rows: one row per domain, each confidence column "depth / share / depth x share"."""
    from tabulate import tabulate

    scored = ["AUC"] + [c for c in df.columns if c.startswith(("kept", "right of"))]
    rows = []
    for domain, g in df.groupby("domain", sort=False):
        g = g.set_index("confidence").loc[list(CONFIDENCES)]
        first = g.iloc[0]
        sizes = [f"{first['train tokens']:,}", f"{first['test positions']:,}"]
        sizes += [f"{first['guess right']:.3g}", f"{first['fit s']:.3g}"]
        rows.append([domain, *sizes, *(" / ".join(f"{v:.3f}" for v in g[c]) for c in scored)])
    head = ["domain", "train tokens", "test positions", "guess right", "fit s", *scored]
    return "\n".join(
        [
            "## Which IGTree confidence predicts a right guess (`bench/confidence.py`)",
            "",
            "An IGTree per demo domain (train split, window 4), queried at every held-out test position; `right`: its "
            "guess is the corpus's next token. AUC 0.5 is chance. Ground truth is the corpus, not a verifier (a proxy "
            "for acceptance). From `AUC` on, each cell gives the three confidences in turn: the match depth over the "
            "window, the majority share, their product; `kept @t`: the share of guesses whose confidence is at "
            "least t.",
            "",
            tabulate(rows, headers=head, tablefmt="github", disable_numparse=True),
            "",
        ]
    )


if __name__ == "__main__":
    print(run(quick="--quick" in sys.argv))

"""Benchmark: how well the round-cost table (`workers.decoding.costmodel.RoundCosts`) predicts real generations, per regime and
width band, against the machine's own timing noise.

On a real verifier (fp32, CPU): the table is measured as the accelerator worker measures it (`measure_round_costs`:
every regime, widths 0..8 and a token tree of 8, the grid's contexts, interleaved repeats) and a small grid is timed
in full: one cell per width band (plain, prompt lookup at k = 1 and at 4, ngram at 8, lookup's chain as a tree of
8) over six prompts (the first 50 words of Python's documentation topics) in each regime, after a warm-up of each
cell, in a run's paired order (prompt by prompt, every regime and cell of one prompt back to back, so a slow spell
of the machine falls on every band alike). The grid is timed twice, minutes apart; table and grid take turns as in a
run: the first pass in six parts (a prompt each), two table repeats before each part, and the table is built from
those twelve repeats (a table's repeats minutes apart differ as a shared machine's speed does: spread over the first
pass's minutes, they meet the same spells of the machine as the generations they predict); the second pass times the
same generations again for the noise only, as a run's generations timed twice do.
The prediction is the table's seconds for the generation's recorded passes plus its draft's measured seconds (what a
replayed generation gets; replay makes the same passes, `tests/workers/decoding/test_replay.py`).

The machine's pace (`workers.decoding.roundtimer.pace_seconds`, one fixed decoding step) is timed by each table
measurement and before every generation, as a run's validation records it (`storage.validation`).

Per regime and width band: |predicted / measured - 1| of tokens/s against the first timed run (median, p90), the
median signed error (bias, > 0 predicted too fast) with its 95% interval over generations, the error with each timing set at the table's pace (paced), the
noise (|t2 / t1 - 1| / sqrt 2 between the two passes: what an exact predictor would show against one timing), the
table's own error and whether it is within the noise, per regime the Spearman of the strategies' speedups over
plain, predicted against measured (and the second pass's against the first's: how well a repeat timing of the
same generations ranks them, a yardstick from the noise), and the error and bias of a table from the same rounds at each row's two end
contexts only (whether the contexts between them help). One table, the verifiers side by side in each cell. The load average before and
after says how busy the machine was.

Usage: python -m bench costmodel [--quick]   (both verifiers, SmolLM2-135M then Gemma 3 270M, 6 prompts x 100 new
tokens, the paper's length; --quick: SmolLM2 alone, 2 prompts x 16 new tokens, not recorded)
       python -m bench.costmodel [--smollm] [--gemma] [--quick] [--turns N]   (print the section of the verifiers
       named; --turns: the first pass over the grid in N parts, two table repeats before each, 6 by default)
"""

from __future__ import annotations

import math
import os
import sys
import time

import numpy as np
import pandas as pd

TREE = 8
# one cell per width band (plain, k = 1, k 2-4, k 5+, tree) of the two session drafts: more prompts per band
# within the same time, and coordinates whose speedups differ by more than the noise (the same k with ngram and with
# lookup make nearly the same passes, so their order is a coin flip the Spearman would count). Replayed over the
# grid's prompts and predicted by a table, every cell is 2.4% or more from every other in every regime of both
# verifiers (the cached regime's k = 1 aside: it makes plain's passes); timed, ngram at k = 1 and lookup's tree of 8
# tied in SmolLM2's standard scheme (1.53x both), where lookup at k = 1 replayed 5% below the tree (timed, 2.7%:
# BENCHMARKS.md)
CELLS = (
    ("plain", {}, 0, False),
    ("lookup", {"max_ngram": 3}, 1, False),
    ("lookup", {"max_ngram": 3}, 4, False),
    ("ngram", {"n": 3}, 8, False),
    ("lookup", {"max_ngram": 3}, TREE, True),
)
PROMPTS = 6


def prompts(n: int, words: int = 50) -> list[str]:
    """The first `words` words of `n` of Python's documentation topics (real technical English, offline)."""
    from pydoc_data.topics import topics

    texts = [" ".join(topics[key].split()[:words]) for key in sorted(topics)]
    return [t for t in texts if len(t.split()) == words][::7][:n]


def cells() -> list[tuple[str, dict, int, bool]]:
    """(draft, options, k, tree) of the timed grid: one cell per width band."""
    return list(CELLS)


def grid(prompts: int) -> list[tuple[str, int, int]]:
    """(regime, cell index, prompt) of one pass, in a run's paired order with the regimes inside it: prompt by
    prompt, every regime and cell of one prompt back to back, so that a slow spell of the machine falls on every
    regime and band alike instead of on the few whose block it meets."""
    from workers.decoding import REGIMES

    return [(regime, c, i) for i in range(prompts) for regime in REGIMES for c in range(len(cells()))]


def warm_grid(verifier, prompt_ids, n_new: int) -> None:
    """One untimed warm-up of every regime x cell (kernels, caches, allocators on each cell's own path)."""
    from workers.decoding import REGIMES, DecodeOptions, warmup
    from workers.drafts import make_draft

    for regime in REGIMES:
        for name, options, k, tree in cells():
            warmup(verifier, make_draft(name, **options), prompt_ids[0], DecodeOptions(regime, k, n_new, trees=tree))


def timed_pass(verifier, prompt_ids, n_new: int, order, progress) -> list:
    """The generations of `order` ((regime, cell, prompt) each), each timed once after the machine's pace."""
    from workers.decoding import DecodeOptions, generate
    from workers.decoding.roundtimer import pace_seconds
    from workers.drafts import make_draft

    out = []
    for regime, c, i in order:
        name, options, k, tree = cells()[c]
        pace = pace_seconds(verifier)
        decode = DecodeOptions(regime, k, n_new, trees=tree)
        out.append((regime, c, i, pace, generate(verifier, make_draft(name, **options), prompt_ids[i], decode)))
        progress()
    return out


TURNS = 6  # the first pass over the grid in this many parts, two table repeats measured before each part


def generations(verifier, prompt_ids, n_new: int, max_context: int, min_context: int, turns: int = TURNS):
    """The table and the grid measured in turn: the first pass over the grid in `turns` parts (prompts in order), two
    table repeats before each part, so that the table's repeats are spread over the minutes of the timings it
    predicts; then a second pass times the same generations minutes later, with no table turns (its difference from
    the first is the noise an exact predictor would show). One row per regime x cell x prompt: both runs and the
    prediction of the table from all its repeats for the first run's passes; (rows, table, rounds timed, seconds in
    the table, seconds in the grid)."""
    from workers.decoding.costmodel import build_table, pace_ratios, predict_generation
    from workers.decoding.passes import width_band
    from workers.decoding.roundtimer import measure_round_costs

    order = grid(len(prompt_ids))
    parts = [order[len(order) * t // turns : len(order) * (t + 1) // turns] for t in range(turns)]
    total, count, t0 = 2 * len(order), [0], time.perf_counter()

    def progress():  # the rate over the generations so far (the table's seconds apart)
        count[0] += 1
        spent = time.perf_counter() - t0 - table_s
        eta = spent / count[0] * (total - count[0])
        print(f"  {count[0]}/{total} generations, {spent:.0f} s, at most about {eta:.0f} s left", file=sys.stderr)

    samples, table_s, paces, timed = [], 0.0, [], {1: [], 2: []}
    warm_grid(verifier, prompt_ids, n_new)
    for run in (1, 2):
        for part in parts:
            if run == 1:  # the table's turns among the timings it predicts, as a run's fall among its first timings
                t = time.perf_counter()
                turn, more = measure_round_costs(
                    verifier, prompt_ids[0], 8, (TREE,), max_context=max_context, min_context=min_context, repeats=2
                )
                samples += more
                paces += turn.meta["pace_runs"]
                table_s += time.perf_counter() - t
            timed[run] += timed_pass(verifier, prompt_ids, n_new, part, progress)
    table = build_table("bench", "cpu", samples, {"pace_s": float(np.median(paces))})
    ends = build_table("bench", "cpu", end_contexts(samples), table.meta)
    ratios = pace_ratios([r[3] for r in timed[1]], table.meta["pace_s"])
    rows = []
    for (regime, c, i, _, first), (*_, second), ratio in zip(timed[1], timed[2], ratios):
        name, _, k, tree = cells()[c]
        strategy = f"{name}-tree" if tree else name
        rows.append(
            {
                "regime": regime,
                "strategy": strategy,
                "k": k,
                "band": width_band(strategy, k),
                "prompt": i,
                "n_tokens": first.n_tokens,
                "wall_s": first.wall_s,
                "second_s": second.wall_s,
                "pace": ratio,
                "predicted_s": predict_generation(table, regime, first.passes, first.draft_s, tree),
                "ends_s": predict_generation(ends, regime, first.passes, first.draft_s, tree),
            }
        )
    return pd.DataFrame(rows), table, len(samples), table_s, time.perf_counter() - t0 - table_s


def end_contexts(samples: list) -> list:
    """The samples of each row's shortest and longest context only: the table a span under 4x got from 2 contexts,
    from the same timed rounds, so the two tables differ by the contexts between the ends alone."""
    by: dict[tuple, set[int]] = {}
    for regime, kind, n, context, _ in samples:
        by.setdefault((regime, kind, n), set()).add(int(context))
    return [s for s in samples if int(s[3]) in (min(by[s[:3]]), max(by[s[:3]]))]


def speedups(df: pd.DataFrame, wall: str) -> pd.Series:
    """Each (strategy, k)'s speedup over plain in one regime: ratio of sums over the same prompts."""
    sums = df.groupby(["strategy", "k"])[["n_tokens", wall]].sum()
    rate = sums["n_tokens"] / sums[wall]
    return (rate / rate.loc[("plain", 0)]).drop(("plain", 0))


def error_table(df: pd.DataFrame) -> pd.DataFrame:
    """Per regime (band "all") and width band: pairs, median and p90 error, bias with its 95% interval over
    generations, paced error, noise, the table's own error and the verdict; per regime the Spearman of the
    predicted speedups and that of the second pass's, each against the first pass's."""
    from analysis.model_error import median_interval
    from workers.decoding.costmodel import error_summary, noise_verdict, spearman, table_error

    df = df.assign(
        bias=df["wall_s"] / df["predicted_s"] - 1,
        ends=df["wall_s"] / df["ends_s"] - 1,
        paced=(df["wall_s"] / df["pace"] / df["predicted_s"] - 1).abs(),
        noise=(df["second_s"] / df["wall_s"] - 1).abs() / math.sqrt(2),
    )
    rows = []
    for regime, g in df.groupby("regime", sort=False):
        rho = spearman(speedups(g, "wall_s").to_numpy(), speedups(g, "predicted_s").to_numpy())
        again = spearman(speedups(g, "wall_s").to_numpy(), speedups(g, "second_s").to_numpy())
        for band, b in [("all", g), *g.groupby("band", sort=False)]:
            med, p90 = error_summary(b["bias"].abs())
            bias, (lo, hi) = float(np.median(b["bias"])), median_interval(b["bias"].to_numpy())
            row = {"regime": regime, "band": band, "pairs": len(b), "median error": med, "p90 error": p90}
            row |= {"median (p90) error": f"{med:.3f} ({p90:.3f})", "bias": bias}
            row |= {"bias [95% CI]": f"{bias:+.3f} [{lo:+.3f}, {hi:+.3f}]", "paced error": float(np.median(b["paced"]))}
            row |= {"noise": float(np.median(b["noise"]))}
            ends = float(np.median(b["ends"]))
            row["2 contexts: error (bias)"] = f"{float(np.median(b['ends'].abs())):.3f} ({ends:+.3f})"
            row["table's own error"] = table_error(med, row["noise"])
            row["within noise"] = noise_verdict(b["bias"], b["noise"], paired=True)
            rows.append(
                row | {"Spearman": rho if band == "all" else math.nan, SECOND: again if band == "all" else math.nan}
            )
    return pd.DataFrame(rows)


VERIFIERS = ("smollm2-135m", "gemma3-270m")
SECOND = "Spearman, t2 vs t1"  # the measured speedups' own rank agreement between the two passes
SHOWN = (
    "pairs",
    "median (p90) error",
    "bias [95% CI]",
    "paced error",
    "noise",
    "table's own error",
    "within noise",
    "Spearman",
    SECOND,
    "2 contexts: error (bias)",
)


def run(quick: bool = False, verifiers: tuple[str, ...] = VERIFIERS, turns: int = TURNS) -> str:
    """The Markdown section: one table, the verifiers side by side (--quick: SmolLM2 alone, 2 prompts x 16 new
    tokens)."""
    measured = [verifier_section(name, quick, turns) for name in (verifiers[:1] if quick else verifiers)]
    return render(measured)


def render(measured: list[tuple[str, str, pd.DataFrame]]) -> str:
    """The section from each verifier's (name, setup paragraph, error table)."""
    legend = (
        f"Each cell: {' / '.join(name for name, *_ in measured)}. error = |predicted / measured - 1| of tokens/s "
        "against the first timed run, its median and p90; bias its median signed value (> 0: predicted too fast) with a 95% "
        "bootstrap interval over generations; paced error: with each "
        "timing set at the table's pace; noise |t2 / t1 - 1| / sqrt 2 between the two passes (an exact predictor's "
        "error against one timing); the table's own error: sqrt(median error^2 - noise^2), what the noise does not "
        "explain; within noise: yes where the table's own error <= noise and |bias| <= 3%, else no where the "
        "generations show the miss (its 95% bootstrap interval clear of the noise, or of +-3%), unresolved where they "
        "cannot tell it from an exact table's luck; Spearman (per regime) of the "
        "speedups over plain, predicted against measured; t2 vs t1: the same for the second pass's speedups against the "
        "first's (how a repeat timing ranks them: where the noise alone leaves the ranks); 2 contexts: the median error and bias of a table built from "
        "the same timed rounds at each row's shortest and longest context only (what a narrow span got from 2)."
    )
    setups = " ".join(f"{name}: {setup}" for name, setup, _ in measured)
    return "\n".join(
        [
            "## Round-cost table: predicted against measured (`bench/costmodel.py`)",
            "",
            f"{setups} {legend}",
            "",
            side_by_side([table for *_, table in measured]),
        ]
    )


def side_by_side(tables: list[pd.DataFrame]) -> str:
    """One Markdown row per regime and band of the first table, each SHOWN column's values over the tables joined
    "a / b" ("-" where a table lacks the row or the value; empty where every value is NaN, as the bands' Spearman)."""
    from tabulate import tabulate

    def cell(v) -> str:
        if isinstance(v, str):
            return v
        if isinstance(v, (int, np.integer)):
            return str(v)
        return "" if v != v else f"{v:.3f}"

    keyed = [t.set_index(["regime", "band"]) for t in tables]
    rows = []
    for key in tables[0][["regime", "band"]].itertuples(index=False, name=None):
        values = [[cell(t.loc[key, col]) if key in t.index else "-" for t in keyed] for col in SHOWN]
        rows.append([*key, *(" / ".join(x or "-" for x in v) if any(v) else "" for v in values)])
    return tabulate(rows, headers=["regime", "band", *SHOWN], tablefmt="github", disable_numparse=True)


def verifier_section(name: str, quick: bool, turns: int = TURNS) -> tuple[str, str, pd.DataFrame]:
    """One verifier's table measured, its grid timed twice and predicted: (name, setup paragraph, error table)."""
    import torch

    from workers.models.tokenizer import load_tokenizer
    from workers.verifier import load_verifier

    n_prompts, n_new = (2, 16) if quick else (PROMPTS, 100)
    # the threads a replayed run's accelerator worker takes (`worker_threads`: one core left to the CPU workers)
    torch.set_num_threads(max(1, (os.cpu_count() or 1) - 1))
    verifier = load_verifier(name, dtype="float32", device="cpu")
    tok = load_tokenizer(name)
    prompt_ids = [list(tok(p).input_ids) for p in prompts(n_prompts)]
    lo, hi = min(map(len, prompt_ids)), max(map(len, prompt_ids)) + n_new
    load = os.getloadavg()[0]
    gens, table, rounds, measure_s, timed_s = generations(verifier, prompt_ids, n_new, hi, lo, turns)
    load = f"load average {load:.1f} before, {os.getloadavg()[0]:.1f} after"
    noise = ", ".join(f"{r} {v:.1%}" for r, v in table.noise.items())
    setup = (
        f"fp32, CPU, {torch.get_num_threads()} torch threads. The table: {rounds} timed rounds (every regime, "
        f"widths 0-8 and a tree of {TREE}, contexts {lo}-{hi} tokens, {2 * turns} repeats) in {measure_s:.0f} s; its "
        f"repeats' own spread {noise}. The grid: {len(gens)} generations ({n_prompts} prompts x {n_new} new "
        f"tokens; one cell per width band: plain, prompt lookup at k = 1 and at 4, ngram at 8, lookup as a tree "
        f"of {TREE}), "
        f"prompt by prompt, each timed in two passes over the grid, {timed_s:.0f} s; two table repeats before each of "
        f"the first pass's {turns} parts (prompts in order), the second pass for the noise only; "
        f"{load}."
    )
    return name, setup, error_table(gens)


def main(argv: list[str]) -> int:
    """`python -m bench.costmodel [--smollm] [--gemma] [--quick] [--turns N]`: print the section (not recorded); a bad
    option is refused by argparse (exit 2) before anything is timed."""
    import argparse

    def parts(text: str) -> int:
        if not text.isdigit() or int(text) < 1:
            raise argparse.ArgumentTypeError(f"needs a whole number of parts per pass, at least 1; got {text!r}")
        return int(text)

    parser = argparse.ArgumentParser(prog="python -m bench.costmodel")
    parser.add_argument("--smollm", action="store_true", help="SmolLM2-135M")
    parser.add_argument("--gemma", action="store_true", help="Gemma 3 270M")
    parser.add_argument("--quick", action="store_true", help="2 prompts x 16 new tokens, the first verifier only")
    parser.add_argument(
        "--turns", type=parts, default=TURNS, help=f"the first pass over the grid in N parts (default {TURNS})"
    )
    args = parser.parse_args(argv)
    picked = tuple(v for v, on in zip(VERIFIERS, (args.smollm, args.gemma)) if on) or VERIFIERS
    print(run(quick=args.quick, verifiers=picked, turns=args.turns))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

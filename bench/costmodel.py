"""Benchmark: how well the pass-cost model (`workers.costmodel`) predicts real passes and real generations.

On SmolLM2-135M (fp32, CPU): the model is measured as the accelerator worker measures it (the design grid, three
interleaved rounds), then
- held-out passes: shapes off the design grid (uncached forwards, prefills, cached extends at other context
  lengths and sizes), timed in three interleaved rounds, predicted from their shape;
- real generations: plain and ngram (k = 4) over a few prompts (the first 50 words of Python's own documentation
  topics) in each regime, timed twice after a warm-up; the prediction is the model's seconds for the generation's
  recorded passes plus its draft's measured seconds (what a replayed generation gets). The timing noise is the
  same generation's two timed runs against each other, the floor any prediction is held to.

Errors are |predicted / measured - 1| of seconds (passes) or of tokens/s (generations).

Usage: python -m bench costmodel [--quick]     (--quick: 8 new tokens, one round per held-out shape)
"""

from __future__ import annotations

import random
import sys
import time

import numpy as np
import pandas as pd

K = 4
STRATEGIES = (("plain", {}), ("ngram", {"n": 3}))


def prompts(n: int, words: int = 50) -> list[str]:
    """The first `words` words of `n` of Python's documentation topics (real technical English, offline)."""
    from pydoc_data.topics import topics

    texts = [" ".join(topics[key].split()[:words]) for key in sorted(topics)]
    return [t for t in texts if len(t.split()) == words][::7][:n]


def held_out(max_fed: int, max_context: int, n: int, seed: int = 0):
    """`n` pass shapes per kind, drawn off the design grid's lengths."""
    from workers.costmodel import DesignPoint, design

    rng = random.Random(seed)
    grid = {(p.kind, p.context, p.n) for p in design(max_fed, max_context)}
    out: list[DesignPoint] = []
    while len(out) < 3 * n:
        kind = ("uncached", "prefill", "extend")[len(out) // n]
        c, m = rng.randint(10, max_context), rng.randint(2, max_fed)
        p = DesignPoint(kind, c, 1 if kind == "prefill" else min(m, c))
        if (p.kind, p.context, p.n) not in grid and p not in out:
            out.append(p)
    return out


def pass_errors(verifier, model, tokens, points, repeats: int) -> pd.DataFrame:
    """Per kind of held-out pass: the median and p90 error of the model against each shape's median time."""
    from workers.costmodel import error_summary, medians, time_points

    kinds = {p.shape: p.kind for p in points}
    samples = time_points(verifier, tokens, points, repeats=repeats)
    rows = []
    by_shape = medians(samples)
    for kind in ("uncached", "prefill", "extend"):
        errs = [abs(model.pass_seconds(*sh) / t - 1) for sh, t in by_shape.items() if kinds.get(sh) == kind]
        ms = [t * 1e3 for sh, t in by_shape.items() if kinds.get(sh) == kind]
        med, p90 = error_summary(errs)
        rows.append(
            {
                "passes": kind,
                "shapes": len(errs),
                "ms (range)": f"{min(ms):.0f}-{max(ms):.0f}",
                "median error": med,
                "p90 error": p90,
            }
        )
    return pd.DataFrame(rows)


def generations(verifier, model, prompt_ids, n_new: int) -> pd.DataFrame:
    """One row per strategy x regime x prompt: measured (two timed runs) and predicted wall seconds."""
    from workers.costmodel import predict_generation
    from workers.decoding import REGIMES, DecodeOptions, generate, warmup
    from workers.drafts import make_draft

    rows = []
    for regime in REGIMES:
        for name, options in STRATEGIES:
            draft = make_draft(name, **options)
            decode = DecodeOptions(regime, K if name != "plain" else 0, n_new)
            warmup(verifier, draft, prompt_ids[0], decode)
            for i, p in enumerate(prompt_ids):
                runs = [generate(verifier, draft, p, decode) for _ in range(2)]
                best = min(runs, key=lambda r: r.wall_s)
                rows.append(
                    {
                        "regime": regime,
                        "strategy": name,
                        "prompt": i,
                        "n_tokens": best.n_tokens,
                        "passes": len(best.passes),
                        "wall_s": best.wall_s,
                        "other_wall_s": max(r.wall_s for r in runs),
                        "predicted_s": predict_generation(model, best.passes, best.draft_s),
                    }
                )
    return pd.DataFrame(rows)


def generation_table(df: pd.DataFrame) -> pd.DataFrame:
    """Per regime: prediction error of tokens/s, the timing noise, and ngram's speedup measured and predicted."""
    from workers.costmodel import error_summary, tokens_per_s_errors

    rows = []
    for regime, g in df.groupby("regime", sort=False):
        med, p90 = error_summary(tokens_per_s_errors(g["predicted_s"], g["wall_s"]))
        noise, _ = error_summary(tokens_per_s_errors(g["other_wall_s"], g["wall_s"]))
        tps = g.groupby("strategy")[["n_tokens", "wall_s", "predicted_s"]].sum()
        speed = {
            c: (tps.loc["ngram", "n_tokens"] / tps.loc["ngram", c])
            / (tps.loc["plain", "n_tokens"] / tps.loc["plain", c])
            for c in ("wall_s", "predicted_s")
        }
        rows.append(
            {
                "regime": regime,
                "generations": len(g),
                "median error": med,
                "p90 error": p90,
                "timing noise (median)": noise,
                "ngram speedup measured": speed["wall_s"],
                "ngram speedup predicted": speed["predicted_s"],
            }
        )
    return pd.DataFrame(rows)


def run(quick: bool = False) -> str:
    """The Markdown section."""
    import torch

    from workers.costmodel import measure_pass_costs, medians
    from workers.tokenizer import load_tokenizer
    from workers.verifier import load_verifier

    n_prompts, n_new = (2, 8) if quick else (2, 16)
    torch.set_num_threads(1)  # shared cores: one thread per process keeps a pass from waiting on a descheduled one
    verifier = load_verifier("smollm2-135m", dtype="float32", device="cpu")
    tok = load_tokenizer("smollm2-135m")
    prompt_ids = [list(tok(p).input_ids) for p in prompts(n_prompts)]
    max_context = max(len(p) for p in prompt_ids) + n_new + K + 1
    t0 = time.perf_counter()
    model, samples = measure_pass_costs(verifier, prompt_ids[0], max_fed=17, max_context=max_context, budget_s=60)
    measure_s = time.perf_counter() - t0
    fit_err = np.median([abs(model.pass_seconds(*sh) / t - 1) for sh, t in medians(samples).items()])
    tokens = (prompt_ids[0] * 4)[: max_context + 17]
    passes = pass_errors(verifier, model, tokens, held_out(17, max_context, 2 if quick else 4), 1 if quick else 3)
    gens = generations(verifier, model, prompt_ids, n_new)
    coef = ", ".join(f"{k} {v * 1e3:.4g} ms" for k, v in model.coefficients.items())
    return "\n".join(
        [
            "## Pass-cost model: predicted against measured (`bench/costmodel.py`)",
            "",
            f"SmolLM2-135M (fp32, CPU, {torch.get_num_threads()} torch thread per process). The model measured over "
            f"{len(medians(samples))} pass shapes (contexts up to {max_context} tokens, {len(samples)} timed passes) "
            f"in {measure_s:.1f} s; coefficients per unit: {coef}; median error on its own shapes {fit_err:.3f}.",
            "",
            "Held-out passes (shapes off the design grid, median of three interleaved rounds):",
            "",
            passes.to_markdown(index=False, floatfmt=".3f"),
            "",
            f"Timed generations ({n_prompts} prompts x {n_new} new tokens, plain and ngram k = {K}, the faster of two "
            "timed runs; predicted = the model's seconds for the generation's passes + its draft seconds). Error: "
            "|predicted / measured - 1| of tokens/s; timing noise: the slower run against the faster.",
            "",
            generation_table(gens).to_markdown(index=False, floatfmt=".3f"),
            "",
        ]
    )


if __name__ == "__main__":
    print(run(quick="--quick" in sys.argv))

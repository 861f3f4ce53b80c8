"""Benchmark: the speculative decoding engine on CPU, both regimes, against plain decoding in the same run.

The verifier is a random-weights Mistral (~20M parameters, fp32, the real 32000-token vocabulary). Drafts:
`ngram` (in-session; the random verifier falls into loops, which it learns), `olifant`
(an IGTree fitted on the verifier's own greedy outputs: acceptance near 100%) and `olifant-75` (the same with
one training target in four replaced by a random token: partial acceptance). Per draft, k and regime:
speedup over plain (plain measured first, same prompts), draft + bookkeeping time as a share of the wall time
(goal <= 2%), and the measured speedup against the ideal one implied by the passes the run made (MAL) and the
verifier's measured cost of a 1-position vs a k-position pass (goal >= 90%). Warm-up runs are excluded.
"""

from __future__ import annotations

import statistics
import time

import numpy as np
import torch

from workers.decoding import GenerationResult, greedy_reference, speculative_generate, warmup
from workers.drafts import make_draft
from workers.igtree import IGTree
from workers.metrics import acceptance_rate, mal, mean_accepted_tokens
from workers.tokenizer import load_tokenizer
from workers.verifier import Verifier

PROMPTS = (
    "To be, or not to be, that is the question: whether 'tis nobler in the mind to suffer the slings",
    "The quick brown fox jumps over the lazy dog, and the dog, being lazy, does not chase the fox at all",
    "In the beginning the Universe was created. This has made a lot of people very angry and been widely",
    "It is a truth universally acknowledged, that a single man in possession of a good fortune, must be",
)


def build_verifier(seed: int = 0) -> Verifier:
    """A random-weights Mistral with the Mistral vocabulary (~20M parameters), fp32 on CPU."""
    from transformers import MistralConfig, MistralForCausalLM

    torch.manual_seed(seed)
    cfg = MistralConfig(vocab_size=32000, hidden_size=256, intermediate_size=768, num_hidden_layers=4,
                        num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=1024)
    return Verifier(MistralForCausalLM(cfg).eval())


def fitted_tree(prompts: list[list[int]], refs: list[list[int]], corrupt_every: int = 0, seed: int = 0) -> IGTree:
    """An IGTree on the verifier's own prompt + greedy continuations (every n-th target randomised if asked)."""
    rng = np.random.default_rng(seed)
    contexts, targets = [], []
    for p, r in zip(prompts, refs):
        windows = np.lib.stride_tricks.sliding_window_view(np.array(p + r), 5)
        contexts.append(windows[:, :4])
        targets.append(windows[:, 4].copy())
    x, y = np.concatenate(contexts), np.concatenate(targets)
    if corrupt_every:
        y[::corrupt_every] = rng.integers(3, 32000, size=len(y[::corrupt_every]))
    return IGTree.fit(x, y)


def pass_costs(verifier: Verifier, prompt: list[int], context: list[int], ks: list[int], reps: int) -> dict:
    """Fastest seconds of one pass feeding n positions after `context`, per (cached, n); (True, 0): the prefill."""
    costs = {}
    for n in range(1, max(ks) + 2):
        extra = list(range(100, 100 + n))
        times = []
        verifier.prefill(context)
        for _ in range(reps):
            verifier.sync()
            t0 = time.perf_counter()
            verifier.extend(extra)
            verifier.sync()
            times.append(time.perf_counter() - t0)
            verifier.crop(len(context))
        costs[(True, n)] = min(times)
        costs[(False, n)] = min(_timed_calls(verifier.logits, (context + extra, n), reps))
    costs[(True, 0)] = min(_timed_calls(verifier.prefill, (prompt, 1), reps))
    return costs


def _timed_calls(fn, args: tuple, reps: int) -> list[float]:
    """Wall seconds of `reps` calls of fn(*args)."""
    out = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn(*args)
        out.append(time.perf_counter() - t0)
    return out


def pass_sizes(res: GenerationResult, cached: bool) -> list[int]:
    """Positions fed by each verifier pass of a run (cached: the prefill as 0, then 1 or the drafts' count)."""
    if not cached:
        return [d + 1 for d in res.drafted_per_step]  # context + drafts, k+1 predictions kept
    sizes = [0] + [d if a > 0 else 1 for d, a in zip(res.drafted_per_step, res.accepted_per_step)]
    return sizes[: res.steps]  # the last round of a generation may skip its pass


def ideal_seconds(res: GenerationResult, cached: bool, costs: dict) -> float:
    """Verifier-only seconds of this run's passes, from the measured cost of each pass size."""
    return sum(costs[(cached, n)] for n in pass_sizes(res, cached))


def run_config(verifier, draft, prompts, n_new, k, cached, repeats) -> list[GenerationResult]:
    """Warm up, then per prompt the fastest of `repeats` timed generations (the least disturbed on shared cores)."""
    warmup(verifier, draft, prompts[0], k, cached)
    runs = [[speculative_generate(verifier, draft, p, n_new, k, cached) for p in prompts] for _ in range(repeats)]
    return [min(per_prompt, key=lambda r: r.wall_s) for per_prompt in zip(*runs)]


def row(name, k, cached, results, plain, costs) -> list:
    """One table row: acceptance, MAL, speedups measured and ideal, overhead share."""
    wall = sum(r.wall_s for r in results)
    accepted, drafted = sum(r.accepted for r in results), sum(r.drafted for r in results)
    steps, n_tok = sum(r.steps for r in results), sum(r.n_tokens for r in results)
    measured = sum(r.wall_s for r in plain) / wall
    ideal = sum(ideal_seconds(r, cached, costs) for r in plain) / sum(ideal_seconds(r, cached, costs) for r in results)
    overhead = statistics.fmean((r.wall_s - r.verify_s) / r.wall_s for r in results)
    draft_share = statistics.fmean(r.draft_s / r.wall_s for r in results)
    return [name, k, "cached" if cached else "uncached", f"{acceptance_rate(accepted, drafted):.2f}",
            f"{mal(accepted, steps):.2f}", f"{mean_accepted_tokens(n_tok, steps):.2f}", f"{wall / n_tok * 1e3:.2f}",
            f"{measured:.2f}x", f"{ideal:.2f}x", f"{measured / ideal:.0%}", f"{overhead:.1%}", f"{draft_share:.1%}"]


def run(quick: bool = False) -> str:
    """Measure every draft x k x regime against plain, side by side; return a Markdown section."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # the tiny verifier is fastest, and steadiest on shared cores, on one thread
    try:
        return _run(quick)
    finally:
        torch.set_num_threads(threads)


def _run(quick: bool) -> str:
    """The measurement behind `run`."""
    tok = load_tokenizer("mistral")
    verifier = build_verifier()
    n_new, ks, repeats = (24, [3, 8], 2) if quick else (48, [3, 5, 8], 3)
    prompts = [tok(p).input_ids for p in PROMPTS[: 2 if quick else 4]]
    refs = [greedy_reference(verifier, p, n_new) for p in prompts]
    drafts = {"ngram": make_draft("ngram", n=4), "olifant": make_draft("olifant", ibase=fitted_tree(prompts, refs)),
              "olifant-75": make_draft("olifant", ibase=fitted_tree(prompts, refs, corrupt_every=4))}
    mid = prompts[0] + refs[0][: n_new // 2]  # costs at the mean context length of a generation
    costs = pass_costs(verifier, prompts[0], mid, ks, reps=5 if quick else 10)
    plain_draft = make_draft("plain")
    rows, mismatches = [], 0
    for cached in (False, True):
        plain = run_config(verifier, plain_draft, prompts, n_new, 1, cached, repeats)
        rows.append(row("plain", 0, cached, plain, plain, costs))
        for name, draft in drafts.items():
            for k in ks:
                results = run_config(verifier, draft, prompts, n_new, k, cached, repeats)
                mismatches += sum(list(r.tokens) != ref for r, ref in zip(results, refs))
                rows.append(row(name, k, cached, results, plain, costs))
    return render(rows, costs, ks, n_new, len(prompts), mismatches, repeats)


def render(rows, costs, ks, n_new, n_prompts, mismatches, repeats) -> str:
    """The Markdown section: setup, the pass-cost table and the results table."""
    from tabulate import tabulate

    head = ["draft", "k", "regime", "accept", "MAL", "tok/step", "ms/token", "speedup", "ideal", "measured/ideal",
            "draft+bookkeeping", "draft"]
    cost_rows = [[n, f"{costs[(False, n)] * 1e3:.2f}", f"{costs[(True, n)] * 1e3:.2f}"] for n in range(1, max(ks) + 2)]
    return "\n".join([
        "## Speculative decoding engine (`bench/decoding.py`)",
        "",
        f"Random-weights Mistral verifier (~20M parameters, vocab 32000, fp32, CPU, 1 thread), {n_prompts} prompts x "
        f"{n_new} new tokens per configuration, fastest of {repeats} runs per prompt, warm-up excluded; "
        "plain measured first in each regime. "
        f"Outputs differing from transformers' greedy `generate`: {mismatches}.",
        "`ideal` = plain's verifier-only time over this run's verifier-only time, from the measured pass costs "
        "below and the size of every pass the run made (rejections: 1 position; verified drafts: their count, "
        "+1 uncached). "
        "Goals: draft+bookkeeping <= 2% of wall time, measured/ideal >= 90%.",
        "",
        "Verifier pass cost at the mean context length (ms):",
        "",
        tabulate(cost_rows, headers=["positions", "uncached (full forward)", "cached (extend)"], tablefmt="github"),
        "",
        tabulate(rows, headers=head, tablefmt="github"),
    ])

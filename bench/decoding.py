"""Benchmark: the speculative decoding engine on CPU, three regimes, greedy and sampled, against plain decoding.

The verifier is a random-weights Mistral (~20M parameters, fp32, the real 32000-token vocabulary) whose output
head is scaled by HEAD_SCALE: greedy outputs are unchanged, and sampling at T = 0.8 is about as peaked as a
trained LM's (mean top-token probability ~0.5) rather than near-uniform. Drafts:
`ngram` (in-session; the random verifier falls into loops, which it learns), `olifant`
(an IGTree fitted on the verifier's own greedy outputs: acceptance near 100%) and `olifant-75` (the same with
one training target in four replaced by a random token: partial acceptance). Per draft, k and regime:
speedup over plain (plain measured first, same prompts), draft + bookkeeping time as a share of the wall time
(goal <= 2%), and the measured speedup against the ideal one implied by the passes the run made (MAL) and the
verifier's measured cost of a 1-position vs a k-position pass (goal >= 90%). Warm-up runs are excluded.
Regimes: `uncached`, `cached` (the paper's, first-token fast path) and `cached-standard` (transformers' and
vLLM's: pending token + k drafts per pass); the tables give one row per draft and k, each cell the three regimes'
figures. A second table repeats every draft at T = 0.8 (speculative sampling, seeded per prompt), with plain at
T = 0.8 as its baseline, next to the greedy figures.
"""

from __future__ import annotations

import statistics
import time
from dataclasses import replace

import numpy as np
import torch

from workers.decoding import REGIMES, DecodeOptions, GenerationResult, generate, greedy_reference, warmup
from workers.decoding.sampling import Warp
from workers.drafts import make_draft
from workers.igtree import IGTree
from workers.metrics import acceptance_rate, mal, mean_accepted_tokens
from workers.models.tokenizer import load_tokenizer
from workers.verifier import Verifier

HEAD_SCALE = 16.0  # x the random head: T = 0.8 sampling about as peaked as a trained LM's; argmax unchanged
TEMPERATURE = 0.8
SAMPLED_COLUMNS = (("accept", ""), ("first", ""), ("speedup", "x"), ("ideal", "x"))

PROMPTS = (
    "To be, or not to be, that is the question: whether 'tis nobler in the mind to suffer the slings",
    "The quick brown fox jumps over the lazy dog, and the dog, being lazy, does not chase the fox at all",
    "In the beginning the Universe was created. This has made a lot of people very angry and been widely",
    "It is a truth universally acknowledged, that a single man in possession of a good fortune, must be",
)


def build_verifier(seed: int = 0, head_scale: float = HEAD_SCALE) -> Verifier:
    """A random-weights Mistral with the Mistral vocabulary (~20M parameters), fp32 on CPU, head scaled."""
    from transformers import MistralConfig, MistralForCausalLM

    torch.manual_seed(seed)
    cfg = MistralConfig(
        vocab_size=32000,
        hidden_size=256,
        intermediate_size=768,
        num_hidden_layers=4,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=1024,
    )
    model = MistralForCausalLM(cfg).eval()
    with torch.no_grad():
        model.lm_head.weight.mul_(head_scale)
    return Verifier(model)


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


def pass_sizes(res: GenerationResult, regime: str) -> list[tuple[bool, int]]:
    """(cached, positions) of each verifier pass of a run; (True, 0): a prefill of the prompt."""
    if regime == "uncached":
        return [(False, d + 1) for d in res.drafted_per_step]  # context + drafts, k+1 predictions kept
    if regime == "cached-standard":  # the prompt + drafts first (costed as the prompt's prefill), then 1 + drafts
        return [(True, 0)] + [(True, d + 1) for d in res.drafted_per_step[1:]]
    sizes = [(True, 0)] + [(True, d if a > 0 else 1) for d, a in zip(res.drafted_per_step, res.accepted_per_step)]
    return sizes[: res.steps]  # the last round of a generation may skip its pass


def ideal_seconds(res: GenerationResult, regime: str, costs: dict) -> float:
    """Verifier-only seconds of this run's passes, from the measured cost of each pass size."""
    return sum(costs[size] for size in pass_sizes(res, regime))


def run_config(verifier, draft, prompts, n_new, k, regime, repeats, temperature=0.0) -> list[GenerationResult]:
    """Warm up, then per prompt the fastest of `repeats` timed generations (the least disturbed on shared cores).

    Sampled runs are seeded by the prompt's index, so every repeat does the same work.
    """
    options = DecodeOptions(regime, k, n_new, warp=Warp(temperature))
    warmup(verifier, draft, prompts[0], replace(options, seed=0))
    runs = [
        [generate(verifier, draft, p, replace(options, seed=i)) for i, p in enumerate(prompts)] for _ in range(repeats)
    ]
    return [min(per_prompt, key=lambda r: r.wall_s) for per_prompt in zip(*runs)]


def summary(results: list[GenerationResult], plain: list[GenerationResult], regime: str, costs: dict) -> dict:
    """Acceptance, first-token acceptance and speedups over plain (wall time, ideal) of one configuration."""
    accepted, drafted = sum(r.accepted for r in results), sum(r.drafted for r in results)
    first = acceptance_rate(sum(r.first_accepted for r in results), sum(r.first_checked for r in results))
    speedup = sum(r.wall_s for r in plain) / sum(r.wall_s for r in results)
    ideal = sum(ideal_seconds(r, regime, costs) for r in plain) / sum(ideal_seconds(r, regime, costs) for r in results)
    return {"accept": acceptance_rate(accepted, drafted), "first": first, "speedup": speedup, "ideal": ideal}


def row(name, k, regime, results: list[GenerationResult], plain: list[GenerationResult], costs) -> list:
    """One table row: acceptance, MAL, speedups measured and ideal, overhead share."""
    wall = sum(r.wall_s for r in results)
    accepted, drafted = sum(r.accepted for r in results), sum(r.drafted for r in results)
    steps, n_tok = sum(r.steps for r in results), sum(r.n_tokens for r in results)
    s = summary(results, plain, regime, costs)
    ideal = s["ideal"]
    overhead = statistics.fmean((r.wall_s - r.verify_s) / r.wall_s for r in results)
    draft_share = statistics.fmean(r.draft_s / r.wall_s for r in results)
    return [
        name,
        k,
        regime,
        _rate(acceptance_rate(accepted, drafted)),
        f"{mal(accepted, steps):.2f}",
        f"{mean_accepted_tokens(n_tok, steps):.2f}",
        f"{wall / n_tok * 1e3:.2f}",
        f"{s['speedup']:.2f}x",
        f"{ideal:.2f}x",
        f"{s['speedup'] / ideal:.0%}",
        f"{overhead:.1%}",
        f"{draft_share:.1%}",
    ]


def _rate(x: float) -> str:
    """A rate to 2 decimals; "-" where nothing was drafted (plain)."""
    return "-" if x != x else f"{x:.2f}"


def by_regime(rows: list[list]) -> list[list]:
    """One row per (draft, k) from rows [draft, k, regime, *figures] in REGIMES order: each figure's values over
    the regimes, joined "uncached / cached / cached-standard"."""
    by: dict[tuple, list] = {}
    for name, k, _, *figures in rows:
        by.setdefault((name, k), []).append(figures)
    return [[name, k, *(" / ".join(v) for v in zip(*cells))] for (name, k), cells in by.items()]


def run(quick: bool = False) -> str:
    """Measure every draft x k x regime against plain, side by side, greedy and at T = 0.8; return Markdown."""
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
    k_sampled = 5
    prompts = [tok(p).input_ids for p in PROMPTS[: 2 if quick else 4]]
    refs = [greedy_reference(verifier, p, n_new) for p in prompts]
    drafts = {
        "ngram": make_draft("ngram", n=4),
        "olifant": make_draft("olifant", ibase=fitted_tree(prompts, refs)),
        "olifant-75": make_draft("olifant", ibase=fitted_tree(prompts, refs, corrupt_every=4)),
    }
    mid = prompts[0] + refs[0][: n_new // 2]  # costs at the mean context length of a generation
    costs = pass_costs(verifier, prompts[0], mid, sorted(set(ks) | {k_sampled}), reps=5 if quick else 10)
    rows, sampled_rows, mismatches = [], [], 0
    for regime in REGIMES:
        plain, runs = measure_regime(verifier, drafts, prompts, n_new, sorted(set(ks) | {k_sampled}), regime, repeats)
        mismatches += sum(list(r.tokens) != ref for results in runs.values() for r, ref in zip(results, refs))
        rows.append(row("plain", 0, regime, plain, plain, costs))
        rows += [row(name, k, regime, runs[(name, k)], plain, costs) for name in drafts for k in ks]
        greedy = {key: summary(results, plain, regime, costs) for key, results in runs.items()}
        sampled_rows += sampled_section(verifier, drafts, prompts, n_new, k_sampled, regime, repeats, greedy, costs)
    return render(rows, sampled_rows, costs, ks, n_new, len(prompts), mismatches, repeats)


def measure_regime(verifier, drafts, prompts, n_new, ks, regime, repeats, temperature=0.0) -> tuple[list, dict]:
    """Plain (measured before and after the drafts, fastest kept: load drifts) and every draft x k of a regime."""
    plain_draft = make_draft("plain")
    before = run_config(verifier, plain_draft, prompts, n_new, 1, regime, repeats, temperature)
    runs = {
        (name, k): run_config(verifier, draft, prompts, n_new, k, regime, repeats, temperature)
        for name, draft in drafts.items()
        for k in ks
    }
    after = run_config(verifier, plain_draft, prompts, n_new, 1, regime, repeats, temperature)
    return [min(a, b, key=lambda r: r.wall_s) for a, b in zip(before, after)], runs


# wide: one benchmark section's inputs, passed as the caller already holds them
def sampled_section(verifier, drafts, prompts, n_new, k, regime, repeats, greedy: dict, costs: dict) -> list[list]:
    """Rows of every draft at T = TEMPERATURE after its greedy first-token acceptance (its other greedy figures are
    the greedy table's); plain at the same T is the baseline."""
    plain, runs = measure_regime(verifier, drafts, prompts, n_new, [k], regime, repeats, TEMPERATURE)
    rows = []
    for name in drafts:
        s, g = summary(runs[(name, k)], plain, regime, costs), greedy[(name, k)]
        rows.append([name, k, regime, _rate(g["first"])] + [_fmt(s[key], unit) for key, unit in SAMPLED_COLUMNS])
    return rows


def _fmt(x: float, unit: str) -> str:
    """A sampled-table figure: a rate (unit "") or a speedup (unit "x") to 2 decimals."""
    return f"{x:.2f}{unit}" if unit else _rate(x)


def render(rows, sampled_rows, costs, ks, n_new, n_prompts, mismatches, repeats) -> str:
    """The Markdown section: setup, the pass-cost table, the greedy results and the sampled ones, one row per draft
    and k with the three regimes' figures in each cell."""
    from tabulate import tabulate

    head = ["draft", "k", "accept", "MAL", "tok/step", "ms/token", "speedup", "ideal", "measured/ideal"]
    head += ["draft+bookkeeping", "draft"]
    sampled_head = ["draft", "k", "first T=0"] + [f"{key} T={TEMPERATURE}" for key, _ in SAMPLED_COLUMNS]
    n_max = max(n for _, n in costs)
    positions = range(1, n_max + 1)
    cost_rows = [
        [label, *(f"{costs[(cached, n)] * 1e3:.2f}" for n in positions)]
        for label, cached in (("uncached (full forward)", False), ("cached (extend)", True))
    ]

    def table(cells, headers):
        return tabulate(cells, headers=headers, tablefmt="github", disable_numparse=True)

    return "\n".join(
        [
            "## Speculative decoding engine (`bench/decoding.py`)",
            "",
            "Random-weights Mistral verifier (~20M parameters, vocab 32000, fp32, CPU, 1 thread; output head "
            f"x{HEAD_SCALE:g}, which leaves greedy outputs unchanged), {n_prompts} prompts x {n_new} new tokens per "
            f"configuration, fastest of {repeats} runs per prompt, warm-up excluded; plain measured before and after the "
            "drafts of each regime, the faster kept. "
            f"Outputs differing from transformers' greedy `generate`: {mismatches}. "
            "Each cell gives uncached / cached / cached-standard. "
            "`ideal` = plain's verifier-only time over this run's verifier-only time, from the measured pass costs "
            "below and the size of every pass the run made (rejections: 1 position; verified drafts: their count, "
            "+1 uncached and cached-standard; cached-standard's first pass costed as the prompt's prefill). "
            "Goals: draft+bookkeeping <= 2% of wall time, measured/ideal >= 90%.",
            "",
            table(cost_rows, ["verifier pass (ms) at the mean context, by positions fed", *map(str, positions)]),
            "",
            table(by_regime(rows), head),
            "",
            f"Speculative sampling at T = {TEMPERATURE} (no top-k, no top-p), k = {sampled_rows[0][1]}: same verifier, "
            "prompts and drafts, each generation seeded by its prompt's index; speedups over plain decoding at "
            f"T = {TEMPERATURE} in the same regime (its sampling cost included); `first`: first-token acceptance, "
            "rounds whose first draft token was accepted / rounds that drafted (`first T=0`: greedy; the other "
            f"greedy figures are the k = {sampled_rows[0][1]} rows above); `ideal`: from the passes made. The olifant "
            "trees were fitted on the greedy outputs, so sampling, which leaves the greedy path, takes fewer of their "
            "drafts.",
            "",
            table(by_regime(sampled_rows), sampled_head),
        ]
    )

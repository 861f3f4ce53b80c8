"""Measure the round-cost table (`workers.decoding.costmodel.RoundCosts`): real rounds of the real decoding loop, timed.

For each regime, each pass width a run uses (n = 0..max_n drafted tokens, and each token-tree size) and a few
context lengths (log-spaced over the run's), a `ProbeDraft` proposes a fixed draft and one round of the regime's own
`Round` class runs (`workers.decoding.regimes`): the forward pass, the acceptance, the cache crop and the loop's
bookkeeping, everything a round does but the draft, whose seconds are taken out (replay measures its own draft).
Each round's key comes from the pass it recorded (`workers.decoding.passes`), as a prediction reads it.

The probe drafts the verifier's own greedy continuation with its last token wrong, so every round accepts all but
one of its drafts (n = 1: accepts it) and crops the cache as a typical round does; the paper's cached regime's
n = 0 round is a fast-path reject. Between rounds the cache is cut back, so one prefill serves every width.
Widths run in turn, round after round, so a busy spell slows them all alike; a repeat that would end past
`budget_s` is not started (one always runs, after one untimed warm round at the shortest context).

The machine's pace: a shared machine's speed drifts by a few percent over minutes (other tenants, clocks), so a
table measured at one moment meets timings made at others. `pace_seconds` times one fixed decoding step (one token
after `PACE_TOKENS` fixed tokens in the cache, the median of `PACE_REPEATS`), the same on every call: the table
records it before each repeat of its rounds and after the last (`meta["pace_s"]`: their median), and the
accelerator worker before every timed greedy generation (`GenerationRecord.pace_s`). Their ratio is how much faster
or slower the machine ran at that moment, which validation reports beside the table's error as the run's drift
(`storage.validation.prediction_pairs`).

Example:
    >>> table, samples = measure_round_costs(verifier, prompt_ids, max_n=8, tree_sizes=(5,), max_context=200)
    >>> table.seconds("cached", "chain", 4, 150) > table.seconds("cached", "chain", 0, 150)
    True
"""

from __future__ import annotations

import logging
import math
import platform
import time
from collections.abc import Sequence

import numpy as np
import torch

from workers.decoding.costcurve import verifier_name
from workers.decoding.costmodel import RoundCosts, Sample, build_table, log_spaced
from workers.decoding.engine import generate
from workers.decoding.judges import GreedyJudge
from workers.decoding.options import DecodeOptions
from workers.decoding.passes import REGIMES, regime_passes
from workers.decoding.regimes import ROUNDS
from workers.decoding.rounds import Tally
from workers.decoding.shapes import Chain, Tree
from workers.decoding.tokentree import TokenTree
from workers.interfaces import Draft, PlainDraft

logger = logging.getLogger(__name__)

REPEATS = 3  # timed rounds per width and context; the table keeps their median
PACE_TOKENS = 32  # the pace step: one token after this many fixed tokens in the cache
PACE_REPEATS = 5  # timed pace passes per call, after one untimed; their median


MIN_CONTEXTS, MAX_CONTEXTS = 4, 6  # a narrow span still gets 4, so that one context's slow spell, or a kernel's step
# at one length, does not bend a row of 2 across the whole span; `python -m bench costmodel` predicts with both (its
# last column: the same rounds at each row's end contexts): at 69-199 tokens on a steady host the two differ by a
# median 0.1-0.2 point of error (the 2 lower in 17 of 36 rows, the 4 in 8, 11 ties; BENCHMARKS.md), so the guard
# costs a tenth or two of a point there, and 8 timed rounds a row at 2 repeats against 4


def n_contexts(lo: int, hi: int) -> int:
    """Contexts to time between lo and hi: one per doubling and one more, 4 to 6."""
    return max(MIN_CONTEXTS, min(MAX_CONTEXTS, 1 + round(math.log2(max(hi, 1) / max(lo, 1)))))


class ProbeDraft(Draft):
    """Proposes what the measurement sets: a fixed chain (`tokens`) or token tree (`tree`)."""

    name = "probe"

    def __init__(self):
        self.tokens: list[int] = []
        self.tree = TokenTree((), ())

    def propose(self, context: Sequence[int], k: int) -> list[int]:
        return list(self.tokens[:k])

    def propose_tree(self, context: Sequence[int], budget: int) -> TokenTree:
        return self.tree.truncated(budget)


def probe_chain(ref: Sequence[int], n: int, regime: str, vocab: int) -> list[int]:
    """n drafts: the reference with its last token wrong (n = 1: right; the cached regime's n = 0: one wrong)."""
    wrong = lambda i: (int(ref[i]) + 1) % vocab  # noqa: E731 (never the verifier's token at i)
    if n == 0:
        return [wrong(0)] if regime == "cached" else []
    if n == 1:
        return [int(ref[0])]
    return [int(t) for t in ref[: n - 1]] + [wrong(n - 1)]


def probe_tree(ref: Sequence[int], n: int, vocab: int) -> TokenTree:
    """n nodes under the first reference token: a reference chain of d = ceil((n + 1) / 2), each wrong sibling of one
    of its nodes below the first."""
    d = min(n, math.ceil((n + 1) / 2))
    tokens = [int(t) for t in ref[:d]] + [(int(ref[j - d + 1]) + 1) % vocab for j in range(d, n)]
    parents = list(range(-1, d - 1)) + [j - d for j in range(d, n)]
    return TokenTree(tuple(tokens), tuple(parents))


def timed_round(rnd, tally: Tally, context: list[int], room: int, regime: str, tree: bool) -> Sample:
    """One round's step (and the loop's bookkeeping), timed between device syncs, less its draft's seconds."""
    verifier = rnd.verifier
    draft_before = tally.draft_s
    verifier.sync()
    t0 = time.perf_counter()
    new, n = rnd.step(context, room)
    tally.record(new, n, None, room)
    verifier.sync()
    seconds = time.perf_counter() - t0 - (tally.draft_s - draft_before)
    return (regime, *regime_passes(regime).key(tally.passes[-1], tree), seconds)


def timed_start(rnd, tally: Tally, prompt: list[int], regime: str) -> Sample:
    """The cached regime's opening prefill, timed."""
    rnd.verifier.sync()
    t0 = time.perf_counter()
    rnd.start(prompt)
    rnd.verifier.sync()
    return (regime, *regime_passes(regime).key(tally.passes[-1]), time.perf_counter() - t0)


def probes(regime: str, max_n: int, tree_sizes: Sequence[int]) -> list[tuple[int, bool]]:
    """(n, tree) of every round to time in a regime."""
    chains = [(n, False) for n in regime_passes(regime).widths(max_n)]
    return chains + [(n, True) for n in sorted(set(tree_sizes)) if n > 0]


def regime_rounds(
    verifier, regime: str, prompt: list[int], ref: list[int], max_n: int, tree_sizes: Sequence[int]
) -> list[Sample]:
    """Every width of one regime after `prompt`, each one round, the cache cut back between them."""
    draft, c, vocab = ProbeDraft(), len(prompt), verifier.vocab_size
    out: list[Sample] = []
    start: tuple | None = None
    for n, tree in probes(regime, max_n, tree_sizes):
        draft.tokens, draft.tree = probe_chain(ref, n, regime, vocab), probe_tree(ref, n, vocab)
        tally = Tally(k=max(max_n, n))
        shape = Tree(GreedyJudge()) if tree else Chain(GreedyJudge())
        rnd = ROUNDS[regime](verifier, draft, shape, tally, max(max_n, n), None)
        if regime == "cached":
            if start is None:
                out.append(timed_start(rnd, tally, prompt, regime))
                start = (rnd.pending,)
            rnd.pending = start[0]
        out.append(timed_round(rnd, tally, prompt, max_n + 2, regime, tree))
        if regime == "cached-standard":  # the opening round ran; now a round after the pending token
            verifier.crop(c - 1)
            rnd.first = False
            out.append(timed_round(rnd, tally, prompt, max_n + 2, regime, tree))
        verifier.crop(c if regime == "cached" else c - 1)
    verifier.cache = None
    return out


def pace_seconds(verifier, repeats: int = PACE_REPEATS) -> float:
    """The machine's pace now: the median seconds of one fixed decoding step (one token fed after `PACE_TOKENS`
    cached, the cache cut back after each), after one untimed; the verifier's own cache is left as it was."""
    ids = [(7 * i + 11) % verifier.vocab_size for i in range(PACE_TOKENS + 1)]
    saved, times = verifier.cache, []
    try:
        with torch.inference_mode():
            verifier.prefill(ids[:-1], keep=1)
            for r in range(repeats + 1):
                verifier.sync()
                t0 = time.perf_counter()
                verifier.extend(ids[-1:])
                verifier.sync()
                if r:
                    times.append(time.perf_counter() - t0)
                verifier.crop(PACE_TOKENS)
    finally:
        verifier.cache = saved
    return float(sorted(times)[len(times) // 2])


def machine(verifier) -> dict[str, object]:
    """What a table was measured on: device, dtype, threads, library versions, processor."""
    import transformers

    device = verifier.device
    name = torch.cuda.get_device_name(device) if device.type == "cuda" else cpu_model()
    return {
        "device_name": name,
        "dtype": str(verifier.dtype).replace("torch.", ""),
        "threads": torch.get_num_threads(),
        "torch": torch.__version__,
        "transformers": transformers.__version__,
        "python": platform.python_version(),
    }


def cpu_model() -> str:
    """The processor's model name (Linux: /proc/cpuinfo), else platform's."""
    try:
        with open("/proc/cpuinfo") as f:
            line = next((x for x in f if x.startswith("model name")), "")
        return line.split(":", 1)[1].strip() if line else platform.processor() or platform.machine()
    except OSError:
        return platform.processor() or platform.machine()


def references(verifier, tokens: list[int], contexts: Sequence[int], n: int) -> dict[int, list[int]]:
    """The verifier's n greedy tokens after each context (plain cached decoding, untimed)."""
    opts = DecodeOptions("cached", 0, n)
    return {c: list(generate(verifier, PlainDraft(), tokens[:c], opts).tokens) for c in contexts}


# wide: the measurement's settings, each a CostModelJob field (the job is the one caller that sets them all)
def measure_round_costs(
    verifier,
    context_ids: Sequence[int],
    max_n: int = 8,
    tree_sizes: Sequence[int] = (),
    regimes: Sequence[str] = REGIMES,
    max_context: int | None = None,
    min_context: int | None = None,
    repeats: int = REPEATS,
    budget_s: float | None = None,
) -> tuple[RoundCosts, list[Sample]]:
    """The round-cost table of `verifier` for these regimes and widths, over contexts from `min_context` (default a
    tenth of the longest, at least 8) to `max_context` tokens (`context_ids` repeated where shorter)."""
    ids = [int(t) for t in context_ids]
    if not ids:
        raise ValueError("measure_round_costs needs a non-empty context")
    top = max(max_n, *tree_sizes) if tree_sizes else max_n
    max_context = max(2, max_context or len(ids))
    lo = max(2, min(max_context, min_context or max(8, max_context // 10)))
    contexts = log_spaced(lo, max_context, n_contexts(lo, max_context))
    tokens = (ids * math.ceil((max_context + top + 2) / len(ids)))[: max_context + top + 2]
    with torch.inference_mode():
        refs = references(verifier, tokens, contexts, top + 1)
        for regime in regimes:  # warm: allocation and first-call costs, not timed
            regime_rounds(verifier, regime, tokens[: contexts[0]], refs[contexts[0]], max_n, tree_sizes)
        samples: list[Sample] = []
        pace: list[float] = []
        t0 = time.perf_counter()
        for r in range(max(1, repeats)):
            elapsed = time.perf_counter() - t0
            if r and budget_s is not None and elapsed + elapsed / r > budget_s:
                logger.info("round-cost table: %d of %d repeats within %.0f s", r, repeats, budget_s)
                break
            pace.append(pace_seconds(verifier))
            for c in contexts:
                for regime in regimes:
                    samples += regime_rounds(verifier, regime, tokens[:c], refs[c], max_n, tree_sizes)
        pace.append(pace_seconds(verifier))
    meta = machine(verifier) | {"pace_s": float(np.median(pace)), "pace_runs": pace}
    table = build_table(verifier_name(verifier), str(verifier.device), samples, meta)
    logger.info("round-cost table %s on %s from %d rounds", table.verifier, table.device, len(samples))
    return table, samples

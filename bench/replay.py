"""Replay's throughput: greedy cells replayed per second on Ray CPU tasks (1 and 2 workers), on the demo's kind of
drafts over SmolLM2 references, and the time a 10,000-cell grid takes at that rate.

The grid: the session drafts (ngram, lookup, suffix) and an olifant and a hybrid draft over an instance base of the
demo's pydoc training text, k = 1..8 and token trees of 4, 8 and 16 nodes, in the three regimes, over SmolLM2's
greedy references of pydoc prompts (the references are made once, by the real verifier, and not timed here). Each
Ray task replays a batch of 64 cells of one strategy and builds their rows, predicted by a round-cost table, as the
driver's task does (`orchestrator.run.replay_rows.replay_rows_task`).
"""

from __future__ import annotations

import itertools
import tempfile
import time
from pathlib import Path

import numpy as np

PROMPTS, QUICK_PROMPTS, N_NEW, BATCH = 40, 4, 16, 64
KS = tuple(range(1, 9))
TREES = (4, 8, 16)
REGIMES = ("uncached", "cached", "cached-standard")


def references(n: int):
    """(tokenizer, [(prompt ids, reference ids)], pydoc training ids) from SmolLM2 on the demo's pydoc split."""
    import torch

    from orchestrator.run.demo_corpora import chunk_text, pydoc_texts, split_keys
    from workers.decoding import greedy_reference
    from workers.models.tokenizer import load_tokenizer
    from workers.verifier import load_verifier

    torch.set_num_threads(2)
    texts = pydoc_texts()
    train_keys, test_keys = split_keys(texts)
    tok = load_tokenizer("smollm2-135m")
    verifier = load_verifier("smollm2-135m", dtype="float32", device="cpu")
    docs = [c for k in test_keys for c in chunk_text(texts[k]) if len(c.split()) > 70][:n]
    pairs = []
    for d in docs:
        prompt = tok(" ".join(d.split()[:50])).input_ids
        pairs.append((prompt, greedy_reference(verifier, prompt, N_NEW, eos_id=tok.eos_token_id)))
    train = [t for k in train_keys for t in tok(texts[k]).input_ids]
    return tok, pairs, train, verifier.vocab_size


def jobs(pairs, ibase: str, vocab: int, eos: int | None) -> list:
    from workers.contracts import Coordinates, ReplayJob

    hybrid = {"corpus": "pydoc", "n": 6, "min_match": 5, "confidence": "share"}
    strategies = [  # (name, draft, options, k values, reads the instance base)
        ("ngram", "ngram", {"n": 4}, KS, False),
        ("lookup", "lookup", {}, KS, False),
        ("suffix", "suffix", {}, KS, False),
        ("olifant", "olifant", {"corpus": "pydoc"}, KS, True),
        ("hybrid", "hybrid", hybrid, KS, True),
        ("olifant-tree", "olifant", {"corpus": "pydoc", "tree": 8}, TREES, True),
        ("hybrid-tree", "hybrid", {**hybrid, "tree": 8}, TREES, True),
    ]
    out = []
    for (name, draft, options, ks, reads), regime, (i, (prompt, ref)) in itertools.product(
        strategies, REGIMES, enumerate(pairs)
    ):
        for k in ks:
            opts = {**options, "tree": k} if "tree" in options else options
            out.append(
                ReplayJob(
                    cell=Coordinates(
                        f"{name}-{k}-{regime}-{i}", name, draft, opts, {"ibase": ibase} if reads else {}, k, regime
                    ),
                    prompt_tokens=tuple(prompt),
                    reference=tuple(ref),
                    text="",
                    vocab_size=vocab,
                    eos_id=eos,
                    max_new_tokens=N_NEW,
                )
            )
    return out


def _predictor():
    """A round-cost table over every regime, chain and tree width the grid uses (flat: 30 ms a round, 1 ms more per
    token), at 30 W: what the task predicts each row with (its cost, not its values, matters here)."""
    from storage.repredict import Predictor
    from workers.decoding.costmodel import build_table

    kinds = ("chain", "first", "tree", "tree-first")
    samples = [
        (r, kind, n, c, 0.030 + 0.001 * n) for r in REGIMES for kind in kinds for n in range(18) for c in (8, 256)
    ]
    return Predictor(build_table("smollm2-135m", "cpu", samples), "bench", 30.0, "estimate")


def replay_rate(all_jobs: list, cpus: int) -> tuple[float, int, float]:
    """(cells per second, cells, accepted share) replaying every job, rows built, on a fresh local Ray of `cpus` CPUs."""
    import ray

    from bench.training import _ray_init
    from orchestrator.run.replay_rows import replay_rows_task
    from storage.generation_row import INSERT_COLUMNS, RowCell

    def cells(batch):
        return [
            RowCell(
                i,
                j.cell.strategy,
                j.cell.draft,
                "pydoc",
                i,
                "ref",
                j.cell.k,
                j.cell.regime,
                0.0,
                0,
                1.0,
                "tree" in j.cell.options,
            )
            for i, j in enumerate(batch)
        ]

    _ray_init(cpus)
    try:
        by_strategy: dict[str, list] = {}
        for j in all_jobs:
            by_strategy.setdefault(j.cell.strategy, []).append(j)
        batches = [js[i : i + BATCH] for js in by_strategy.values() for i in range(0, len(js), BATCH)]
        table = ray.put(_predictor())
        task = lambda b: replay_rows_task.remote(b, cells(b), "smollm2-135m", 1, table)  # noqa: E731
        ray.get([task(batches[0][:1]) for _ in range(cpus)])  # workers up, tokenizer
        t0 = time.perf_counter()
        outs = ray.get([task(b) for b in batches])
        wall = time.perf_counter() - t0
    finally:
        ray.shutdown()
    bad = [o.error for out in outs for o in out.failed]
    if bad:
        raise RuntimeError(f"replay failed: {bad[0]}")
    rows = [values for out in outs for _, _, values in out.rows]
    accepted, drafted = INSERT_COLUMNS.index("accepted"), INSERT_COLUMNS.index("drafted")
    share = sum(r[accepted] for r in rows) / (sum(r[drafted] for r in rows) or 1)
    return len(rows) / wall, len(rows), share


def run(quick: bool = False) -> str:
    from workers.igtree import IGTree

    tok, pairs, train, vocab = references(QUICK_PROMPTS if quick else PROMPTS)
    windows = np.lib.stride_tricks.sliding_window_view(np.array(train, dtype=np.int64), 5)
    folder = Path(tempfile.mkdtemp(prefix="bench-replay-"))
    ibase = folder / "pydoc.igtree"
    IGTree.fit(windows[:, :4], windows[:, 4]).save(ibase)
    grid = jobs(pairs, str(ibase), vocab, tok.eos_token_id)
    rows = []
    for cpus in (1, 2):
        rate, n, acc = replay_rate(grid, cpus)
        rows.append(f"| {cpus} | {n:,} | {rate:,.0f} | {10_000 / rate / 60:.1f} min | {acc:.3f} |")
    return "\n".join(
        [
            "## Replay throughput",
            "",
            f"{len(pairs)} SmolLM2 references of {N_NEW} new tokens (demo pydoc prompts); ngram, lookup, suffix, olifant "
            f"and hybrid at k = 1..8 and their token trees of {', '.join(map(str, TREES))} nodes, in the three regimes; "
            f"Ray tasks of {BATCH} cells, each building its cells' rows (metrics, predicted time and energy) as the"
            " driver's do. Time to replay the cells, references and instance base made beforehand.",
            "",
            "| CPU workers | cells | cells / s | a 10,000-cell grid | acceptance |",
            "|---|---|---|---|---|",
            *rows,
        ]
    )

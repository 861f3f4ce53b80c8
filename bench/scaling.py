"""Benchmark: how training scales with Ray workers (`python -m bench training --scaling [--tokens N]`).

One synthetic token file (`bench.training`: a word bigram chain fitted to the demo corpora, written as Mistral
token ids, so tokenisation is skipped) of 10^8 tokens by default is trained out of core over 1, 2, 4, ... Ray
workers up to the machine's cores, every row in a fresh process with a fresh local Ray of that many CPUs, and once
in memory (when the machine has the ~300 B per instance it needs). Speedup is against the 1-worker row and against
the in-memory build. Peak memory is sampled over the whole process tree (busy Ray workers included, Ray's daemons
aside) as RSS, which counts a page shared by several processes once per process, and as PSS
(/proc/<pid>/smaps_rollup), which divides it among them. Every row must give the same file (sha256).
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
from pathlib import Path

import psutil

from bench.training import _child, _token_file, demo_chain

DEFAULT_TOKENS = 10**8


def worker_counts(cores: int) -> list[int]:
    """1, 2, 4, ... up to `cores`, and `cores` itself when it is not a power of two.

    >>> worker_counts(6)
    [1, 2, 4, 6]
    """
    counts, w = [], 1
    while w < cores:
        counts.append(w)
        w *= 2
    return counts + [cores]


def budget_gb(tokens: int) -> float:
    """The out-of-core budget, the same for every row: 40 B per token (several partitions at any size, ~4 GB for
    10^8 tokens), at most a quarter of the RAM."""
    quarter = psutil.virtual_memory().total / 4 / 1e9
    return round(min(quarter, max(0.02, tokens * 40 / 1e9)), 3)


def in_memory_fits(tokens: int) -> bool:
    """Whether the in-memory build (~300 B per instance) fits half the memory available now."""
    return tokens * 300 < psutil.virtual_memory().available / 2


def run(tokens: int = DEFAULT_TOKENS, cores: int | None = None) -> str:
    """Train `tokens` synthetic tokens in memory and at each worker count; the Markdown section."""
    cores = cores or os.cpu_count() or 1
    root = Path(tempfile.mkdtemp(prefix="bench-scaling-"))
    budget = budget_gb(tokens)
    try:
        tf = _token_file(tokens, root, demo_chain())
        rows = []
        configs = ([("in memory", "memory", 0)] if in_memory_fits(tokens) else []) + [
            (f"Ray x{w}", "budget", w) for w in worker_counts(cores)
        ]
        for i, (label, mode, workers) in enumerate(configs):
            cfg = {
                "tf": tf.__dict__,
                "mode": mode,
                "budget_gb": budget,
                "ray_workers": workers,
                "out": str(root / f"{i}.igtree"),
                "work": str(root / f"work-{i}"),
            }
            result = _child("one", cfg)
            print(f"scaling {tokens:,} {label}: {result}", file=sys.stderr)
            rows.append((label, workers, result))
            shutil.rmtree(cfg["work"], ignore_errors=True)
        return markdown(tokens, budget, cores, rows)
    finally:
        shutil.rmtree(root, ignore_errors=True)


def markdown(tokens: int, budget: float, cores: int, rows: list[tuple[str, int, dict]]) -> str:
    """The section: one row per configuration, speedups against 1 worker and against the in-memory build."""
    ok = {label: r for label, _, r in rows if "error" not in r}
    one = ok.get("Ray x1", {}).get("wall_s")
    mem = ok.get("in memory", {}).get("wall_s")
    ref = next((r["sha256"] for r in ok.values()), None)
    lines = [
        "## Training: scaling with Ray workers (`python -m bench training --scaling`)",
        "",
        (
            f"{tokens:,} synthetic tokens (tokenisation skipped), window 4, gain ratio; out of core with a "
            f"{budget:g} GB budget over 1..{cores} Ray workers (a fresh process and local Ray per row), and in "
            "memory. Peak memory over the process tree, Ray workers included: RSS counts a shared page once per "
            "process, PSS divides it among them."
        ),
        "",
        "| build | workers | wall (s) | speedup vs 1 worker | speedup vs in memory | CPU (s) | partitions | "
        "peak RSS (GB) | peak PSS (GB) | same file |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for label, workers, r in rows:
        if "error" in r:
            lines.append(f"| {label} | {workers or '-'} | {r['error']} | | | | | | | |")
            continue
        vs_one = f"{one / r['wall_s']:.2f}" if one and workers else "-"
        vs_mem = f"{mem / r['wall_s']:.2f}" if mem else "-"
        lines.append(
            f"| {label} | {workers or '-'} | {r['wall_s']:.1f} | {vs_one} | {vs_mem} | {r['cpu_s']:.1f} | "
            f"{r['partitions']} | {r['peak_rss_bytes'] / 1e9:.2f} | {r.get('peak_pss_bytes', 0) / 1e9:.2f} | "
            f"{'yes' if r['sha256'] == ref else 'NO'} |"
        )
    return "\n".join(lines) + "\n"

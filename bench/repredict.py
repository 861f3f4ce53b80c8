"""A study re-predicted for another device, checked against that device: the demo's grid (examples/demo.toml) run
at the machine's default threads, re-predicted with a round-cost table measured alone at 1 torch thread (`greenspec
costs measure --threads 1`, `costs repredict`), against the same grid run at 1 thread, whose stratified timed
generations (24 coordinates x 3 prompts, each timed twice) are what the re-prediction must match.

Every step is the real CLI on a fresh SQLite file. Reported per regime: the re-prediction's error against the
1-thread timings and that run's own noise; beside it, the 1-thread run's own table against its own timings, and the
default-thread predictions (not re-predicted) against the 1-thread timings, the error a re-prediction removes.
`--quick`: the toy demo spec instead (examples/demo-toy.toml: seconds, no figure worth keeping).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
SPEC = ROOT / "examples" / "demo.toml"
TOY = ROOT / "examples" / "demo-toy.toml"
TABLE = "t1"


def _cli(db: str, *args: str) -> tuple[str, float]:
    """Run `greenspec --db db ARGS` (progress on this process's stderr); (its stdout, wall seconds)."""
    t0 = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-m", "orchestrator.cli", "--db", db, *args], cwd=ROOT, stdout=subprocess.PIPE, text=True
    )
    if done.returncode != 0:
        raise RuntimeError(f"greenspec {' '.join(args)} failed ({done.returncode}): {done.stdout.strip()[-500:]}")
    return done.stdout, time.perf_counter() - t0


def one_thread_spec(text: str, name: str) -> str:
    """The spec under another experiment name, its accelerator worker at 1 torch thread."""
    text = re.sub(r'(?m)^name = "[^"]+"', f'name = "{name}"', text, count=1)
    return re.sub(r"(?m)^\[verifier\]\n", "[verifier]\nthreads = 1\n", text, count=1)


def _regimes(df: pd.DataFrame) -> pd.DataFrame:
    return df[df["band"] == "all"].set_index("regime")


def run(quick: bool = False) -> str:
    spec = TOY if quick else SPEC
    text = spec.read_text()
    base = re.search(r'(?m)^name = "([^"]+)"', text).group(1)
    model = re.search(r'(?m)^model = "([^"]+)"', text.split("[verifier]", 1)[1]).group(1)
    target = f"{base}-1t"
    with tempfile.TemporaryDirectory() as d:
        db = f"sqlite:///{d}/repredict.db"
        one = Path(d) / "one-thread.toml"
        one.write_text(one_thread_spec(text, target))
        _, base_s = _cli(db, "run", str(spec))
        _, target_s = _cli(db, "run", str(one))
        _, measure_s = _cli(db, "costs", "measure", "--verifier", model, "--threads", "1",
                            "--experiment", base, "--name", TABLE)  # fmt: skip
        _cli(db, "costs", "repredict", "--experiment", base, "--costs", TABLE)
        import greenspec

        results = greenspec.open_results(db)
        derived = next(n for n in results.experiments()["name"] if n.startswith(f"{base}@"))
        repredicted = _regimes(results.validation(derived, timed_in=target))
        own = _regimes(results.validation(target))
        naive = _regimes(results.validation(base, timed_in=target))
    rows = []
    for regime in repredicted.index:
        r, o, n = repredicted.loc[regime], own.loc[regime], naive.loc[regime]
        table_error = f"table's own error {100 * r['table_error']:.1f}%"
        within = f"{r['within_noise']} ({table_error})"
        rows.append(
            f"| {regime} | {int(r['pairs'])} | {100 * r['median_error']:.1f}% | {100 * r['bias']:+.1f}% | "
            f"{100 * r['noise']:.1f}% ({int(r['noise_pairs'])}) | {within} | {r['spearman']:.2f} "
            f"({int(r['coordinates'])}) | {100 * o['median_error']:.1f}% | {100 * n['median_error']:.1f}% "
            f"({100 * n['bias']:+.1f}%) |"
        )
    return "\n".join(
        [
            "## A study re-predicted for 1 thread, against a run at 1 thread",
            "",
            f"[bench/repredict.py](bench/repredict.py) on `{spec.relative_to(ROOT)}`: the grid run at the default "
            f"threads ({base_s / 60:.1f} min), the same grid run with its accelerator worker at 1 torch thread "
            f"(`{target}`, {target_s / 60:.1f} min), a table measured alone at 1 thread (`greenspec costs measure "
            f"--threads 1`, {measure_s:.0f} s) and the first run re-predicted with it (`greenspec costs repredict`). "
            "Per regime, the re-predicted tokens/s against the 1-thread run's timed generations (`greenspec export "
            f"--validation -e {derived} --timed-in {target}`), with that run's own noise (generations timed twice); "
            "then the 1-thread run's own table against its timings, and the first run's predictions, not "
            "re-predicted, against the same timings.",
            *_same_threads_note(),
            "",
            "| regime | pairs | re-predicted: median error | bias | noise (twice) | within noise | Spearman "
            "(coordinates) | the 1-thread run's own table | not re-predicted (bias) |",
            "|---|---:|---:|---:|---:|---|---|---:|---:|",
            *rows,
        ]
    )


def _same_threads_note() -> list[str]:
    """Where a replayed run's accelerator worker already has 1 thread (it leaves a core to the replays), the caveat."""
    if (os.cpu_count() or 1) > 2:
        return []
    return [
        "",
        "On this 2-core machine a replayed run's accelerator worker already takes 1 thread (it leaves the other core "
        "to the replays), so both runs verify at 1 thread: what differs is only the table, measured alone or inside "
        "a run, and the table shows how far a table carries to another run of the same device; a change of device "
        "(more threads, a GPU: `bench/gpu.sh`) is not measured here.",
    ]


if __name__ == "__main__":  # `python -m bench.repredict [--quick]`: the section printed, BENCHMARKS.md left alone
    print(run(quick="--quick" in sys.argv))

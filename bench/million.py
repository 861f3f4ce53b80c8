"""A grid of about 10^6 replayed cells (`bench/million.toml`): `greenspec validate` on it, what `greenspec run`
does with it before its first Ray call (`orchestrator.run.prepare.prepare`, then the experiment's cells inserted into
a fresh SQLite database as the driver registers them, the grid streamed in chunks), the same registration again on
that database (what a resume after kill -9 does before its first Ray call: the grid's digest found registered, no
cell expanded or read), and
`greenspec status` over it, each timed in a fresh process with its peak memory.

The first call may build the built-in code corpus (minutes, once per machine; not timed): every timed call finds it
prepared, as the issue's figure assumes. `--quick` validates a grid of 100 prompts per task (108,900 sweep cells).
"""

from __future__ import annotations

import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

SPEC = Path(__file__).with_name("million.toml")
REPEATS = 3
TARGET_S, TARGET_MIB = 30, 1024  # the bound for `validate` on 10^6 cells, corpora prepared

# A child's own peak RSS in MiB: VmHWM, the peak of this process image (ru_maxrss keeps the forking parent's peak)
PEAK = 'next(int(line.split()[1]) for line in open("/proc/self/status") if line.startswith("VmHWM:")) / 1024'

# Each step in its own interpreter, which prints its cell count and its own peak RSS (not its children's).
CHILD = (
    """
import json, os, sys
step, path, db = sys.argv[1:4]
cells = None
if step == "validate":
    from orchestrator.cli import main
    main(["validate", path], standalone_mode=False)
elif step == "status":
    from orchestrator.cli import main
    main(["--db", f"sqlite:///{db}", "status"], standalone_mode=False)
else:  # what `greenspec run` (and `resume`) does before its first Ray call: prepare, then register the grid
    from orchestrator.run.driver import RunOptions, register
    from orchestrator.run.prepare import prepare
    from orchestrator.run.spec_paths import load_spec
    from storage import store
    from storage.db import open_db
    if step == "prepare" and os.path.exists(db):
        os.remove(db)  # a fresh database each time; "again" registers on the one left
    url, spec = f"sqlite:///{db}", load_spec(path)
    spec, _, grid = prepare(spec, store.registered_digest(url, spec.experiment.name))
    engine, Session = open_db(url)
    _, cells = register(spec, grid, (open(path).read(), path), Session, False, RunOptions(db_url=url))
    engine.dispose()
print(json.dumps({"cells": cells, "rss_mib": %s}))
"""
    % PEAK
)


def fresh(child: str, step: str, *args: str) -> tuple[float, dict]:
    """(wall seconds, the report it printed last, as JSON) of the script `child` run as `child STEP ARGS...` in a
    fresh interpreter at the repository's root."""
    t0 = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-c", child, step, *args], capture_output=True, text=True, cwd=SPEC.parents[1]
    )
    wall = time.perf_counter() - t0
    if done.returncode != 0:
        raise RuntimeError(f"{step} failed: {(done.stderr or done.stdout).strip().splitlines()[-1:]}")
    return wall, json.loads(done.stdout.strip().splitlines()[-1])


def measure(spec: Path, step: str, repeats: int, db: Path) -> tuple[float, float, int | None]:
    """(median wall seconds, largest peak RSS in MiB, cells) over `repeats` runs of a step."""
    runs = [fresh(CHILD, step, str(spec), str(db)) for _ in range(repeats)]
    return (
        statistics.median(w for w, _ in runs),
        max(r["rss_mib"] for _, r in runs),
        runs[0][1]["cells"],
    )


def run(quick: bool = False) -> str:
    text = SPEC.read_text()
    with tempfile.TemporaryDirectory() as d:
        spec = SPEC
        if quick:
            spec = Path(d) / "million-quick.toml"
            spec.write_text(text.replace("prompts = 900", "prompts = 100"))
        db = Path(d) / "million.db"
        fresh(CHILD, "validate", str(spec), str(db))  # builds the code corpus on a machine that has none yet: not timed
        repeats = 1 if quick else REPEATS
        v_wall, v_rss, _ = measure(spec, "validate", repeats, db)
        p_wall, p_rss, cells = measure(spec, "prepare", repeats, db)
        a_wall, a_rss, added = measure(spec, "again", repeats, db)
        s_wall, s_rss, _ = measure(spec, "status", repeats, db)
        if added:
            raise RuntimeError(f"registering the same grid again added {added} cells")
        summary = subprocess.run(
            [sys.executable, "-m", "orchestrator.cli", "validate", str(spec)], capture_output=True, text=True
        ).stdout
    sweep = int(summary.split(" sweep cells", 1)[0].rsplit(" ", 1)[-1])
    return "\n".join(
        [
            "## A million cells",
            "",
            f"`greenspec validate` on [bench/million.toml](bench/million.toml) ({'--quick: 100' if quick else '900'} "
            "prompts per task): the session drafts (ngram, ngram-paper, lookup, suffix, 16 strategies with plain) on "
            "three tasks over the built-in code corpus, k = 1..8, the three regimes, every greedy cell replayed; "
            f"the spec says {sweep:,} sweep cells, and the grid holds {cells:,} cells in all (references, the "
            "cost model and the timed sample of 30 coordinates included; repeated prompts are used once). Each step "
            f"in a fresh process, corpora and prompts already prepared; the median wall time of {repeats} run(s), the "
            "largest peak RSS.",
            "",
            "| step | cells | wall | peak RSS | goal |",
            "|---|---:|---:|---:|---|",
            f"| `greenspec validate` (keys streamed, 8 bytes a cell) | {cells:,} | {v_wall:.1f} s | {v_rss:,.0f} MiB "
            f"| <= {TARGET_S} s, <= {TARGET_MIB:,} MiB for 10^6 |",
            f"| the run's registration (`prepare`, then every cell inserted into SQLite, streamed) | {cells:,} | "
            f"{p_wall:.1f} s | {p_rss:,.0f} MiB | |",
            f"| the same registration again on that database (a resume's, before its first Ray call: 0 added) | "
            f"{cells:,} | {a_wall:.1f} s | {a_rss:,.0f} MiB | |",
            f"| `greenspec status` over it (every cell pending) | {cells:,} | {s_wall:.1f} s | {s_rss:,.0f} MiB | |",
        ]
    )


if __name__ == "__main__":  # `python -m bench.million [--quick]`: the section printed, BENCHMARKS.md left alone
    print(run(quick="--quick" in sys.argv))

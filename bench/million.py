"""A grid of about 10^6 replayed cells (`bench/million.toml`): `greenspec validate` on it, what `greenspec run`
does with it before its first Ray call (`orchestrator.run.prepare.prepare`, then the experiment's cells inserted into
a fresh database as the driver registers them, the grid streamed in chunks), a resume on that database up to its
first cell (what a resume after kill -9 does: the grid's digest found registered, no cell expanded; then every
pending cell read and queued), and
`greenspec status` over it, each timed in a fresh process with its peak memory, on SQLite and on PostgreSQL side by
side (a throwaway local server, `tests.pgserver`).

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
import json, sys
step, path, url = sys.argv[1:4]
cells = None
if step == "validate":
    from orchestrator.cli import main
    main(["validate", path], standalone_mode=False)
elif step == "status":
    from orchestrator.cli import main
    main(["--db", url, "status"], standalone_mode=False)
else:  # what `greenspec run` (and `resume`) does before its first Ray call: prepare, then register the grid
    from orchestrator.run.driver import RunOptions, register
    from orchestrator.run.prepare import prepare
    from orchestrator.run.spec_paths import load_spec
    from storage import store
    from storage.db import open_db
    spec = load_spec(path)  # "prepare" gets a fresh database each time; "again" registers on the one left
    spec, _, grid = prepare(spec, store.registered_digest(url, spec.experiment.name))
    engine, Session = open_db(url)
    exp_id, cells = register(spec, grid, (open(path).read(), path), Session, False, RunOptions(db_url=url))
    if step == "again":  # a resume goes on to read its pending cells and queue them: all before its first cell runs
        from orchestrator.run.scheduler import Scheduler
        from orchestrator.run.writer import pending_work
        work = pending_work(Session, exp_id)
        Scheduler(work.cells, 8, 3, built=set(work.paths) | work.prerequisites, order=spec.sweep.order)
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


def measure(spec: Path, step: str, repeats: int, url) -> tuple[float, float, int | None, str]:
    """(median wall seconds, largest peak RSS in MiB, cells, the last run's database URL) over `repeats` runs of a
    step; `url` is the database's URL, or a function giving a fresh empty database's for each run."""
    urls, runs = [], []
    for _ in range(repeats):  # a fresh database made just before its run (SQLite's is the same file, emptied)
        urls.append(url() if callable(url) else url)
        runs.append(fresh(CHILD, step, str(spec), urls[-1]))
    return (
        statistics.median(w for w, _ in runs),
        max(r["rss_mib"] for _, r in runs),
        runs[0][1]["cells"],
        urls[-1],
    )


def databases(d: Path):
    """(name, a function giving a fresh empty database's URL) for SQLite and for a throwaway PostgreSQL server
    (`tests.pgserver`; the server's own processes are not in the peak RSS), and the server to stop."""
    from tests.pgserver import PgCluster, pg_bin

    def sqlite() -> str:
        Path(d, "million.db").unlink(missing_ok=True)
        return f"sqlite:///{d}/million.db"

    if not (pg_bin("initdb") and pg_bin("pg_ctl")):
        raise RuntimeError("bench million needs PostgreSQL's initdb and pg_ctl (`make postgres`)")
    cluster = PgCluster(Path(tempfile.mkdtemp(prefix="pg-million-")))  # short: socket paths are limited
    return [("SQLite", sqlite), ("PostgreSQL", cluster.new_database)], cluster


def run(quick: bool = False) -> str:
    text = SPEC.read_text()
    with tempfile.TemporaryDirectory() as d:
        spec = SPEC
        if quick:
            spec = Path(d) / "million-quick.toml"
            spec.write_text(text.replace("prompts = 900", "prompts = 100"))
        fresh(CHILD, "validate", str(spec), "")  # builds the code corpus on a machine that has none yet: not timed
        repeats = 1 if quick else REPEATS
        v_wall, v_rss, *_ = measure(spec, "validate", repeats, "")
        backends, cluster = databases(Path(d))
        try:
            by = {}
            for name, new_url in backends:
                prepared = measure(spec, "prepare", repeats, new_url)
                by[name] = [prepared, *(measure(spec, step, repeats, prepared[3]) for step in ("again", "status"))]
                if by[name][1][2]:
                    raise RuntimeError(f"registering the same grid again added {by[name][1][2]} cells ({name})")
        finally:
            cluster.close()
        summary = subprocess.run(
            [sys.executable, "-m", "orchestrator.cli", "validate", str(spec)], capture_output=True, text=True
        ).stdout
    sweep = int(summary.split(" sweep cells", 1)[0].rsplit(" ", 1)[-1])
    cells = by["SQLite"][0][2]
    steps = (
        "the run's registration (`prepare`, then every cell inserted, streamed)",
        "a resume on that database up to its first cell: the registration again (0 added), the pending cells read, "
        "the scheduler's queues built",
        "`greenspec status` over it (every cell pending)",
    )
    rows = [
        f"| {step} | {cells:,} | "
        + " | ".join(f"{by[db][i][0]:.1f} s | {by[db][i][1]:,.0f} MiB" for db in ("SQLite", "PostgreSQL"))
        + " | |"
        for i, step in enumerate(steps)
    ]
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
            "largest peak RSS of the process (a PostgreSQL server's own processes not counted), on a SQLite file and "
            "on a local PostgreSQL server (unix socket, fsync off, as the tests run it).",
            "",
            "| step | cells | SQLite wall | SQLite peak RSS | PostgreSQL wall | PostgreSQL peak RSS | goal |",
            "|---|---:|---:|---:|---:|---:|---|",
            f"| `greenspec validate` (keys streamed, 8 bytes a cell; no database) | {cells:,} | {v_wall:.1f} s | "
            f"{v_rss:,.0f} MiB | | | <= {TARGET_S} s, <= {TARGET_MIB:,} MiB for 10^6 |",
            *rows,
        ]
    )


if __name__ == "__main__":  # `python -m bench.million [--quick]`: the section printed, BENCHMARKS.md left alone
    print(run(quick="--quick" in sys.argv))

"""Reading 10^6 generations: `greenspec status`, `export` (the summary, and `--generations`: every row), the
library's `open_results(db).results()` and `greenspec report`, each in a fresh process with its wall time and peak
RSS, over a database of about 10^6 generations written by `bench.dashboard_db.generate` (realistic shape, random
values: not measurements) and ended as a run ends (`bench.dashboard_db.end_run`: the summaries stored, itself
measured first), on SQLite and on PostgreSQL side by side (a throwaway local server, `tests.pgserver`).

`--quick`: 10^5 generations. Run alone: `python -m bench.million_results [--quick]` prints the section.
"""

from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path

from bench.dashboard_db import EXPERIMENT, generate
from bench.million import PEAK, fresh

FULL, QUICK = 1_000_000, 100_000

CHILD = (
    """
import json, sys
from orchestrator.cli import main
step, url, out = sys.argv[1:4]
if step == "end":
    from bench.dashboard_db import end_run
    end_run(url)
elif step == "status":
    main(["--db", url, "status"], standalone_mode=False)
elif step == "export":
    main(["--db", url, "export", "--format", "csv", "--out", out, "--force"], standalone_mode=False)
elif step == "generations":
    main(["--db", url, "export", "--generations", "--out", out, "--force"], standalone_mode=False)
elif step == "report":
    main(["--db", url, "report", "--out", out, "--force"], standalone_mode=False)
else:
    import greenspec
    print(len(greenspec.open_results(url).results()), "rows", file=sys.stderr)
print(json.dumps({"rss_mib": %s}))
"""
    % PEAK
)

STEPS = {
    "end": "the run's end: its summaries computed and stored (`orchestrator.run.summaries.keep_summaries`)",
    "status": "`greenspec status`",
    "export": "`greenspec export --format csv` (the summary: one row per cell with its intervals)",
    "generations": "`greenspec export --generations` (every generation, one row each)",
    "results": "`greenspec.open_results(db).results()` (the library's summary frame)",
    "report": "`greenspec report` (the HTML report: the summary, the findings, the cost model's error)",
}


def on(url: str, n: int, d: Path) -> tuple:
    """(generated, seconds to generate, [(step, wall, report), ...]) of one database at `url`."""
    t0 = time.perf_counter()
    made = generate(url, n)
    made_s = time.perf_counter() - t0
    out = {step: str(d / f"{step}.{'html' if step == 'report' else 'csv'}") for step in STEPS}
    return made, made_s, [(step, *fresh(CHILD, step, url, out[step])) for step in STEPS]


def run(quick: bool = False) -> str:
    from bench.million import databases

    n = QUICK if quick else FULL
    with tempfile.TemporaryDirectory() as d:
        [(_, sqlite), (_, postgres)], cluster = databases(Path(d))
        try:
            made, made_s, lite = on(sqlite(), n, Path(d))
            size_mib = Path(d, "million.db").stat().st_size / 2**20
            _, pg_s, pg = on(postgres(), n, Path(d))
        finally:
            cluster.close()
    lines = [
        "## 10^6 generations read back" if not quick else "## 10^5 generations read back (--quick)",
        "",
        f"[bench/million_results.py](bench/million_results.py): one experiment (`{EXPERIMENT}`) of "
        f"{made.generations:,} generations written by `bench.dashboard_db.generate` (SQLite: {made_s:.0f} s, a "
        f"{size_mib:,.0f} MiB file; PostgreSQL, a local server on a unix socket with fsync off: {pg_s:.0f} s; "
        f"{made.power_samples:,} power samples; realistic shape, random values), then the run's end and each read in "
        "a fresh process: wall time and the process's peak RSS (the PostgreSQL server's own processes not counted).",
        "",
        "| step | SQLite wall | SQLite peak RSS | PostgreSQL wall | PostgreSQL peak RSS |",
        "|---|---:|---:|---:|---:|",
    ]
    lines += [
        f"| {STEPS[step]} | {wall:.1f} s | {r['rss_mib']:,.0f} MiB | {p_wall:.1f} s | {p['rss_mib']:,.0f} MiB |"
        for (step, wall, r), (_, p_wall, p) in zip(lite, pg)
    ]
    return "\n".join(lines)


if __name__ == "__main__":  # `python -m bench.million_results [--quick]`: the section printed, BENCHMARKS.md left alone
    print(run(quick="--quick" in sys.argv))

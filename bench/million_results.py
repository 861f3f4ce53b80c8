"""Reading 10^6 generations: `greenspec status`, `export` (the summary, and `--generations`: every row), the
library's `open_results(db).results()` and `greenspec report`, each in a fresh process with its wall time and peak
RSS, over a database of about 10^6 generations written by `bench.dashboard_db.generate` (realistic shape, random
values: not measurements) and ended as a run ends (`bench.dashboard_db.end_run`: the summaries stored, itself
measured first), then every dashboard page's first and second render (`bench.dashboard.measure`), on SQLite and on
PostgreSQL side by side (a throwaway local server, `tests.pgserver`).

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


def on(url: str, n: int, d: Path, startup: str) -> tuple:
    """(generated, seconds to generate, [(step, wall, report), ...], the dashboard's pages) of one database at `url`;
    `startup`: the small database Streamlit starts on before the pages are timed (`bench.dashboard.measure`)."""
    from bench.dashboard import measure_in_child

    t0 = time.perf_counter()
    made = generate(url, n)
    made_s = time.perf_counter() - t0
    out = {step: str(d / f"{step}.{'html' if step == 'report' else 'csv'}") for step in STEPS}
    steps = [(step, *fresh(CHILD, step, url, out[step])) for step in STEPS]
    return made, made_s, steps, measure_in_child(url, startup, pages_only=True)


def pages_table(lite: dict, pg: dict) -> list[str]:
    """The dashboard's pages over both databases: cold and warm wall seconds with CPU seconds, then memory."""
    from bench.dashboard import PAGES

    def cells(r: dict, page: str) -> str:
        cold, warm, cold_cpu, warm_cpu = r["pages"][page]
        return f"{cold:.2f} ({cold_cpu:.2f}) | {warm:.2f} ({warm_cpu:.2f})"

    return [
        "| dashboard page | SQLite cold s (CPU) | SQLite warm s (CPU) | PostgreSQL cold s (CPU) | PostgreSQL warm s (CPU) |",
        "|---|---:|---:|---:|---:|",
        *(f"| {page} | {cells(lite, page)} | {cells(pg, page)} |" for page in PAGES),
        f"| Streamlit's start-up (400 generations, SQLite), s | {lite['startup_s']:.2f} | | {pg['startup_s']:.2f} | |",
        f"| peak RSS, all pages | {lite['peak_rss_mb']:,.0f} MB | | {pg['peak_rss_mb']:,.0f} MB | |",
    ]


def run(quick: bool = False) -> str:
    from bench.dashboard import STARTUP_SIZE, database
    from bench.million import databases

    n = QUICK if quick else FULL
    startup = database(STARTUP_SIZE)
    with tempfile.TemporaryDirectory() as d:
        [(_, sqlite), (_, postgres)], cluster = databases(Path(d))
        try:
            made, made_s, lite, lite_pages = on(sqlite(), n, Path(d), startup)
            size_mib = Path(d, "million.db").stat().st_size / 2**20
            _, pg_s, pg, pg_pages = on(postgres(), n, Path(d), startup)
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
    lines += [
        "",
        'Then every dashboard page over each database, as section "Dashboard" measures them (Streamlit\'s AppTest in a '
        "fresh process, started first on a small database; cold: the first render with every cache empty, warm: the "
        "next; goals at 10^6: cold < 3 s, warm < 1 s beyond the start-up):",
        "",
        *pages_table(lite_pages, pg_pages),
    ]
    return "\n".join(lines)


if __name__ == "__main__":  # `python -m bench.million_results [--quick]`: the section printed, BENCHMARKS.md left alone
    print(run(quick="--quick" in sys.argv))

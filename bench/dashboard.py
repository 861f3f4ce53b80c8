"""Dashboard at scale: cold and warm render time of every page, `export` and `status` times, peak memory.

Databases are *generated* (bench/dashboard_db.py: realistic shape, random values) with 10^4 and 10^5 generations,
and 10^6 when `GREENSPEC_BENCH_DASHBOARD_MAX=1000000`, each ended as a run ends (its summaries stored); they are
cached under `$GREENSPEC_CACHE/bench/`. Each size
is measured in a fresh process: Streamlit's AppTest first renders a 400-generation database (imports, Streamlit's
own start-up), then for each page all caches are cleared and the page rendered twice: *cold* (first render, beyond
start-up) and *warm* (a repeat render, as the next click). Peak memory is the process's maximum resident set. Last,
the summary is computed from the rows once: what a first view adds where none is stored (a run still going).

A real run's database is measured beside them when `GREENSPEC_BENCH_DASHBOARD_DB` names it (e.g. the demo's
`sqlite:///greenspec.db`): the pages' first view on real results.

Usage: python -m bench dashboard [--quick]; python -m bench.dashboard measure URL (one size, JSON on stdout).
"""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
import time
from pathlib import Path

PAGES = ("overview", "throughput", "acceptance", "energy", "texts", "paper", "costs")
SIZES = (10_000, 100_000)
STARTUP_SIZE = 400
APP = Path(__file__).resolve().parents[1] / "dashboard" / "app.py"
TIMEOUT_S = 300
GENERATOR_VERSION = "4"  # bump when bench/dashboard_db.py or the schema changes what it writes


def database(n: int) -> str:
    """URL of a generated database of `n` generations, built once and cached."""
    from bench.dashboard_db import end_run, generate
    from workers.files import cache_dir

    folder = cache_dir() / "bench"
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"dashboard-{n}-v{GENERATOR_VERSION}.db"
    if not path.is_file():
        tmp = path.with_suffix(".tmp")
        for stale in folder.glob(f"{tmp.name}*"):
            stale.unlink()
        t0 = time.perf_counter()
        made = generate(f"sqlite:///{tmp}", n)
        ended = end_run(f"sqlite:///{tmp}")
        print(
            f"  generated {made.generations:,} generations ({made.power_samples:,} power samples) in "
            f"{time.perf_counter() - t0 - ended:.0f} s; the run's end stored its summaries in {ended:.0f} s",
            file=sys.stderr,
        )
        tmp.rename(path)
    else:  # a cached database: its stored frames brought to today's code (the run's end stores only what is stale)
        ended = end_run(f"sqlite:///{path}")
        if ended > 5:
            print(f"  {path.name}: stale stored frames stored again in {ended:.0f} s", file=sys.stderr)
    return f"sqlite:///{path}"


def _render(page: str, url: str) -> tuple[float, float, float, float]:
    """Cold and warm render seconds of one page over `url`, caches cleared first: wall, then CPU (all threads)."""
    import streamlit as st
    from streamlit.testing.v1 import AppTest

    os.environ["GREENSPEC_DB"] = url
    st.cache_data.clear()
    st.cache_resource.clear()
    at = AppTest.from_file(str(APP), default_timeout=TIMEOUT_S)
    at.switch_page(f"views/{page}.py")
    t0, c0 = time.perf_counter(), time.process_time()
    at.run()
    cold, cold_cpu = time.perf_counter() - t0, time.process_time() - c0
    t0, c0 = time.perf_counter(), time.process_time()
    at.run()
    warm, warm_cpu = time.perf_counter() - t0, time.process_time() - c0
    if at.exception:
        raise RuntimeError(f"{page}: {[e.value for e in at.exception]}")
    return cold, warm, cold_cpu, warm_cpu


def _cli_tables(url: str) -> dict[str, float]:
    """Seconds for the export table (CSV) and `status --json` counts, in process."""
    from greenspec.frames import export_frame, render
    from storage.db import open_db
    from storage.queries import status_counts

    _, Session = open_db(url, migrate=False)
    with Session() as s:
        t0 = time.perf_counter()
        render(export_frame(s, None), "csv")
        export_s = time.perf_counter() - t0
        t0 = time.perf_counter()
        status_counts(s, None)
        status_s = time.perf_counter() - t0
    return {"export_s": export_s, "status_s": status_s}


def _computed_summary_s(url: str) -> float:
    """Seconds for the dashboard's summary computed from the rows: what a summary page's first view adds while no
    summary is stored at the experiment's current data version (a run still going)."""
    from analysis.summary import computed_summary
    from storage.db import open_db
    from storage.queries import experiment_id

    _, Session = open_db(url, migrate=False)
    with Session() as s:
        t0 = time.perf_counter()
        computed_summary(s, experiment_id(s, None), False, None)
        return time.perf_counter() - t0


def _peak_mb() -> float:
    """This process's peak resident set (VmHWM: its own, where ru_maxrss would carry the bench parent's over exec)."""
    with open("/proc/self/status") as fh:
        return next(int(line.split()[1]) for line in fh if line.startswith("VmHWM:")) / 1024


def measure(url: str, startup_url: str, pages_only: bool = False) -> dict:
    """All figures for one database (run in a fresh process); `pages_only`: start-up and the pages, no CLI tables and
    no summary computed from the rows."""
    logging.disable(logging.WARNING)  # Streamlit warns about missing ScriptRunContext outside `streamlit run`
    t0 = time.perf_counter()
    _render("overview", startup_url)
    startup_s = time.perf_counter() - t0
    startup_rss_mb = _peak_mb()
    pages = {page: _render(page, url) for page in PAGES}
    out = {"startup_s": startup_s, "startup_rss_mb": startup_rss_mb, "pages": pages, "peak_rss_mb": _peak_mb()}
    if pages_only:
        return out
    out |= _cli_tables(url)
    out["computed_s"] = _computed_summary_s(url)  # last: its memory would hide the pages' own peak
    return out | {"computed_rss_mb": _peak_mb()}


def measure_in_child(url: str, startup_url: str, pages_only: bool = False) -> dict:
    """`measure` in a fresh process."""
    env = {**os.environ, "PYTHONPATH": str(APP.parents[1])}
    out = subprocess.run(
        [sys.executable, "-m", "bench.dashboard", "measure", url, startup_url, *(["--pages"] if pages_only else [])],
        env=env,
        capture_output=True,
        text=True,
        timeout=3600,
        check=False,
    )
    if out.returncode != 0:
        raise RuntimeError(f"dashboard bench failed for {url}: {out.stderr[-2000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def run(quick: bool = False) -> str:
    """The Markdown section for BENCHMARKS.md."""
    top = int(os.environ.get("GREENSPEC_BENCH_DASHBOARD_MAX", SIZES[-1]))
    sizes = (10_000,) if quick else tuple(sorted({*SIZES, top}))
    startup = database(STARTUP_SIZE)
    results = {}
    for n in sizes:
        print(f"  dashboard over {n:,} generations", file=sys.stderr)
        results[f"{n:,}"] = measure_in_child(database(n), startup)
    real = os.environ.get("GREENSPEC_BENCH_DASHBOARD_DB")
    if real:
        print(f"  dashboard over {real}", file=sys.stderr)
        results[f"{real.rsplit('/', 1)[-1]} ({generations(real):,})"] = measure_in_child(real, startup)
    return section(results, skipped_1m=1_000_000 not in sizes)


def generations(url: str) -> int:
    """How many generations the database at `url` holds."""
    from sqlalchemy import func, select

    from storage.db import open_db
    from storage.models import Generation

    engine, Session = open_db(url, migrate=False)
    with Session() as s:
        n = s.scalar(select(func.count()).select_from(Generation))
    engine.dispose()
    return int(n or 0)


def section(results: dict[str, dict], skipped_1m: bool) -> str:
    """The benchmark's Markdown: one row per page, cold/warm columns per database (generated sizes, a real run's)."""
    sizes = list(results)
    head = "| page | " + " | ".join(f"{n}: cold s (CPU) | {n}: warm s (CPU)" for n in sizes) + " |"
    rows = [head, "|---|" + "---:|---:|" * len(sizes)]
    for page in PAGES:
        cells = " | ".join("{0:.2f} ({2:.2f}) | {1:.2f} ({3:.2f})".format(*results[n]["pages"][page]) for n in sizes)
        rows.append(f"| {page} | {cells} |")
    extra = ["| measure | " + " | ".join(sizes) + " |", "|---|" + "---:|" * len(sizes)]
    for label, key, fmt in (
        ("Streamlit start-up (400 generations), s", "startup_s", "{:.2f}"),
        ("RSS after start-up, MB", "startup_rss_mb", "{:.0f}"),
        ("peak RSS, all pages, MB", "peak_rss_mb", "{:.0f}"),
        ("export table (CSV), s", "export_s", "{:.2f}"),
        ("status counts, s", "status_s", "{:.3f}"),
        ("summary computed from the rows (none stored), s", "computed_s", "{:.2f}"),
        ("peak RSS with it, MB", "computed_rss_mb", "{:.0f}"),
    ):
        extra.append(f"| {label} | " + " | ".join(fmt.format(results[n][key]) for n in sizes) + " |")
    note = (
        'The pages at 10^6 generations, on SQLite and on PostgreSQL: section "10^6 generations read back" '
        "(`python -m bench million_results`; this section adds a 10^6 column with `GREENSPEC_BENCH_DASHBOARD_MAX=1000000`)."
        if skipped_1m
        else ""
    )
    return (
        "\n".join(
            [
                "## Dashboard",
                "",
                "Every page rendered by Streamlit's AppTest over *generated* databases (bench/dashboard_db.py: 10 strategies x "
                "5 tasks x k {3, 5, 8} x 2 regimes, 100 tokens per generation, 10 Hz power samples for a quarter of them; "
                "random values of realistic shape, not measurements), each a finished run's: its summaries stored as "
                "the run's end stores them (`bench.dashboard_db.end_run`). Cold: the first render with every cache empty, "
                "in a process where Streamlit has already started; warm: the next render. Wall seconds, with the "
                "process's CPU seconds (all threads) in brackets: the steadier figure where the cores are shared. "
                "Goals: at 10^5 cold < 1.5 s, warm < 0.3 s, peak memory < 500 MB; at 10^6 cold < 3 s, warm < 1 s. "
                "The summary computed from the rows is what a summary page's first view adds where none is stored at "
                "the current data version (a run still going).",
                "",
                *rows,
                "",
                *extra,
                "",
                note,
            ]
        ).rstrip()
        + "\n"
    )


if __name__ == "__main__":
    if sys.argv[1:2] == ["measure"]:
        print(json.dumps(measure(sys.argv[2], sys.argv[3], pages_only="--pages" in sys.argv)))
    else:
        print(run(quick="--quick" in sys.argv))

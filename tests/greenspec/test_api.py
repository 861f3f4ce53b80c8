"""The Python API (`greenspec`): the README's block runs as written, its frames are the export's, and the HTML
report holds every cell with its interval and a verdict that follows from it."""

from __future__ import annotations

import html
import io
import re
import shutil
import sqlite3
import subprocess
from dataclasses import replace
from pathlib import Path

import pandas as pd
import pytest

import greenspec
from analysis.tables import PAPER_TABLES, paper_table
from greenspec.report import export_command, regime_table, tally, verdict
from tests.dashboard.populate import EXPERIMENT, populate
from tests.orchestrator.conftest import cli
from workers.errors import GreenspecError

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def url(tmp_path_factory) -> str:
    path = tmp_path_factory.mktemp("api") / "greenspec.db"
    populate(f"sqlite:///{path}")
    return f"sqlite:///{path}"


def readme_block() -> str:
    section = (ROOT / "README.md").read_text().split("## From Python", 1)[1].split("\n## ", 1)[0]
    return re.search(r"```python\n(.*?)```", section, flags=re.S).group(1)


def test_the_readme_block_runs_as_written(url, tmp_path, monkeypatch, capsys):
    with sqlite3.connect(url.removeprefix("sqlite:///")) as src, sqlite3.connect(tmp_path / "greenspec.db") as dst:
        src.backup(dst)  # the fixture's database as ./greenspec.db (its WAL included)
    monkeypatch.chdir(tmp_path)
    names: dict = {}
    exec(readme_block(), names)
    assert EXPERIMENT in capsys.readouterr().out
    assert len(names["results"]) and len(names["gens"]) == names["results"]["generations"].sum()
    assert (names["faster"]["speedup_lo"] > 1).all()
    assert (tmp_path / "report.html").stat().st_size > 0


def test_results_and_generations_are_the_export(url):
    db = greenspec.open_results(url)
    code, out, err = cli("--db", url, "export", "--format", "csv")
    assert code == 0, err
    exported = pd.read_csv(io.StringIO(out))
    ours = db.results(EXPERIMENT)
    assert list(ours.columns) == list(exported.columns) and len(ours) == len(exported)
    pd.testing.assert_series_equal(ours["speedup"], exported["speedup"], check_dtype=False, check_names=False)
    code, out, err = cli("--db", url, "export", "--generations", "--format", "csv")
    assert len(db.generations(EXPERIMENT)) == len(pd.read_csv(io.StringIO(out)))
    assert db.status(EXPERIMENT)["cells"]["done"] > 0


def test_no_database_is_one_line(tmp_path):
    with pytest.raises(GreenspecError, match="no greenspec results at"):
        greenspec.open_results(f"sqlite:///{tmp_path / 'none.db'}")


@pytest.mark.parametrize(
    "lo,hi,expected",
    [
        (1.02, 1.3, "faster"),
        (0.7, 0.98, "slower"),
        (0.9, 1.1, "inconclusive"),
        (1.0, 1.2, "inconclusive"),  # touching 1: "speedup > 1" does not hold on the whole interval
        (0.8, 1.0, "inconclusive"),
        (None, None, "inconclusive"),
    ],
)
def test_a_verdict_is_where_the_whole_interval_lies_against_one(lo, hi, expected):
    assert verdict(pd.Series({"strategy": "ngram", "speedup_lo": lo, "speedup_hi": hi})) == expected
    assert verdict(pd.Series({"strategy": "plain", "speedup_lo": lo, "speedup_hi": hi})) == "baseline"


def test_the_report_shows_every_cell_with_its_interval_and_verdict(url, tmp_path):
    db = greenspec.open_results(url)
    results = db.results(EXPERIMENT)
    path = db.report(EXPERIMENT, tmp_path / "r.html")
    page = path.read_text()
    markup = re.sub(r"<script[^>]*>.*?</script>", "", page, flags=re.S)  # plotly.js inlined, its strings aside
    assert (
        page.startswith("<!doctype html>") and "<script src" not in page and not re.search(r"(src|href)=.http", markup)
    )
    for regime in results["regime"].unique():
        part = results[results["regime"] == regime]
        table = regime_table(part)
        assert len(table) == len(part)
        for v, n in tally(table).items():
            assert f'<span class="{v}">{n} {v}</span>' in page
        row = part[part["strategy"] != "plain"].iloc[0]
        assert f"{row['speedup']:.2f} [{row['speedup_lo']:.2f}, {row['speedup_hi']:.2f}]" in page
    assert page.count("Plotly.newPlot") == 2  # speedup against acceptance and against k, a panel per regime each
    for key in ("table1", "table2"):  # the paper's tables, as the dashboard defines them
        spec = PAPER_TABLES[key]
        table = paper_table(results, spec.metrics, spec.regime)
        assert (html.escape(spec.title) in page) == (not table.empty)
        if not table.empty:
            speedups = table.xs("speedup", axis=1, level=1).stack().dropna()
            assert all(f">{v:.2f}x<" in page for v in speedups)
    assert "font-weight: bold" in page  # the best per column
    assert page.count("<details><summary>The spec</summary>") == 1 and '<h2 id="failures">Failures</h2>' in page
    failed = db.report_data(EXPERIMENT).failures
    assert len(failed) and all(html.escape(str(e)) in page for e in failed["error"])
    with pytest.raises(GreenspecError, match="exists"):
        db.report(EXPERIMENT, path)  # an existing file only with force
    with pytest.raises(GreenspecError, match="SQLite database"):
        db.report(EXPERIMENT, url.removeprefix("sqlite:///"), force=True)


def test_the_reports_export_command_names_its_database(url, tmp_path):
    """The footer's command runs as shown: with the --db the report was read from (a password masked)."""
    page = greenspec.open_results(url).report(EXPERIMENT, tmp_path / "r.html").read_text()
    command = f"greenspec --db {url} export --experiment {EXPERIMENT} --format csv"
    assert f"<code>{html.escape(command)}</code>" in page
    code, out, err = cli(*command.split()[1:])
    assert code == 0 and len(pd.read_csv(io.StringIO(out))) == len(greenspec.open_results(url).results(EXPERIMENT))
    data = greenspec.open_results(url).report_data(EXPERIMENT)
    remote = replace(data, db_url="postgresql://me:hunter2@db.example/runs", info={**data.info, "name": "my run"})
    assert export_command(remote) == (
        "greenspec --db 'postgresql://me:***@db.example/runs' export --experiment 'my run' --format csv"
    )


def test_the_report_command(url, tmp_path):
    out = tmp_path / "r.html"
    code, _, err = cli("--db", url, "report", "-e", EXPERIMENT, "--out", str(out))
    assert code == 0 and out.is_file() and "report:" in err, err
    code, _, err = cli("--db", url, "report", "-e", "nope", "--out", str(tmp_path / "x.html"))
    assert code == 2 and "no experiment 'nope'" in err and not (tmp_path / "x.html").exists()


def test_the_report_renders_in_headless_chromium_with_its_figures_and_the_databases_numbers(url, tmp_path):
    chromium = shutil.which("chromium")
    if chromium is None:  # under CI=true, tests/conftest.py fails the run instead
        pytest.skip("chromium is not installed (make browser installs Debian's chromium)")
    db = greenspec.open_results(url)
    path = db.report(EXPERIMENT, tmp_path / "r.html")
    cmd = [
        chromium,
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        f"--user-data-dir={tmp_path / 'chrome'}",
        "--virtual-time-budget=10000",
        "--dump-dom",
        path.as_uri(),
    ]
    dom = subprocess.run(cmd, capture_output=True, text=True, timeout=120).stdout
    results = db.results(EXPERIMENT)
    assert dom.count('class="main-svg"') >= results["regime"].nunique()  # plotly drew every figure, offline
    assert len(re.findall(r'class="point"', dom)) >= len(results[results["strategy"] != "plain"])  # a mark per cell
    row = results[results["strategy"] != "plain"].iloc[-1]
    assert f"{row['acceptance']:.3f} [{row['acceptance_lo']:.3f}, {row['acceptance_hi']:.3f}]" in dom

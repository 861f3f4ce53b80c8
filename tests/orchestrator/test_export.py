"""`greenspec export` and `status` over a populated database: every format, the contract's columns."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from orchestrator.export import EXPORT_COLUMNS
from tests.dashboard.populate import populate

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def db(tmp_path_factory) -> str:
    url = f"sqlite:///{tmp_path_factory.mktemp('export') / 'g.db'}"
    populate(url)
    return url


def greenspec(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "orchestrator.cli", *args], cwd=ROOT, capture_output=True, text=True, timeout=120
    )


def test_csv_has_one_row_per_strategy_task_k_regime(db, tmp_path):
    out = tmp_path / "t.csv"
    res = greenspec("--db", db, "export", "--format", "csv", "--out", str(out))
    assert res.returncode == 0, res.stderr
    df = pd.read_csv(out)
    assert list(df.columns[: len(EXPORT_COLUMNS)]) == EXPORT_COLUMNS
    # plain once per task x regime (k = 0), ngram and olifant at k 3 and 5
    assert len(df) == 2 * 2 * (1 + 2 * 2)
    assert not df.duplicated(["strategy", "task", "k", "regime"]).any()
    plain = df[df["strategy"] == "plain"]
    assert (plain["speedup"].round(9) == 1.0).all() and (plain["k"] == 0).all()
    drafted = df[df["strategy"] != "plain"]
    assert drafted["acceptance"].between(0, 1).all() and (drafted["mal"] >= 0).all()
    assert df["j_per_100_tokens"].gt(0).all() and set(df["power_source"]) == {"nvml"}


@pytest.mark.parametrize("fmt,marker", [("markdown", "| strategy"), ("latex", "\\begin{tabular}")])
def test_text_formats(db, fmt, marker):
    res = greenspec("--db", db, "export", "--format", fmt)
    assert res.returncode == 0, res.stderr
    assert marker in res.stdout and "olifant-wikitext" in res.stdout


def test_parquet(db, tmp_path):
    out = tmp_path / "t.parquet"
    assert greenspec("--db", db, "export", "--format", "parquet", "--out", str(out)).returncode == 0
    df = pd.read_parquet(out)
    assert set(EXPORT_COLUMNS) <= set(df.columns) and len(df) == 20


def test_parquet_to_stdout_refused(db):
    res = greenspec("--db", db, "export", "--format", "parquet")
    assert res.returncode != 0 and "--out" in res.stderr


def test_status_json_contract(db):
    res = greenspec("--db", db, "status", "--json")
    data = json.loads(res.stdout)
    assert set(data["cells"]) == {"pending", "running", "done", "failed"}
    assert data["sweep"]["failed"] == 1 and data["generations"] == data["sweep"]["done"]


def test_status_text_shows_failures(db):
    res = greenspec("--db", db, "status")
    assert res.returncode == 0 and "failed cells:" in res.stdout


@pytest.fixture(scope="module")
def known_db(tmp_path_factory) -> str:
    from tests.storage.known import build

    url = f"sqlite:///{tmp_path_factory.mktemp('known') / 'k.db'}"
    build(url)
    return url


def _cell(df: pd.DataFrame, strategy: str, k: int, regime: str) -> pd.Series:
    return df[(df["strategy"] == strategy) & (df["k"] == k) & (df["regime"] == regime)].iloc[0]


def test_export_carries_the_papers_quantities(known_db, tmp_path):
    out = tmp_path / "k.csv"
    assert greenspec("--db", known_db, "export", "--out", str(out)).returncode == 0
    df = pd.read_csv(out)
    assert {"energy_ratio", "first_token_acceptance", "mal", "speedup"} <= set(df.columns)
    ngram = _cell(df, "ngram", 2, "uncached")
    assert ngram["speedup"] == pytest.approx(2.4)  # mean tok/s (20 + 10) / 2 over plain's (10 + 2.5) / 2
    assert ngram["energy_ratio"] == pytest.approx(4.0)  # plain 2000 J/100 tok / ngram 500: plain ÷ strategy
    assert ngram["first_token_acceptance"] == pytest.approx((3 / 5 + 3 / 7) / 2)
    assert _cell(df, "ngram", 2, "cached")["first_token_acceptance"] == pytest.approx(2 / 3)  # 1 - 2 rejects / 6


def test_export_pooled_flag(known_db, tmp_path):
    out = tmp_path / "p.csv"
    res = greenspec("--db", known_db, "export", "--pooled", "--out", str(out))
    assert res.returncode == 0, res.stderr
    ngram = _cell(pd.read_csv(out), "ngram", 2, "uncached")
    assert ngram["speedup"] == pytest.approx(10 / 3)  # (20 tok / 1.5 s) / (20 tok / 5.0 s)
    assert ngram["acceptance"] == pytest.approx(1 / 3)  # 8 accepted / 24 drafted

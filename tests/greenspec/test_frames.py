"""`greenspec export` and `status` over a populated database: every format, the contract's columns."""

from __future__ import annotations

import io
import json
import subprocess

import pandas as pd
import pytest

from greenspec.frames import EXPORT_COLUMNS, interval_text
from tests.dashboard.populate import populate
from tests.orchestrator.conftest import cli


@pytest.fixture(scope="module")
def db(tmp_path_factory) -> str:
    url = f"sqlite:///{tmp_path_factory.mktemp('export') / 'g.db'}"
    populate(url)
    return url


def greenspec(*args: str) -> subprocess.CompletedProcess:
    """`greenspec ARGS` in this process (click's runner: the same exit code and output as a process of its own,
    without its seconds of imports; tests/orchestrator/run/test_driver.py runs export as a real process)."""
    code, out, err = cli(*args)
    return subprocess.CompletedProcess(list(args), code, out, err)


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


@pytest.mark.parametrize("fmt", ["markdown", "latex"])
def test_text_formats_keep_the_intervals_csv_has(db, fmt):
    """Markdown and LaTeX show each figure with its 95% interval in one cell, to the figure's decimals."""
    csv = pd.read_csv(io.StringIO(greenspec("--db", db, "export", "--format", "csv").stdout))
    text = greenspec("--db", db, "export", "--format", fmt).stdout
    row = csv[(csv["strategy"] == "ngram") & (csv["k"] == 3)].iloc[0]
    for name in ("speedup", "acceptance", "tokens_per_s", "energy_ratio"):
        cell = interval_text(row[name], row[f"{name}_lo"], row[f"{name}_hi"])
        assert cell.count("[") == 1 and cell in text, (name, cell)
    assert "_lo" not in text and "_hi" not in text  # no bound columns beside the cells


def test_interval_text_shows_bounds_to_the_figures_decimals():
    assert interval_text(0.1234, 0.101, 0.14) == "0.123 [0.101, 0.140]"
    assert interval_text(1.234, 1.1, 1.36) == "1.23 [1.10, 1.36]"
    assert interval_text(1234.4, 1100, 1400.2) == "1234 [1100, 1400]"
    assert interval_text(0.5, float("nan"), 1.0) == "0.500" and interval_text(float("nan"), 0, 1) is None


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


SPEC = """
[experiment]
name = "v"
[verifier]
model = "org/model"
[[tasks]]
name = "t"
path = "demo:pydoc-test"
{strategies}
[sweep]
max_new_tokens = {tokens}
k = [2]
regimes = ["uncached"]
"""
PLAIN_S = '[[strategies]]\nname = "plain"\ndraft = "plain"\n'
NGRAM_S = '[[strategies]]\nname = "ngram"\ndraft = "ngram"\n'
PROMPTS = ("first prompt text", "second prompt text")


@pytest.fixture(scope="module")
def versions_db(tmp_path_factory) -> str:
    """tests/analysis/test_summary_versions.py's two spec versions, stored as a run stores them: v1 (ngram and plain,
    16 tokens), then v2 (plain alone, 12 tokens) as the experiment's spec; reference cells keyed as the real grid
    expansion keys them."""
    from sqlalchemy import insert

    from orchestrator.run.cells import TaskPrompts, reference_cells
    from orchestrator.run.spec import parse_spec
    from storage.db import open_db
    from storage.models import Cell, Experiment
    from tests.analysis.test_summary_versions import V1, V2, _add

    url = f"sqlite:///{tmp_path_factory.mktemp('versions') / 'v.db'}"
    v1 = SPEC.format(strategies=PLAIN_S + NGRAM_S, tokens=16)
    v2 = SPEC.format(strategies=PLAIN_S, tokens=12)
    engine, _ = open_db(url)
    with engine.begin() as conn:
        exp_id = conn.execute(insert(Experiment).values(name="v", spec_toml=v2, spec_hash="")).inserted_primary_key[0]
        keys = {}
        for text in (v1, v2):
            spec = parse_spec(text)
            for c in reference_cells(spec, TaskPrompts("t", PROMPTS)):
                keys[spec.sweep.max_new_tokens, c.prompt_index] = c.key
                values = dict(kind="reference", state="done", task="t", prompt_index=c.prompt_index)
                conn.execute(insert(Cell).values(experiment_id=exp_id, key=c.key, params=c.params.to_json(), **values))
        for prompt, (ngram_s, plain_s) in V1.items():
            _add(conn, exp_id, "ngram", prompt, 16, ngram_s, keys[16, prompt])
            _add(conn, exp_id, "plain", prompt, 16, plain_s, keys[16, prompt])
        for prompt, plain_s in V2.items():
            _add(conn, exp_id, "plain", prompt, 12, plain_s, keys[12, prompt])
    engine.dispose()
    return url


def test_an_earlier_spec_version_is_hidden_unless_asked_for_and_never_divided_by_the_new_plain(versions_db):
    from greenspec.frames import export_frame
    from storage.db import open_db

    with open_db(versions_db, migrate=False)[1]() as s:
        current, every = export_frame(s, "v"), export_frame(s, "v", all_versions=True)
    assert list(zip(current["strategy"], current["version"])) == [("plain", "current")]
    assert current.iloc[0]["tokens_per_s"] == pytest.approx(12.0)  # the 12-token plain
    assert set(zip(every["strategy"], every["version"])) == {
        ("plain", "current"),
        ("plain", "older"),
        ("ngram", "older"),
    }
    ngram = every[every["strategy"] == "ngram"].iloc[0]
    assert ngram["speedup"] == pytest.approx(2.0)  # (16 + 8) / (8 + 4) tok/s at 16 tokens; 12 / 12 would be 1.0


def test_export_generations_recomputes_the_summary_intervals(known_db, tmp_path):
    from analysis.stats import paired_ratio, ratio_of_sums

    out, gens_out = tmp_path / "s.csv", tmp_path / "g.csv"
    assert greenspec("--db", known_db, "export", "--out", str(out)).returncode == 0
    res = greenspec("--db", known_db, "export", "--generations", "--all-versions", "--out", str(gens_out))
    assert res.returncode == 0, res.stderr
    summary, gens = pd.read_csv(out), pd.read_csv(gens_out)
    assert len(gens) == 7 and set(gens["measure"]) == {"timed"}
    assert {"prompt_index", "steps", "drafted", "accepted", "n_tokens", "tokens_per_s", "j_per_100_tokens"} <= set(
        gens.columns
    )
    ngram = gens[(gens["strategy"] == "ngram") & (gens["k"] == 2) & (gens["regime"] == "uncached")]
    plain = gens[(gens["strategy"] == "plain") & (gens["regime"] == "uncached")]
    paired = ngram.merge(plain, on="prompt_index", suffixes=("", "_plain"))
    speedup = paired_ratio(paired["tokens_per_s"], paired["tokens_per_s_plain"])
    row = _cell(summary, "ngram", 2, "uncached")
    assert (speedup.value, speedup.lo, speedup.hi) == pytest.approx(
        (row["speedup"], row["speedup_lo"], row["speedup_hi"])
    )
    rate = ngram["accepted"] / ngram["drafted"]
    acceptance = ratio_of_sums(rate, [1.0] * len(rate))  # the per-prompt mean's interval
    assert (acceptance.lo, acceptance.hi) == pytest.approx((row["acceptance_lo"], row["acceptance_hi"]))
    assert row["n_prompts"] == len(ngram) == 2


def test_versions_fall_back_to_the_newest_reference_of_each_prompt(versions_db, tmp_path):
    """A stored spec that reproduces no stored reference key (rewritten before it ran, as the demo's built models
    are): the newest reference cell of each task and prompt is the current version."""
    import shutil

    from greenspec.frames import versions
    from storage.db import open_db
    from storage.models import Experiment

    url = f"sqlite:///{tmp_path / 'v.db'}"
    shutil.copy(versions_db.removeprefix("sqlite:///"), tmp_path / "v.db")
    engine, Session = open_db(url, migrate=False)
    with Session() as s:
        exp = s.query(Experiment).one()
        exp.spec_toml = exp.spec_toml.replace('"org/model"', '"org/another-model"')
        s.commit()
        v = versions(s, exp.id)
    assert v.strategies == {"plain"} and len(v.older) == 2  # the two 16-token references
    with Session() as s:
        exp = s.query(Experiment).one()
        exp.spec_toml = "not = [toml"
        s.commit()
        assert versions(s, exp.id) is None  # no spec to compare with: every row counts as current
    engine.dispose()


def test_export_generations_refuses_pooled_in_one_line(known_db):
    res = greenspec("--db", known_db, "export", "--generations", "--pooled")
    assert res.returncode == 2 and "--pooled does not apply" in res.stderr and len(res.stderr.strip().splitlines()) == 1

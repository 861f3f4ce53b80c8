"""`greenspec export --generations` streamed (`greenspec.generations_out`): the bytes of the whole frame, read and
written a chunk at a time."""

from __future__ import annotations

import io
import math

import pandas as pd
import pytest

from greenspec.frames import _current_only, labelled, versions
from greenspec.generations_out import write_generations_csv
from storage.db import open_reader
from storage.queries import (
    GENERATION_EXPORT_COLUMNS,
    experiment_id,
    generations_export_rows,
    generations_export_stmt,
)
from tests.greenspec.test_frames import greenspec, versions_db  # noqa: F401  (a fixture)


@pytest.fixture(scope="module")
def generated(tmp_path_factory) -> str:
    """bench's generated experiment, small: every draft, both regimes, energy on some generations only (NULLs)."""
    from bench.dashboard_db import generate

    url = f"sqlite:///{tmp_path_factory.mktemp('generated') / 'g.db'}"
    generate(url, 600)
    return url


def whole_frame_csv(url: str, experiment: str | None, all_versions: bool) -> str:
    """The export as it is made at once: every row through the ORM session into one frame, filtered and labelled
    in pandas, rendered in one call."""
    with open_reader(url)() as s:
        exp_id = experiment_id(s, experiment)
        stmt = generations_export_stmt(exp_id, versions(s, exp_id))
        df = pd.DataFrame(s.execute(stmt).all(), columns=[*GENERATION_EXPORT_COLUMNS, "version"])
        return labelled(s, exp_id, _current_only(df, all_versions, experiment)).to_csv(index=False)


@pytest.mark.parametrize("all_versions", [False, True])
@pytest.mark.parametrize("chunk", [1, 7, 100_000])
def test_streamed_csv_is_the_whole_frames_bytes(generated, tmp_path, chunk, all_versions):
    out = tmp_path / "g.csv"
    with open_reader(generated)() as s:
        exp_id = experiment_id(s, None)
        rows = write_generations_csv(s, exp_id, str(out), versions(s, exp_id), all_versions, chunk=chunk)
    expected = whole_frame_csv(generated, None, all_versions)
    assert out.read_text() == expected and rows == len(expected.splitlines()) - 1 > 100


@pytest.mark.parametrize("all_versions", [False, True])
def test_the_cli_writes_the_same_bytes_with_an_older_version_stored(versions_db, tmp_path, all_versions):  # noqa: F811
    out = tmp_path / "v.csv"
    flags = ["--all-versions"] if all_versions else []
    res = greenspec("--db", versions_db, "export", "--generations", *flags, "--out", str(out))
    assert res.returncode == 0, res.stderr
    expected = whole_frame_csv(versions_db, "v", all_versions)
    assert out.read_text() == expected
    assert ",older" in expected if all_versions else ",older" not in expected
    assert greenspec("--db", versions_db, "export", "--generations", *flags).stdout == expected


def test_rows_are_read_a_chunk_at_a_time(generated):
    with open_reader(generated)() as s:
        exp_id = experiment_id(s, None)
        total = len(s.execute(generations_export_stmt(exp_id, versions(s, exp_id))).all())
        _, parts = generations_export_rows(s, exp_id, versions(s, exp_id), chunk=64)
        sizes = [len(part) for part in parts]
    assert len(sizes) == math.ceil(total / 64) > 5 and max(sizes) == 64 and sum(sizes) == total


def test_no_current_generation_writes_nothing_and_says_why(versions_db, tmp_path):  # noqa: F811
    import shutil

    from storage.db import open_db
    from storage.models import Generation

    url = f"sqlite:///{tmp_path / 'older.db'}"
    shutil.copy(versions_db.removeprefix("sqlite:///"), tmp_path / "older.db")
    engine, Session = open_db(url, migrate=False)
    with Session() as s:  # the current version's generations gone: only older ones stay
        s.query(Generation).filter(Generation.n_tokens == 12).delete()
        s.commit()
    engine.dispose()
    out = tmp_path / "none.csv"
    res = greenspec("--db", url, "export", "--generations", "--out", str(out))
    assert res.returncode != 0 and "earlier version of its spec; pass --all-versions" in res.stderr
    assert len(res.stderr.strip().splitlines()) == 1 and not out.exists()


def test_a_repredicted_experiments_label_is_written_as_the_frame_writes_it(generated, tmp_path, monkeypatch):
    label = 'predicted for t1 (cpu, "bf16", 1 thread)'  # a comma and quotes: quoted as pandas quotes them

    monkeypatch.setattr("storage.cost_tables.prediction_label", lambda session, exp_id: label)
    monkeypatch.setattr("greenspec.generations_out.prediction_label", lambda session, exp_id: label)
    out = tmp_path / "l.csv"
    with open_reader(generated)() as s:
        exp_id = experiment_id(s, None)
        write_generations_csv(s, exp_id, str(out), versions(s, exp_id), chunk=50)
    expected = whole_frame_csv(generated, None, False)
    assert out.read_text() == expected and '"predicted for t1 (cpu, ""bf16"", 1 thread)"' in expected


def test_the_summary_export_counts_the_older_rows_it_left_out(versions_db):  # noqa: F811
    every = pd.read_csv(io.StringIO(greenspec("--db", versions_db, "export", "--all-versions").stdout))
    res = greenspec("--db", versions_db, "export")
    older = int((every["version"] == "older").sum())
    assert res.returncode == 0 and older == 2
    assert f"export: {older} rows of an earlier version of the spec left out (--all-versions shows them)" in res.stderr
    assert "rows of an earlier version" not in greenspec("--db", versions_db, "export", "--all-versions").stderr

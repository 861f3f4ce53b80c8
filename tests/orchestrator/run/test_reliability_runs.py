"""Issue 13 through the CLI with real runs, on SQLite and PostgreSQL: prompt-matched references (case 1), a
missing or corrupt instance base rebuilt (case 4), read-only readers (case 7), a full disk (case 5)."""

from __future__ import annotations

import os
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
from sqlalchemy import func, select

from storage.db import MAX_PAGES_ENV, open_db
from storage.models import Cell, Generation, InstanceBase, Reference
from tests.orchestrator.conftest import cli, small_spec, spec_writer
from workers.igtree import IGTree

pytestmark = [pytest.mark.usefixtures("ray_local"), pytest.mark.slow]


def metrics(url: str) -> dict[int, tuple]:
    """generation id -> (cell, prompt key, ROUGE-L, exact match, tokens)."""
    engine, Session = open_db(url, migrate=False)
    with Session() as s:
        rows = s.execute(
            select(
                Generation.id,
                Generation.cell_id,
                Generation.prompt_key,
                Generation.rouge_l,
                Generation.exact_match,
                Generation.tokens,
            )
        ).all()
    engine.dispose()
    return {r[0]: tuple(r[1:]) for r in rows}


@pytest.fixture(scope="module")
def small_run(tmp_path_factory, tiny_verifier, text_files, ray_local) -> Path:
    """One small grid (k = 2) run to the end on SQLite through the CLI, for the tests that read it or start from a
    copy of it: its database file, which the driver closed (no -wal or -shm beside it)."""
    folder = tmp_path_factory.mktemp("small-run")
    code, _, err = cli(
        "--db",
        f"sqlite:///{folder / 'g.db'}",
        "run",
        str(small_spec(spec_writer(folder, tiny_verifier, text_files), [2])),
    )
    assert code == 0, err
    return folder / "g.db"


def _small_run_in(db_url: str, small_run: Path, write_spec) -> None:
    """The small grid run to the end in `db_url`: on SQLite a copy of the module's run, on PostgreSQL a run of it."""
    if db_url.startswith("sqlite:///"):
        shutil.copy2(small_run, db_url.removeprefix("sqlite:///"))
        return
    code, _, err = cli("--db", db_url, "run", str(small_spec(write_spec, [2])))
    assert code == 0, err


def test_changed_prompts_never_touch_stored_metrics(db_url, write_spec, small_run):
    _small_run_in(db_url, small_run, write_spec)
    before = metrics(db_url)
    assert before and all(m[3] is True for m in before.values())
    # the same tasks and prompt positions, other prompt texts: new references and generations
    spec = small_spec(write_spec, [2], **{"prompt_words = 20": "prompt_words = 25"})
    code, _, err = cli("--db", db_url, "run", "--new-version", str(spec))  # a copy: its spec file was elsewhere
    assert code == 0, err
    for cmd in (["resume"], ["retry", "--failed"]):
        code, _, err = cli("--db", db_url, *cmd)
        assert code == 0, err
    after = metrics(db_url)
    assert len(after) == 2 * len(before)
    assert {i: after[i] for i in before} == before  # no stored metric rewritten
    assert all(m[3] is True and m[2] == 1.0 for m in after.values())  # each compared with its own prompt's reference
    engine, Session = open_db(db_url, migrate=False)
    with Session() as s:
        refs = dict(s.execute(select(Reference.prompt_key, Reference.prompt_text)).all())
        assert len(refs) == 4 and all(m[1] in refs for m in after.values())
    engine.dispose()


def _corrupt(path: Path) -> None:
    data = bytearray(path.read_bytes())
    data[-100] ^= 0xFF  # one flipped byte in the arrays: the data checksum no longer matches
    path.write_bytes(bytes(data))


SECOND_CORPUS = {
    "[[tasks]]": '[[corpora]]\nname = "pydoc2"\npath = "{corpus}"\nmax_tokens = 6000\n[[tasks]]',
    "[sweep]": '[[strategies]]\nname = "olifant-pydoc2"\ndraft = "olifant"\ncorpus = "pydoc2"\n[sweep]',
}  # a second instance base, so that one run meets a corrupt file and a deleted one


# Two instance bases, one corrupted and one deleted before the same run: the two repairs (a cell failing on a bad
# checksum; a missing file found when the run reads its pending work) take one run and one worker start, not two.
def test_a_corrupt_or_missing_instance_base_is_rebuilt(write_spec, text_files, tmp_path):
    # SQLite only: the rebuild is the driver's and the artifact files' business; the storage calls it makes are
    # the ones every PostgreSQL run test makes
    db_url = f"sqlite:///{tmp_path / 'g.db'}"
    arts = tmp_path / "arts"
    second = {old: new.format(corpus=text_files[0]) for old, new in SECOND_CORPUS.items()}
    replace = {"[experiment]": f'[experiment]\nartifacts = "{arts}"', **second}
    spec = lambda k: small_spec(write_spec, k, **replace)  # noqa: E731
    assert cli("--db", db_url, "run", str(spec([2])))[0] == 0
    engine, Session = open_db(db_url, migrate=False)
    with Session() as s:
        paths = dict(s.execute(select(InstanceBase.corpus, InstanceBase.path)).all())
    ibase, deleted = Path(paths["pydoc"]), Path(paths["pydoc2"])
    _corrupt(ibase)
    deleted.unlink()
    code, out, err = cli("--db", db_url, "run", str(spec([2, 3])))  # new olifant cells meet both files
    assert code == 0, err
    assert "0 failed" in out
    IGTree.load(ibase)  # retrained: the checksum holds again
    assert deleted.is_file()  # a deleted file is rebuilt before use
    IGTree.load(deleted)
    # `retry --failed` does the same for cells that failed on a corrupt file for good
    _corrupt(ibase)
    with Session() as s:
        olifant = list(s.scalars(select(Cell.id).where(Cell.strategy == "olifant-pydoc")))
        s.execute(Generation.__table__.delete().where(Generation.cell_id.in_(olifant)))
        s.execute(
            Cell.__table__.update()
            .where(Cell.id.in_(olifant))
            .values(state="failed", attempts=2, error=f"IBaseError: {ibase}: data checksum mismatch")
        )
        s.commit()
    code, out, err = cli("--db", db_url, "retry", "--failed")
    assert code == 0 and "0 failed" in out, err
    IGTree.load(ibase)
    with Session() as s:
        assert s.scalar(select(func.count()).select_from(InstanceBase)) == 2
        gens = s.scalars(select(Generation)).all()
        assert len(gens) == s.scalar(select(func.count()).select_from(Cell).where(Cell.kind == "sweep"))
        assert all(g.exact_match for g in gens)
    engine.dispose()


def test_readers_never_write(small_run):
    url = f"sqlite:///{small_run}"
    files = lambda: {p.name: p.read_bytes() for p in small_run.parent.iterdir() if p.name.startswith("g.db")}  # noqa: E731
    before = files()
    assert set(before) == {"g.db"}  # the driver closed its connections: no -wal/-shm left
    for cmd in (["status"], ["status", "--json"], ["export", "--format", "markdown"]):
        code, _, err = cli("--db", url, *cmd)
        assert code == 0, err
        assert files() == before


def test_a_full_disk_is_one_line_and_loses_nothing(write_spec, tmp_path, ray_local, small_run):
    """The database fills up mid-run (a page cap: the "disk"): one line naming it, nothing lost, resume finishes."""
    db = tmp_path / "g.db"
    url = f"sqlite:///{db}"
    _small_run_in(url, small_run, write_spec)
    before = metrics(url)
    with sqlite3.connect(db) as conn:
        conn.execute(
            "VACUUM"
        )  # no free pages left inside the file: the run's first new rows need a page it cannot have
        pages = conn.execute("PRAGMA page_count").fetchone()[0]
    # a real `greenspec run` process (joining the session's Ray) whose database cannot grow: it fills up at the
    # first write its free pages do not hold (with a few pages of headroom, a small grid sometimes fit)
    env = {**os.environ, MAX_PAGES_ENV: str(pages), "RAY_AUTH_MODE": "disabled"}
    address = ray_local.get_runtime_context().gcs_address
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "orchestrator.cli",
            "--db",
            url,
            "--address",
            address,
            "run",
            "--new-version",  # a copy of the module's run, whose spec file was elsewhere
            str(small_spec(write_spec, [2, 3, 4])),
        ],
        cwd=Path(__file__).resolve().parents[3],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    errors = [ln for ln in proc.stderr.strip().splitlines() if ln.startswith("greenspec: error")]
    assert proc.returncode != 0 and len(errors) == 1 and "Traceback" not in proc.stderr, proc.stderr[-3000:]
    assert str(db) in errors[0] and "disk is full" in errors[0] and "nothing stored was lost" in errors[0]
    after = metrics(url)
    assert {i: after[i] for i in before} == before
    code, out, err = cli("--db", url, "resume")
    assert code == 0 and "0 failed" in out and "0 pending" in out, err
    code, out, err = cli("--db", url, "run", "--new-version", str(small_spec(write_spec, [2, 3, 4])))  # space freed
    assert code == 0 and "0 failed" in out, err
    assert len(metrics(url)) > len(after)

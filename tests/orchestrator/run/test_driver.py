"""The driver against a real local Ray, a real SQLite file, a tiny trained verifier and real TiMBL-equal IGTree.

The verifier's greedy text varies (see conftest), so drafts are accepted and rejected and the checks below
fail for decoding that is not real greedy speculative decoding (e.g. "repeat the first token").
"""

from __future__ import annotations

import csv
import dataclasses
import datetime as dt
import hashlib
import importlib.util
import io
import os
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from sqlalchemy import func, select

from analysis.summary import summary_frame
from orchestrator.run.driver import RunOptions, resume, run_spec_file
from storage.db import open_db
from storage.models import Cell, Experiment, Generation, InstanceBase, PowerSample, Reference
from storage.queries import status_counts
from tests.orchestrator.conftest import MAX_NEW_TOKENS, spec_writer
from tests.orchestrator.run.greedy_checks import decoding_problems
from workers.errors import GreenspecError

pytestmark = [pytest.mark.usefixtures("ray_local"), pytest.mark.slow]  # each test runs a real sweep
ROOT = Path(__file__).resolve().parents[3]

# plain 1 + ngram 2 k + olifant 2 k = 5 per prompt and regime; 2 prompts x 2 regimes
SWEEP_CELLS = 5 * 2 * 2
# at k = 2 only: plain + ngram + olifant = 3 per prompt and regime
SWEEP_CELLS_K2 = 3 * 2 * 2


def opts(tmp_path: Path, **kw) -> RunOptions:
    return RunOptions(db_url=f"sqlite:///{tmp_path / 'g.db'}", **kw)


def sessions(o: RunOptions):
    return open_db(o.db_url, migrate=False)[1]


# The finished run's accelerator worker meets NVML through tests/orchestrator/run/fake_nvml: one GPU whose watts rise
# along a known ramp, W0 + SLOPE x (t - T0) at epoch second t, so every stored joule can be worked out by hand.
RAMP = (100.0, 0.5, time.time())  # W0 (W), SLOPE (W/s), T0 (epoch s)
FAKE_NVML = Path(__file__).resolve().parent / "fake_nvml"


def ramp_j(t0: float, t1: float) -> float:
    """Joules of the ramp over [t0, t1]: its integral, W0 (t1 - t0) + SLOPE ((t1 - T0)^2 - (t0 - T0)^2) / 2."""
    w0, slope, start = RAMP
    return w0 * (t1 - t0) + slope * ((t1 - start) ** 2 - (t0 - start) ** 2) / 2


@pytest.fixture(scope="module")
def finished(tmp_path_factory, tiny_verifier, text_files, ray_local):
    """One full sweep of the default spec (k = 2, 3) measured by the fake GPU's ramp, run once for the tests that read
    or copy a finished run: (its options, its report, its database file checkpointed so the bytes can be compared)."""
    folder = tmp_path_factory.mktemp("finished")
    path = os.pathsep.join(p for p in (str(FAKE_NVML), os.environ.get("PYTHONPATH", "")) if p)
    ramp = ",".join(map(str, RAMP))
    o = opts(folder, worker_env={"PYTHONPATH": path, "GREENSPEC_TEST_NVML_RAMP": ramp})
    fake = importlib.util.spec_from_file_location("pynvml", FAKE_NVML / "pynvml.py")
    with pytest.MonkeyPatch.context() as mp:  # the driver meets the same GPU: it measures the idle floor on it
        mp.setitem(sys.modules, "pynvml", importlib.util.module_from_spec(fake))
        fake.loader.exec_module(sys.modules["pynvml"])
        mp.setenv("GREENSPEC_TEST_NVML_RAMP", ramp)
        report = run_spec_file(spec_writer(folder, tiny_verifier, text_files)(**{'"estimate"': '"nvml"'}), o)
    engine = open_db(o.db_url, migrate=False)[0]
    with engine.connect() as conn:
        conn.exec_driver_sql("PRAGMA wal_checkpoint(TRUNCATE)")
    engine.dispose()
    return o, report, folder / "g.db"


def copy_of(finished, tmp_path: Path) -> RunOptions:
    """Options over a private copy of the finished run's database (its instance base is shared, read only)."""
    shutil.copy2(finished[2], tmp_path / "g.db")
    return opts(tmp_path)


def test_end_to_end_exactly_greedy(finished):
    o, report, _ = finished
    assert report.counts == {"pending": 0, "running": 0, "done": 1 + 2 + SWEEP_CELLS, "failed": 0}
    with sessions(o)() as s:
        gens = s.scalars(select(Generation)).all()
        assert len(gens) == SWEEP_CELLS
        assert s.scalar(select(func.count()).select_from(Reference)) == 2
        ib = s.scalars(select(InstanceBase)).one()
        assert ib.nodes_after_prune <= ib.nodes_before_prune and Path(ib.path).is_file()
        # greedy speculative decoding reproduces the independent greedy reference token for token, and the
        # drafts were really accepted and rejected on the way
        assert decoding_problems(gens) == []
        assert all(g.n_tokens == MAX_NEW_TOKENS and g.accepted <= g.drafted for g in gens)
        assert all(
            g.energy_j == pytest.approx(ramp_j(g.started_at, g.ended_at), rel=1e-6)
            and g.power_source == "nvml"
            and g.power_measured is True
            for g in gens
        )
        assert s.scalar(select(func.count()).select_from(PowerSample)) > 0
        # the idle floor: the ramp's mean over 1 s, measured before Ray started, so before the first cell began
        w0, slope, start = RAMP
        idle_w = s.scalars(select(Experiment.idle_power_w)).one()
        mid = start + (idle_w - w0) / slope  # the middle of the second it was measured over
        first = min(
            c.started_at.replace(tzinfo=c.started_at.tzinfo or dt.timezone.utc).timestamp()
            for c in s.scalars(select(Cell))
        )  # SQLite hands back UTC without its zone
        assert start < mid - 0.5 and mid + 0.5 < first
        counts = status_counts(s)
        assert counts["sweep"] == {"pending": 0, "running": 0, "done": SWEEP_CELLS, "failed": 0}
        assert counts["generations"] == SWEEP_CELLS
        # without `overlap`, no timed cell starts before the instance base is built
        train = s.scalars(select(Cell).where(Cell.kind == "train")).one()
        timed = s.scalars(select(Cell.started_at).where(Cell.kind != "train")).all()
        assert min(timed) >= train.finished_at
        table = summary_frame(s, "t")
    assert set(table["strategy"]) == {"plain", "ngram", "olifant-pydoc"}
    plain = table[table["strategy"] == "plain"]
    assert (plain["speedup"].round(6) == 1.0).all()
    olifant = table[table["strategy"] == "olifant-pydoc"]
    assert ((olifant["acceptance"] > 0) & (olifant["acceptance"] < 1)).any()
    assert (table["exact_match"] == 1.0).all() and (table["rouge_l"] == 1.0).all()


def test_the_run_stored_its_readers_summaries_as_it_ended(finished):
    """Per-prompt and pooled, the export's and the dashboard's, at the data version a reader computes now: the very
    tables `summary_frame` would compute from the rows."""
    from analysis.summary import computed_summary, stored_summary
    from orchestrator.run.summaries import versions

    with sessions(finished[0])() as s:
        exp_id = s.scalar(select(Experiment.id).where(Experiment.name == "t"))
        for v in {versions(s, exp_id), None}:
            for pooled in (False, True):
                stored = stored_summary(s, exp_id, pooled, v).assign(experiment="t")
                assert stored.to_csv() == computed_summary(s, exp_id, pooled, v, experiment="t").to_csv()


def _mean(values) -> float:
    values = list(values)
    return sum(values) / len(values)


def test_exported_figures_are_the_stored_passes_and_the_power_ramp_worked_by_hand(finished):
    """Every figure of `greenspec export` recomputed here from the stored pass counts and timings and the fake GPU's
    ramp, by the paper's definitions (per-prompt means; ratios to plain at the same task and regime)."""
    o, _, _ = finished
    with sessions(o)() as s:
        gens = s.scalars(select(Generation)).all()
    by_cell: dict[tuple[str, str, int], list] = {}
    for g in gens:
        by_cell.setdefault((g.strategy, g.regime, g.k), []).append(g)
    want = {}
    for cell, gs in by_cell.items():
        drafting = [g for g in gs if g.drafted > 0]
        want[cell] = {
            "tokens_per_s": _mean(g.n_tokens / g.wall_s for g in gs),
            "j_per_100_tokens": _mean(ramp_j(g.started_at, g.ended_at) / g.n_tokens * 100 for g in gs),
            # accepted / drafted; accepted / rounds; rounds whose first draft token was accepted / rounds checked
            "acceptance": _mean(g.accepted / g.drafted for g in drafting) if drafting else None,
            "mal": _mean(sum(g.accepted_per_step) / len(g.accepted_per_step) for g in gs),
            "first_token_acceptance": (
                _mean(sum(a > 0 for a in g.accepted_per_step) / g.first_checked for g in drafting) if drafting else None
            ),
        }
        assert all(sum(g.accepted_per_step) == g.accepted and g.first_checked > 0 for g in drafting)
    rows = list(csv.DictReader(io.StringIO(_export_text(o.db_url))))
    assert len(rows) == len(want) == 2 * (1 + 2 * 2)  # plain (k = 0) and ngram, olifant at k 2 and 3, per regime
    for r in rows:
        cell, plain = want[r["strategy"], r["regime"], int(r["k"])], want["plain", r["regime"], 0]
        assert float(r["tokens_per_s"]) == pytest.approx(cell["tokens_per_s"], rel=1e-9)
        assert float(r["speedup"]) == pytest.approx(cell["tokens_per_s"] / plain["tokens_per_s"], rel=1e-9)
        assert float(r["j_per_100_tokens"]) == pytest.approx(cell["j_per_100_tokens"], rel=1e-6)
        assert float(r["energy_ratio"]) == pytest.approx(plain["j_per_100_tokens"] / cell["j_per_100_tokens"], rel=1e-6)
        assert float(r["tokens_per_j"]) == pytest.approx(100 / cell["j_per_100_tokens"], rel=1e-6)
        assert r["power_source"] == "nvml" and r["power_measured"] == "True"
        for name in ("acceptance", "mal", "first_token_acceptance"):
            if r["strategy"] == "plain":
                assert r[name] in ("", "0.0"), (name, r[name])  # plain drafts nothing
            else:
                assert float(r[name]) == pytest.approx(cell[name], rel=1e-9), name
    # the ramp makes energy more than time: an energy ratio that merely repeated the speedup would fail above
    assert any(abs(float(r["energy_ratio"]) - float(r["speedup"])) > 1e-3 for r in rows)


def _export_text(db_url: str) -> str:
    """`greenspec export --format csv` as a user runs it."""
    out = subprocess.run(
        [sys.executable, "-m", "orchestrator.cli", "--db", db_url, "export", "--format", "csv"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr
    return out.stdout


def _export(db_url: str) -> dict[str, dict[str, str]]:
    """`greenspec export --format csv` as a user runs it: strategy + regime -> row (k = 2 only)."""
    rows = list(csv.DictReader(io.StringIO(_export_text(db_url))))
    return {(r["strategy"], r["regime"]): r for r in rows if r["k"] in ("0", "2")}


def test_wrong_generation_is_stored_as_no_match_and_a_worker_crash_mid_cell_is_retried(tmp_path, write_spec):
    """One sweep, two faults: ngram's last token flipped after decoding (stored as no match, the figures move) and
    the worker killed once mid-cell (the cell retried on a fresh worker, which flips ngram's tokens as well)."""
    marker = tmp_path / "crashed"
    faults = {"GREENSPEC_FAULT_CORRUPT": "ngram", "GREENSPEC_FAULT_CRASH_ONCE": str(marker)}
    o = opts(tmp_path, worker_env=faults)
    report = run_spec_file(write_spec(k=[2], attempts=3), o)
    assert marker.exists()  # the worker process really died once
    assert report.counts == {"pending": 0, "running": 0, "done": 3 + SWEEP_CELLS_K2, "failed": 0}
    with sessions(o)() as s:
        assert s.scalar(select(func.max(Cell.attempts))) == 2
        assert s.scalar(select(func.count()).select_from(Generation)) == SWEEP_CELLS_K2
        gens = s.scalars(select(Generation)).all()
        refs = {r.prompt_index: r.tokens for r in s.scalars(select(Reference))}
    ngram = [g for g in gens if g.strategy == "ngram"]
    assert len(ngram) == 4 and all(g.exact_match is False for g in ngram)
    assert all(g.tokens[:-1] == refs[g.prompt_index][:-1] != g.tokens for g in ngram)
    # 16 tokens, one wrong: LCS 15, P = R = 15/16, ROUGE-L F = 15/16 = 0.9375
    assert all(g.rouge_l == pytest.approx(0.9375) for g in ngram)
    assert all(g.exact_match and g.rouge_l == 1.0 for g in gens if g.strategy != "ngram")
    rows = _export(o.db_url)
    for regime in ("uncached", "cached"):
        assert float(rows["ngram", regime]["exact_match"]) == 0.0  # 0 of 2 prompts
        assert float(rows["ngram", regime]["rouge_l"]) == pytest.approx(0.9375)  # mean of 0.9375, 0.9375
        for strategy in ("plain", "olifant-pydoc"):
            assert float(rows[strategy, regime]["exact_match"]) == 1.0
            assert float(rows[strategy, regime]["rouge_l"]) == 1.0


def test_rerun_adds_nothing_and_new_k_adds_only_new_cells_while_a_reader_polls(tmp_path, write_spec, finished):
    """The finished run's copy continued twice: unchanged (nothing added) and with k = 4 added (only the new cells
    run), the second while a reader thread polls the live database; one run serves both checks, since each
    run starts a fresh accelerator worker (seconds of imports)."""
    # the default spec, run to the end; its file is written again here, elsewhere: continued under it (--new-version)
    o = dataclasses.replace(copy_of(finished, tmp_path), new_version=True)
    with sessions(o)() as s:
        before = dict(s.execute(select(Generation.cell_id, Generation.id)).all())
        done_before = status_counts(s, "t")["cells"]["done"]
    assert done_before == 3 + SWEEP_CELLS
    again = run_spec_file(write_spec(), o)
    assert again.added == 0
    with sessions(o)() as s:
        assert dict(s.execute(select(Generation.cell_id, Generation.id)).all()) == before
    seen, errors, stop = [], [], threading.Event()

    def poll():
        Session = sessions(o)
        while not stop.is_set():
            try:
                with Session() as s:
                    seen.append(status_counts(s, "t")["cells"]["done"])
            except Exception as err:  # any reader failure is the test's finding
                errors.append(err)
            time.sleep(0.05)

    reader = threading.Thread(target=poll)
    reader.start()
    try:
        more = run_spec_file(write_spec(k=[2, 3, 4]), o)
    finally:
        stop.set()
        reader.join()
    assert more.added == 2 * 2 * 2  # ngram and olifant at k=4, 2 prompts, 2 regimes
    with sessions(o)() as s:
        after = dict(s.execute(select(Generation.cell_id, Generation.id)).all())
        assert status_counts(s, "t")["cells"]["done"] == done_before + 8
    assert len(after) == SWEEP_CELLS + 8 and all(after[c] == g for c, g in before.items())
    assert not errors
    assert len(seen) > 5 and seen == sorted(seen)
    assert any(done_before < n < done_before + 8 for n in seen)  # the reader saw the run in progress


def test_failing_cells_retried_then_recorded_while_sweep_goes_on(tmp_path, write_spec):
    o = opts(tmp_path, worker_env={"GREENSPEC_FAULT_RAISE": "ngram"})
    report = run_spec_file(write_spec(k=[2], attempts=2), o)
    assert report.counts["failed"] == 2 * 2  # ngram at k = 2: 2 prompts x 2 regimes
    with sessions(o)() as s:
        failed = s.scalars(select(Cell).where(Cell.state == "failed")).all()
        assert {c.strategy for c in failed} == {"ngram"}
        assert all(c.attempts == 2 and "injected failure" in c.error for c in failed)
        assert s.scalar(select(func.count()).select_from(Generation)) == SWEEP_CELLS_K2 - 4
    # the fault is gone on a fresh worker: retry runs only the failed cells
    report = resume(opts(tmp_path), retry_failed=True)
    assert report.counts["failed"] == 0 and report.counts["done"] == 3 + SWEEP_CELLS_K2


def test_crashing_worker_and_failing_train_cell_fail_their_cells_while_the_rest_runs(tmp_path, write_spec, text_files):
    """One sweep, two failures that end differently (each sweep starts a fresh worker: seconds of imports): plain's
    cells kill the worker on every attempt, and the corpus is cut to one token, so its train cell fails and so do
    olifant's cells that need it, without an attempt; ngram's cells still run."""
    spec = write_spec(k=[2], attempts=2, **{"warmup = false": 'warmup = false\norder = "strategy"'})
    spec.write_text(spec.read_text().replace(f'path = "{text_files[0]}"', f'path = "{text_files[0]}"\nmax_tokens = 1'))
    # the strategy order puts plain's 4 cells in one batch (batch_size 4): each attempt costs one worker restart,
    # not one per cell as in the paired order's one-prompt batches (8 restarts took this test 107 s, 2 take 21-35 s);
    # and plain sorts last (ngram, olifant-pydoc, plain), so once its last attempt kills the worker no other cell is
    # left to start a third one for
    report = run_spec_file(spec, opts(tmp_path, worker_env={"GREENSPEC_FAULT_CRASH_ALWAYS": "plain"}))
    # 2 references and ngram's 2 prompts x 2 regimes done; the train cell, olifant's and plain's 4 cells failed
    assert report.counts == {"pending": 0, "running": 0, "done": 2 + 4, "failed": 1 + 4 + 4}
    with sessions(opts(tmp_path))() as s:
        cells = s.scalars(select(Cell).where(Cell.kind != "train")).all()
        plain = [c for c in cells if c.strategy == "plain"]
        # plain (k = 0): 2 prompts x 2 regimes = 4 cells; each attempt killed the worker, until max_attempts
        assert len(plain) == 4 and all(c.state == "failed" and c.attempts == 2 for c in plain)
        assert all(c.error.startswith("worker died") for c in plain)
        train = s.scalars(select(Cell).where(Cell.kind == "train")).one()
        assert train.state == "failed" and train.attempts == 2 and "gave no instances" in train.error
        olifant = [c for c in cells if c.strategy == "olifant-pydoc"]
        assert len(olifant) == 4 and all(c.state == "failed" and c.attempts == 0 for c in olifant)
        assert all(
            "train cell for corpus 'pydoc' failed" in c.error and "gave no instances" in c.error for c in olifant
        )
        # a batch in flight beside a crashing one (IN_FLIGHT = 2) is lost with the worker and charged an attempt
        # too, so other cells could fail the same way; none fails for any other reason
        others = [c for c in cells if c.strategy not in ("plain", "olifant-pydoc")]
        assert all(c.state == "done" or (c.error.startswith("worker died") and c.attempts == 2) for c in others)
        done = [c for c in others if c.state == "done" and c.kind == "sweep"]
        assert len(done) == 4 and {c.strategy for c in done} == {"ngram"}
        gens = s.scalars(select(Generation)).all()
        assert {g.strategy for g in gens} == {"ngram"} and len(gens) == len(done)
        assert all(g.exact_match is True for g in gens if g.rouge_l is not None)  # where a reference was stored
        assert all(g.exact_match is None for g in gens if g.rouge_l is None)


def test_overlap_runs_timed_cells_beside_training_and_repeats_keep_the_fastest(tmp_path, write_spec):
    """One sweep with `overlap` and `repeats = 3`: timed cells start while the instance base is built, and every
    timed run is stored, the fastest kept."""
    spec = write_spec(
        k=[2],
        **{
            "max_attempts = 2": "max_attempts = 2\noverlap = true",
            f"max_new_tokens = {MAX_NEW_TOKENS}": f"max_new_tokens = {MAX_NEW_TOKENS}\nrepeats = 3",
        },
    )
    o = opts(tmp_path)
    report = run_spec_file(spec, o)
    assert report.counts == {"pending": 0, "running": 0, "done": 1 + 2 + 12, "failed": 0}
    with sessions(o)() as s:
        train = s.scalars(select(Cell).where(Cell.kind == "train")).one()
        first_timed = min(s.scalars(select(Cell.started_at).where(Cell.kind != "train")))
        assert first_timed < train.finished_at  # references started while the instance base was being built
        gens = s.scalars(select(Generation)).all()
        assert len(gens) == 12 and decoding_problems(gens) == []  # each run checked equal, the kept one exact
        for g in gens:
            assert len(g.wall_s_runs) == 3 and g.wall_s == min(g.wall_s_runs)
            assert g.tokens_per_s == pytest.approx(g.n_tokens / g.wall_s)


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest() if path.exists() else "absent"


def _stored_run(tmp_path, finished) -> tuple[RunOptions, Path, str]:
    """A copy of the finished run's checkpointed db file, and its digest."""
    o = copy_of(finished, tmp_path)
    db = tmp_path / "g.db"
    return o, db, _digest(db)


def test_missing_corpus_at_run_time_changes_nothing(tmp_path, write_spec, text_files, finished):
    o, db, before = _stored_run(tmp_path, finished)
    spec = write_spec(k=[2, 3, 4])  # new cells to add, had the spec been valid
    spec.write_text(spec.read_text().replace(f'path = "{text_files[0]}"', 'path = "/no/such/corpus.txt"'))
    with pytest.raises(GreenspecError, match=r"corpora\[0\]\.path: no such file") as err:
        run_spec_file(spec, o)
    assert "\n" not in str(err.value)
    assert _digest(db) == before


def test_unreadable_model_at_run_time_changes_nothing(tmp_path, write_spec, tiny_verifier, finished):
    o, db, before = _stored_run(tmp_path, finished)
    bogus = tmp_path / "not-a-model"
    bogus.mkdir()
    (bogus / "config.json").write_text("{ this is not json")
    spec = write_spec(k=[2, 3, 4])
    spec.write_text(spec.read_text().replace(f'model = "{tiny_verifier}"', f'model = "{bogus}"'))
    with pytest.raises(GreenspecError, match="verifier.model: .* is not a loadable model") as err:
        run_spec_file(spec, o)
    assert "\n" not in str(err.value)
    assert _digest(db) == before

"""storage.store on SQLite and a real PostgreSQL: prompt-keyed references, leases, artifact rebuilds, readers."""

from __future__ import annotations

import threading
import time
from dataclasses import fields

import pytest
from sqlalchemy import func, select, text

from storage import store
from storage.cell_spec import CellParams, CellSpec
from storage.db import DatabaseError, open_db, open_reader
from storage.models import Cell, Generation, InstanceBase, Lease
from storage.results import IBASE_COLUMNS
from tests.records import plain_generation
from workers.contracts import ReferenceRecord
from workers.training.ibase import IBaseInfo


def _ref(tokens: tuple[int, ...]) -> ReferenceRecord:
    return ReferenceRecord(prompt_text="p", prompt_tokens=(1, 2, 3), tokens=tokens, text="x", wall_s=0.1)


def _setup(Session, cells: list[CellSpec]) -> dict[str, int]:
    with Session() as s:
        exp = store.upsert_experiment(s, "e", "", "", None)
        store.add_cells(s, exp.id, cells)
        s.commit()
        return dict(s.execute(select(Cell.key, Cell.id)).all())


def _sweep(key: str, ref_key: str, prompt: str) -> CellSpec:
    return CellSpec(
        key=key,
        kind="sweep",
        strategy="plain",
        draft="plain",
        task="t",
        prompt_index=0,
        k=0,
        regime="cached",
        params=CellParams(prompt=prompt, reference=ref_key),
    )


def test_references_match_by_prompt_and_metrics_are_never_rewritten(db_url):
    _, Session = open_db(db_url)
    # the same task and prompt index, two different prompts (prompt_words changed between runs)
    cells = [
        CellSpec(key="refA", kind="reference", task="t", prompt_index=0, params=CellParams(prompt="old words")),
        CellSpec(key="refB", kind="reference", task="t", prompt_index=0, params=CellParams(prompt="new words")),
        _sweep("genA", "refA", "old words"),
        _sweep("genB", "refB", "new words"),
    ]
    ids = _setup(Session, cells)
    with Session() as s:
        store.store_generation(s, ids["genA"], plain_generation((5, 6, 7)))  # before its reference: no metric yet
        store.store_reference(s, ids["refA"], _ref((5, 6, 7)))
        store.store_reference(s, ids["refB"], _ref((9, 9, 9)))  # a different prompt's reference
        store.store_generation(s, ids["genB"], plain_generation((9, 9, 9)))
        s.commit()
        gens = {g.cell_id: g for g in s.scalars(select(Generation))}
    a, b = gens[ids["genA"]], gens[ids["genB"]]
    assert (a.prompt_key, a.exact_match, a.rouge_l) == ("refA", True, 1.0)
    assert (b.prompt_key, b.exact_match, b.rouge_l) == ("refB", True, 1.0)


def test_a_stored_metric_is_not_rewritten_by_a_later_reference(db_url):
    _, Session = open_db(db_url)
    cells = [
        CellSpec(key="ref1", kind="reference", task="t", prompt_index=0, params=CellParams(prompt="p")),
        CellSpec(key="ref2", kind="reference", task="t", prompt_index=0, params=CellParams(prompt="q")),
        _sweep("g", "ref1", "p"),
    ]  # ref2: the same task and position, another prompt (prompts were edited)
    ids = _setup(Session, cells)
    with Session() as s:
        store.store_reference(s, ids["ref1"], _ref((1, 2)))
        store.store_generation(s, ids["g"], plain_generation((1, 2)))
        store.store_reference(s, ids["ref2"], _ref((7, 7)))
        s.commit()
        g = s.scalars(select(Generation)).one()
    assert g.exact_match is True and g.rouge_l == 1.0


def _lease(Session, holder: str, ttl_s: float = 30.0, now_s: float | None = None) -> str | None:
    with Session() as s:
        out = store.acquire_lease(s, "e", holder, ttl_s, time.time() if now_s is None else now_s)
        s.commit()
    return out


def test_lease_refuses_a_second_holder_until_it_lapses(db_url):
    _, Session = open_db(db_url)
    now = time.time()
    assert _lease(Session, "host:1:a", 30, now) is None
    assert _lease(Session, "host:2:b", 30, now + 1) == "host:1:a"  # live: refused, holder named
    assert _lease(Session, "host:1:a", 30, now + 2) is None  # the holder itself may take it again
    with Session() as s:
        assert store.renew_lease(s, "e", "host:1:a", 30, now + 20)
        assert not store.renew_lease(s, "e", "host:2:b", 30, now + 20)
        s.commit()
    assert _lease(Session, "host:2:b", 30, now + 45) == "host:1:a"  # renewed at +20: lives until +50
    assert _lease(Session, "host:2:b", 30, now + 51) is None  # lapsed (a kill -9'd driver): taken
    with Session() as s:
        assert not store.renew_lease(s, "e", "host:1:a", 30, now + 52)  # the old holder learns it lost it
        store.release_lease(s, "e", "host:2:b")
        s.commit()
        assert s.scalar(select(func.count()).select_from(Lease)) == 0


def test_lease_race_has_exactly_one_winner(db_url):
    _, Session = open_db(db_url)
    barrier, results = threading.Barrier(6), {}

    def contend(i: int) -> None:
        barrier.wait()
        results[i] = _lease(Session, f"host:{i}:x")

    threads = [threading.Thread(target=contend, args=(i,)) for i in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    winners = [i for i, holder in results.items() if holder is None]
    assert len(winners) == 1
    assert all(holder == f"host:{winners[0]}:x" for i, holder in results.items() if i != winners[0])


def test_retry_failed_rebuilds_the_artifact_a_cell_found_corrupt(db_url, tmp_path):
    _, Session = open_db(db_url)
    train = CellSpec(key="tr", kind="train", corpus="c", params=CellParams(tokenizer="x"))
    sweep = CellSpec(
        key="sw",
        kind="sweep",
        strategy="o",
        draft="olifant",
        task="t",
        prompt_index=0,
        k=2,
        regime="cached",
        params=CellParams(prompt="p", needs={"ibase": "tr"}, reference="r"),
    )
    ids = _setup(Session, [train, sweep])
    ib = tmp_path / "c.igtree"
    ib.write_bytes(b"x")
    info = IBaseInfo(
        name="c",
        path=str(ib),
        sha256="0" * 64,
        backend="native",
        window=4,
        order="gain_ratio",
        tokenizer_id="x",
        tokens=1,
        instances=1,
        nodes_before_prune=1,
        nodes_after_prune=1,
        bytes=1,
        train_s=0.1,
    )
    with Session() as s:
        exp_id = store.find_experiment(s, "e").id
        store.store_artifact(s, ids["tr"], info)
        store.mark_finished(s, ids["tr"], "w")
        store.mark_running(s, [ids["sw"]])
        store.mark_failure(s, ids["sw"], f"IBaseError: {ib}: data checksum mismatch", final=True)
        s.commit()
        assert store.missing_artifacts(s, exp_id) == []
        assert store.retry_failed(s, exp_id) == 1
        s.commit()
        states = dict(s.execute(select(Cell.key, Cell.state)).all())
        assert states == {"tr": "pending", "sw": "pending"}
        assert s.scalar(select(func.count()).select_from(InstanceBase)) == 0  # rebuilt result replaces it
    ib.unlink()
    with Session() as s:
        store.store_artifact(s, ids["tr"], info)
        store.mark_finished(s, ids["tr"], "w")
        s.commit()
        assert store.missing_artifacts(s, exp_id) == ["tr"]


def test_requeue_artifact_drops_its_result_and_resets_the_cell(db_url, tmp_path):
    """What the driver does when a run meets a missing or corrupt instance base (the end-to-end test of the rebuild,
    tests/orchestrator/run/test_reliability_runs.py, runs on SQLite only)."""
    _, Session = open_db(db_url)
    train = CellSpec(key="tr", kind="train", corpus="c", params=CellParams(tokenizer="x"))
    ids = _setup(Session, [train, _sweep("g", "r", "p")])
    info = IBaseInfo(
        name="c",
        path=str(tmp_path / "c.igtree"),
        sha256="0" * 64,
        backend="native",
        window=4,
        order="gain_ratio",
        tokenizer_id="x",
        tokens=1,
        instances=1,
        nodes_before_prune=1,
        nodes_after_prune=1,
        bytes=1,
        train_s=0.1,
    )
    with Session() as s:
        exp_id = store.find_experiment(s, "e").id
        store.mark_running(s, [ids["tr"]])
        store.store_artifact(s, ids["tr"], info)
        store.mark_finished(s, ids["tr"], "w")
        s.commit()
        queued = store.requeue_artifact(s, exp_id, "tr")
        s.commit()
        assert (queued.id, queued.key, queued.kind, queued.corpus) == (ids["tr"], "tr", "train", "c")
        cell = s.get(Cell, ids["tr"])
        assert (cell.state, cell.attempts, cell.error, cell.finished_at) == ("pending", 0, None, None)
        assert s.scalar(select(func.count()).select_from(InstanceBase)) == 0
        assert store.requeue_artifact(s, exp_id, "g") is None  # a sweep cell is no artifact
        assert store.requeue_artifact(s, exp_id, "nosuch") is None


def test_interrupted_cells_keep_their_attempts(db_url):
    _, Session = open_db(db_url)
    ids = _setup(Session, [_sweep("g", "r", "p")])
    with Session() as s:
        exp_id = store.find_experiment(s, "e").id
        store.mark_running(s, [ids["g"]])
        s.commit()
        assert store.reset_running(s, exp_id) == 1
        s.commit()
        assert s.get(Cell, ids["g"]).attempts == 0


def test_readers_cannot_write(db_url):
    open_db(db_url)[0].dispose()
    Session = open_reader(db_url)
    with Session() as s, pytest.raises(Exception) as err:
        s.execute(text("insert into leases (experiment, holder, expires_at, acquired_at) values ('x', 'y', 1, 1)"))
        s.commit()
    assert "read" in str(err.value).lower()


def test_sqlite_reader_creates_no_files_and_changes_no_byte(tmp_path):
    url = f"sqlite:///{tmp_path / 'r.db'}"
    engine, Session = open_db(url)
    with Session() as s:
        store.upsert_experiment(s, "e", "", "", None)
        s.commit()
    engine.dispose()  # the writer is gone: its -wal/-shm files are removed
    before = {p.name: p.read_bytes() for p in tmp_path.iterdir()}
    assert set(before) == {"r.db"}
    reader = open_reader(url)
    with reader() as s:
        assert store.find_experiment(s, "e").name == "e"
    assert {p.name: p.read_bytes() for p in tmp_path.iterdir()} == before


@pytest.mark.parametrize(
    "url, says",
    [
        ("not a url at all", "not a SQLAlchemy URL"),
        ("nosuchdb://u@h/x", "unknown database scheme"),
        ("postgresql+pg8000://u@h/x", "driver is not installed"),
        ("sqlite:////no/such/folder/g.db", "folder /no/such/folder does not exist"),
    ],
)
def test_bad_database_urls_are_one_line(url, says):
    with pytest.raises(DatabaseError, match=says) as err:
        open_db(url)
    assert "\n" not in str(err.value)


def test_a_file_that_is_not_a_database_is_one_line(tmp_path):
    bogus = tmp_path / "notes.txt"
    bogus.write_text("hello, this is not SQLite\n" * 100)
    for opener in (open_db, open_reader):
        with pytest.raises(DatabaseError, match="not a database") as err:
            opener(f"sqlite:///{bogus}")
        assert "\n" not in str(err.value)
    assert bogus.read_text().startswith("hello")


def test_an_ibase_info_has_every_field_the_store_reads_and_each_is_a_column():
    """`storage.results.IBASE_COLUMNS`: the trainer's IBaseInfo fields the table has a column for; the rest are the row's own."""
    assert {f.name for f in fields(IBaseInfo)} - set(IBASE_COLUMNS) == {"name", "reused", "node_id"}  # not stored
    columns = {c.name for c in InstanceBase.__table__.columns}
    assert columns - set(IBASE_COLUMNS) == {"id", "cell_id", "experiment_id", "corpus", "created_at"}

"""storage.store: the driver's writes and state changes, on a real SQLite file."""

from __future__ import annotations

from dataclasses import fields, replace

import pytest
from sqlalchemy import event, select

from storage import store
from storage.cell_spec import CellParams, CellSpec
from storage.db import open_db
from storage.generation_row import (
    COMPUTED,
    DECODED_COLUMNS,
    DEFAULTED,
    ENERGY_COLUMNS,
    EXPANDED,
    FROM_CELL,
    RECORD_COLUMNS,
    record_columns,
)
from storage.models import Artifact, Cell, Generation
from workers.contracts import ArtifactInfo, EnergyRecord, GenerationRecord, ReferenceRecord
from workers.decoding.records import Decoded


@pytest.fixture
def session(tmp_path):
    _, Session = open_db(f"sqlite:///{tmp_path / 'store.db'}")
    with Session() as s:
        yield s


def cells() -> list[CellSpec]:
    return [
        CellSpec(key="t", kind="train", corpus="c", params=CellParams(tokenizer="mistral")),
        CellSpec(key="r", kind="reference", task="q", prompt_index=0, params=CellParams(prompt="p")),
        CellSpec(
            key="g",
            kind="sweep",
            strategy="o",
            draft="olifant",
            task="q",
            corpus="c",
            prompt_index=0,
            k=3,
            regime="cached",
            params=CellParams(prompt="p", options={"corpus": "c"}, needs={"ibase": "t"}, reference="r"),
        ),
    ]


def gen(tokens=(5, 6, 7), energy_j=2.0) -> GenerationRecord:
    decoded = Decoded(
        tokens=tokens,
        steps=3,
        drafted=6,
        accepted=3,
        accept_hist=(0, 0, 1, 0),
        accepted_per_step=(2, 1),
        tokens_per_step=(2, 1),
        fastpath_rejects=0,
        wall_s=0.5,
        draft_s=0.1,
        verify_s=0.4,
        started_at=1.0,
        ended_at=1.5,
        bridged=False,
        stopped="max_new_tokens",
    )
    return GenerationRecord(
        decoded,
        n_prompt_tokens=4,
        text="x",
        device="cpu",
        energy=EnergyRecord(energy_j, 4.0, "estimate", False, energy_j / len(tokens) * 100, len(tokens) / energy_j),
    )


def test_add_cells_adds_new_keys_once_and_refreshes_params_of_unfinished(session):
    exp = store.upsert_experiment(session, "e", "spec", "h", None)
    assert store.add_cells(session, exp.id, cells()) == 3
    assert store.add_cells(session, exp.id, cells()) == 0
    changed = [CellSpec(key="g", kind="sweep", params=CellParams(prompt="p", needs={"ibase": "t2"}))]
    store.add_cells(session, exp.id, changed)
    q = {c.key: c for c in store.pending_cells(session, exp.id, ("sweep",))}
    assert q["g"].needs == (("ibase", "t2"),)


def test_registering_the_same_cells_again_rewrites_none_and_a_changed_one_only(db_url):
    """A resume registers the stored spec's grid again: no cell's params are rewritten (at 10^6 cells that update
    was most of a resume's start), on SQLite (the params read as text) and PostgreSQL (read parsed) alike."""
    engine, Session = open_db(db_url)
    updates: list[str] = []
    event.listen(engine, "before_cursor_execute", lambda *a: updates.append(a[2]) if "UPDATE cells" in a[2] else None)
    with Session() as s:
        exp = store.upsert_experiment(s, "e", "spec", "h", None)
        store.add_cells(s, exp.id, cells())
        s.commit()
        assert store.add_cells(s, exp.id, cells()) == 0 and updates == []
        changed = [replace(c, params=replace(c.params, prompt="new")) if c.key == "g" else c for c in cells()]
        store.add_cells(s, exp.id, changed)
        assert len(updates) == 1
        assert {c.key: c.params.prompt for c in store.pending_cells(s, exp.id, ("sweep",))}["g"] == "new"
    engine.dispose()


def test_cells_inserted_as_the_database_driver_takes_them_are_the_rows_the_orm_inserts(
    db_url, monkeypatch, request, tmp_path
):
    """`add_cells`' plain insert (`storage.batch_sql`) writes every column as the ORM's insert does, JSON and times
    included, on SQLite and PostgreSQL."""
    stored = []
    for plain in (True, False):
        url = db_url
        if not plain:  # a second fresh database of the same kind
            sqlite = db_url.startswith("sqlite")
            url = f"sqlite:///{tmp_path / 'orm.db'}" if sqlite else request.getfixturevalue("pg_cluster").new_database()
        monkeypatch.setattr(store.batch_sql, "supported", lambda s, plain=plain: plain)
        engine, Session = open_db(url)
        with Session() as s:
            exp = store.upsert_experiment(s, "e", "spec", "h", None)
            store.add_cells(s, exp.id, cells())
            s.commit()
            rows = s.execute(select(Cell.__table__).order_by(Cell.id)).mappings().all()
            raw = s.connection().exec_driver_sql("SELECT params, created_at FROM cells ORDER BY id").all()
        engine.dispose()
        drop = ("created_at",)
        stored.append(([{k: v for k, v in r.items() if k not in drop} for r in rows], [r[0] for r in raw]))
        if db_url.startswith("sqlite"):
            assert all("+" not in str(t) for _, t in raw)  # times as the ORM binds them, not sqlite3's default
    assert stored[0] == stored[1] and len(stored[0][0]) == len(cells())


def test_cells_stream_in_chunks_from_a_generator_and_stale_keys_stream_too(session, monkeypatch):
    monkeypatch.setattr(store, "INSERT_CHUNK", 4)  # 11 cells: three batches, the last partial
    exp = store.upsert_experiment(session, "e", "spec", "h", None)
    grid = lambda n, prompt: (  # noqa: E731 - a fresh generator per pass, as the driver's grid is
        CellSpec(key=f"c{i}", kind="sweep", params=CellParams(prompt=prompt)) for i in range(n)
    )
    assert store.add_cells(session, exp.id, grid(11, "p")) == 11
    assert store.add_cells(session, exp.id, grid(13, "q")) == 2  # two new, eleven refreshed in batches
    assert {c.params.prompt for c in store.pending_cells(session, exp.id, ("sweep",))} == {"q"}
    stale = store.stale_cells(session, exp.id, (f"c{i}" for i in range(2, 13)))  # c0 and c1 no longer made
    keys = dict(session.execute(select(Cell.id, Cell.key)).all())
    assert sorted(keys[i] for i in stale) == ["c0", "c1"]


def test_state_changes_and_dependents(session):
    exp = store.upsert_experiment(session, "e", "spec", "h", None)
    store.add_cells(session, exp.id, cells())
    ids = {c.key: c.id for c in store.pending_cells(session, exp.id, ("train", "reference", "sweep"))}
    store.mark_running(session, [ids["t"]], worker="w")
    assert store.cell_states(session, [ids["t"]]) == {ids["t"]: "running"}
    store.mark_failure(session, ids["t"], "boom", final=False)
    assert store.cell_states(session, [ids["t"]])[ids["t"]] == "pending"
    store.mark_failure(session, ids["t"], "boom", final=True)
    assert store.fail_dependents(session, exp.id, [ids["g"]], "ibase failed: boom") == 1
    g = session.get(Cell, ids["g"])
    assert (g.state, g.error) == ("failed", "ibase failed: boom")
    assert store.retry_failed(session, exp.id) == 2
    store.mark_running(session, [ids["r"]])
    assert store.reset_running(session, exp.id) == 1


def test_generation_metrics_and_late_reference(session):
    exp = store.upsert_experiment(session, "e", "spec", "h", None)
    store.add_cells(session, exp.id, cells())
    ids = {c.key: c.id for c in store.pending_cells(session, exp.id, ("train", "reference", "sweep"))}
    store.store_generation(session, ids["g"], gen())
    session.flush()
    g = session.query(Generation).one()
    # 3 accepted of 6 drafted = 0.5; MAL = 3 accepted / 2 rounds = 1.5 (3 verifier passes: the prefill is no round);
    # 3 tokens / 0.5 s = 6 tok/s
    assert (g.acceptance, g.mal, g.tokens_per_s) == (0.5, 1.5, 6.0)
    assert g.rouge_l is None and g.exact_match is None  # no reference yet
    store.store_reference(session, ids["r"], ReferenceRecord("p", (1,), (5, 6, 8), "y", 0.2))
    session.flush()
    session.refresh(g)
    # LCS(5 6 7, 5 6 8) = 2 of 3 on both sides: F = 2/3
    assert g.exact_match is False and g.rouge_l == pytest.approx(2 / 3)
    assert g.j_per_100_tokens == pytest.approx(2.0 / 3 * 100)


def test_every_record_field_has_its_column_and_every_column_a_source():
    """The one mapping (`storage.generation_row`): a record field is a column of its name (its decoded fields and its
    energy as their records' fields), and a column is a record's, the cell's, computed or the table's own, once."""
    record = {f.name for f in fields(GenerationRecord)}
    columns = [c.name for c in Generation.__table__.columns]
    assert set(RECORD_COLUMNS) == record - set(EXPANDED) and set(ENERGY_COLUMNS) == {
        f.name for f in fields(EnergyRecord)
    }
    assert set(DECODED_COLUMNS) == {f.name for f in fields(Decoded)}
    sources = [*DECODED_COLUMNS, *RECORD_COLUMNS, *ENERGY_COLUMNS, *FROM_CELL, *COMPUTED, *DEFAULTED]
    assert sorted(sources) == sorted(columns)  # each column from one source, none left out


def test_a_generation_row_stores_the_records_values(session):
    exp = store.upsert_experiment(session, "e", "spec", "h", None)
    store.add_cells(session, exp.id, cells())
    ids = {c.key: c.id for c in store.pending_cells(session, exp.id, ("train", "reference", "sweep"))}
    store.store_generation(session, ids["g"], gen())
    session.flush()
    g = session.query(Generation).one()
    assert (g.strategy, g.draft, g.task, g.k, g.regime, g.prompt_key, g.temperature) == (
        "o",
        "olifant",
        "q",
        3,
        "cached",
        "r",
        0.0,
    )
    assert (g.tokens, g.accept_hist, g.accepted_per_step, g.tokens_per_step) == (
        [5, 6, 7],
        [0, 0, 1, 0],
        [2, 1],
        [2, 1],
    )
    assert (g.wall_s_runs, g.passes, g.drafted_per_step, g.measure, g.predicted_wall_s) == (
        [0.5],
        None,
        None,
        "timed",
        None,
    )
    assert (g.rounds, g.first_accepted, g.first_checked, g.n_tokens, g.n_prompt_tokens) == (2, 2, None, 3, 4)
    assert (g.energy_j, g.mean_power_w, g.power_source, g.power_measured) == (2.0, 4.0, "estimate", False)
    assert g.tokens_per_j == pytest.approx(1.5) and (g.bridged, g.stopped, g.device, g.text) == (
        False,
        "max_new_tokens",
        "cpu",
        "x",
    )


def test_record_columns_store_per_pass_records_as_lists_and_leave_a_missing_first_accepted_to_the_table():
    rec = gen().replaced(passes=((4, 0, 1), (3, 4, 3)), drafted_per_step=(3, 3), wall_s_runs=(0.7, 0.5), energy=None)
    row = record_columns(rec.replaced(first_accepted=1))
    assert (row["passes"], row["drafted_per_step"], row["wall_s_runs"]) == ([[4, 0, 1], [3, 4, 3]], [3, 3], [0.7, 0.5])
    assert row["first_accepted"] == 1 and all(row[c] is None for c in ENERGY_COLUMNS)
    assert "first_accepted" not in record_columns(rec)


def test_artifact_paths_cover_instance_bases_and_other_artifacts(session):
    exp = store.upsert_experiment(session, "e", "spec", "h", None)
    store.add_cells(session, exp.id, [*cells(), CellSpec(key="d", kind="datastore", corpus="c")])
    ids = {c.key: c.id for c in store.pending_cells(session, exp.id, ("train", "datastore"))}
    store.store_artifact(session, ids["d"], ArtifactInfo("datastore", "/a/c.sa", "f" * 64, 10, 0.3, meta={"n": 1}))
    store.mark_finished(session, ids["d"], "cpu")
    session.flush()
    assert store.artifact_paths(session, exp.id) == {"d": "/a/c.sa"}
    assert session.query(Artifact).one().meta == {"n": 1}


def test_cell_params_round_trip_through_json_and_ignore_unknown_keys():
    p = CellParams(prompt="p", options={"corpus": "c"}, needs={"ibase": "t"}, reference="r", top_k=5, top_p=0.9, seed=7)
    assert CellParams.from_json(p.to_json()) == p
    assert CellParams().to_json() == {}  # defaults are not stored
    assert CellParams.from_json({"prompt": "q", "from_a_newer_writer": 1}) == CellParams(prompt="q")
    assert CellSpec(key="g", kind="sweep", params=p).needs == (("ibase", "t"),)


def test_a_batch_of_generations_stores_the_rows_one_at_a_time_would(db_url, request, tmp_path):
    """`store_generations` (the driver's path for a replay task's cells: one insert handed to the database driver as
    it is, one read of the references, one update per worker) writes, column for column and byte for byte, what
    `store_generation` (the ORM) writes for each cell, and marks them done."""
    stored = {}
    urls = {  # two fresh databases of the same kind
        "one": db_url,
        "batch": f"sqlite:///{tmp_path / 'b.db'}"
        if db_url.startswith("sqlite")
        else request.getfixturevalue("pg_cluster").new_database(),
    }
    for way in ("one", "batch"):
        _, Session = open_db(urls[way])
        with Session() as s:
            exp = store.upsert_experiment(s, "e", "spec", "h", None)
            grid = [*cells(), replace(cells()[2], key="g2", prompt_index=1, k=5, temperature=0.8)]
            store.add_cells(s, exp.id, grid)
            ids = {c.key: c.id for c in store.pending_cells(s, exp.id, ("train", "reference", "sweep"))}
            store.store_reference(s, ids["r"], ReferenceRecord("p", (1,), (5, 6, 8), "y", 0.2))
            records = {
                "g": gen(),
                "g2": replace(
                    gen((5, 6, 8), energy_j=3.0), decoded=replace(gen().decoded, passes=((4, 0, 1), (3, 4, 3)))
                ),
            }
            if way == "one":
                for key, record in records.items():
                    store.store_generation(s, ids[key], record)
                    store.mark_finished(s, ids[key], "w1" if key == "g" else "w2")
            else:
                pending = {c.key: c for c in store.pending_cells(s, exp.id, ("sweep",))}
                store.store_generations(
                    s, exp.id, [(pending[k], r, "w1" if k == "g" else "w2") for k, r in records.items()]
                )
            s.commit()
            rows = s.execute(select(Generation.__table__).order_by(Generation.id)).mappings().all()
            raw = s.connection().exec_driver_sql("SELECT * FROM generations ORDER BY id").all()  # the JSON's text too
            done = s.execute(select(Cell.key, Cell.state, Cell.worker).where(Cell.kind == "sweep")).all()
            times = s.execute(select(Cell.created_at, Cell.finished_at).where(Cell.kind == "sweep")).all()
            assert all((made.tzinfo is None) == (ended.tzinfo is None) for made, ended in times)  # bound alike
        stored[way] = ([dict(r) for r in rows], sorted(done), [tuple(r) for r in raw])
    assert len(stored["one"][0]) == 2 and stored["batch"] == stored["one"]
    assert stored["batch"][1] == [("g", "done", "w1"), ("g2", "done", "w2")]
    assert stored["batch"][0][0]["exact_match"] is False and stored["batch"][0][1]["exact_match"] is None  # sampled


def test_pending_cells_read_back_what_was_stored_sharing_their_repeated_values(db_url):
    """At 10^6 pending cells a resume holds every one: a params text repeated over k and regimes is parsed once and
    shared, as is each repeated string; what reads back is what was stored (SQLite and PostgreSQL)."""
    engine, Session = open_db(db_url)
    params = CellParams(prompt="a long prompt " * 50, reference="r", options={"n": 4}, needs={"ibase": "t"})
    stored = [
        CellSpec(f"c{k}{r}", "sweep", "ngram", "ngram", "t", None, 0, k, r, 0.0, params=params)
        for k in (1, 2)
        for r in ("cached", "uncached")
    ]
    with Session() as s:
        exp = store.upsert_experiment(s, "e", "spec", "h", None)
        store.add_cells(s, exp.id, stored)
        s.commit()
        read = store.pending_cells(s, exp.id, ("sweep",))
    engine.dispose()
    assert sorted(((c.key, c.k, c.regime, c.params) for c in read), key=str) == sorted(
        ((c.key, c.k, c.regime, c.params) for c in stored), key=str
    )
    assert all(c.id is not None and c.attempts == 0 for c in read)
    assert len({id(c.params) for c in read}) == 1 and len({id(c.strategy) for c in read}) == 1
    assert len({id(c.regime) for c in read}) == 2

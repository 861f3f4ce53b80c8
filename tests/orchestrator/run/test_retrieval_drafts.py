"""A spec with the retrieval drafts (rest, lookup, suffix) runs through the real driver: datastore built, exact greedy."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from sqlalchemy import select

from orchestrator.run.driver import RunOptions, run_spec_file
from storage.db import open_db
from storage.models import Artifact, Cell, Generation
from tests.orchestrator.conftest import MAX_NEW_TOKENS
from workers.files import file_sha256
from workers.training.datastore import Datastore

pytestmark = [pytest.mark.usefixtures("ray_local"), pytest.mark.slow]

RETRIEVAL = """name = "rest-pydoc"
draft = "rest"
corpus = "pydoc"
[[strategies]]
name = "lookup"
draft = "lookup"
k = [3]
[[strategies]]
name = "suffix"
draft = "suffix"
k = [3]"""


def test_rest_lookup_and_suffix_run_through_the_driver(tmp_path, write_spec):
    spec = write_spec(name="retrieval", **{'name = "olifant-pydoc"\ndraft = "olifant"\ncorpus = "pydoc"': RETRIEVAL})
    assert 'draft = "rest"' in spec.read_text()
    o = RunOptions(db_url=f"sqlite:///{tmp_path / 'g.db'}")
    report = run_spec_file(spec, o)
    assert report.counts["failed"] == 0 and report.counts["pending"] == 0
    with open_db(o.db_url, migrate=False)[1]() as s:
        store = s.scalars(select(Artifact)).one()
        assert store.kind == "datastore" and store.corpus == "pydoc" and Path(store.path).is_file()
        assert store.bytes == Path(store.path).stat().st_size and store.meta["tokens"] > 1000 and store.build_s > 0
        assert Datastore.open(store.path).n_tokens == store.meta["tokens"]
        manifest = Path(store.meta["manifest_path"])  # beside the datastore, what it holds
        assert (
            manifest == Path(store.path + ".manifest.json") and file_sha256(manifest) == store.meta["manifest_sha256"]
        )
        m = json.loads(manifest.read_text())
        assert (
            m["sha256"] == store.sha256 and m["kind"] == "datastore" and m["corpus"]["tokens"] == store.meta["tokens"]
        )
        gens = s.execute(select(Cell.strategy, Generation).join(Generation, Generation.cell_id == Cell.id)).all()
    by_strategy = {}
    for strategy, g in gens:
        by_strategy.setdefault(strategy, []).append(g)
    # rest at k 2 and 3, lookup and suffix at k 3; 2 prompts x 2 regimes each
    assert {k: len(v) for k, v in by_strategy.items() if k != "plain"} == {
        "ngram": 8,
        "rest-pydoc": 8,
        "lookup": 4,
        "suffix": 4,
    }
    assert all(g.exact_match and g.n_tokens == MAX_NEW_TOKENS for _, g in gens)

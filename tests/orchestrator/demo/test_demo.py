"""The demo's pieces that run without training models: built-in sources, the printed summary, Table 5."""

from __future__ import annotations

from pathlib import Path

import pytest

from orchestrator.demo.builtin import materialize, uses_builtin
from orchestrator.demo import DEMO_SPEC, redundancy_table, summary_text
from orchestrator.spec import load_spec, parse_spec
from storage.db import open_db
from storage.queries import summary_frame
from tests.dashboard.populate import populate
from workers.errors import SpecError

DATA_ONLY = """
[experiment]
name = "d"
[verifier]
model = "org/model"
[[corpora]]
name = "shakespeare"
path = "demo:shakespeare-train"
[[tasks]]
name = "pydoc"
path = "demo:pydoc-test"
prompts = 2
[[strategies]]
name = "oli"
draft = "olifant"
corpus = "shakespeare"
"""


def test_demo_spec_uses_builtins():
    spec = load_spec(DEMO_SPEC)
    assert uses_builtin(spec)
    assert {s.draft for s in spec.strategies} >= {"plain", "ngram", "neural", "olifant", "hybrid", "lookup", "suffix", "rest"}
    corpus_trained = {c.name for c in spec.corpora if not c.distilled}
    assert {t.name for t in spec.tasks} == corpus_trained  # task names equal corpus names
    assert {c.name for c in spec.corpora if c.distilled} == {f"{t}-distilled" for t in corpus_trained}
    names = {s.name for s in spec.strategies}
    assert all({f"distilled-{t}", f"hybrid-{t}", f"hybrid-{t}-adaptive"} <= names for t in corpus_trained)


def test_materialize_writes_demo_corpora(tmp_path, monkeypatch):
    monkeypatch.setenv("GREENSPEC_CACHE", str(tmp_path))
    spec = materialize(parse_spec(DATA_ONLY))
    assert not uses_builtin(spec)
    train, test = Path(spec.corpora[0].path), Path(spec.tasks[0].path)
    assert train.name == "shakespeare-train.txt" and test.name == "pydoc-test.txt"
    assert train.stat().st_size > 1_000_000 and test.stat().st_size > 10_000


def test_unknown_builtin_model_refused(tmp_path, monkeypatch):
    monkeypatch.setenv("GREENSPEC_CACHE", str(tmp_path))
    with pytest.raises(SpecError, match="unknown built-in model 'demo:giant'"):
        materialize(parse_spec(DATA_ONLY.replace('"org/model"', '"demo:giant"')))


def test_summary_and_redundancy_tables(tmp_path):
    url = f"sqlite:///{tmp_path / 'g.db'}"
    populate(url)
    _, Session = open_db(url, migrate=False)
    with Session() as s:
        text = summary_text(summary_frame(s, "fixture"), redundancy_table(s, "fixture"))
        red = redundancy_table(s, "fixture")
    for title in ("tokens_per_s (cached)", "speedup over plain", "acceptance (uncached)", "mal (cached)",
                  "j_per_100_tokens", "Table 5", "olifant-wikitext"):
        assert title in text
    assert "nan" not in text
    assert set(red["task"]) == {"wikitext", "pubmed"}
    assert (red["texts"] > 1).all()
    assert red[["within_text", "cross_doc", "gzip_ratio"]].stack().between(0, 1.5).all()

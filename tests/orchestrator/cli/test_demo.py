"""The demo's pieces that run without training models: built-in sources, the printed summary, Table 5."""

from __future__ import annotations

from pathlib import Path

import pytest

from analysis.checks.targets import check_all, roles
from analysis.checks.trees import tree_checks, tree_roles
from analysis.summary import summary_frame
from greenspec.findings import findings_markdown, read_findings
from orchestrator.cli.demo import DEMO_SPEC, redundancy_table, run_demo, summary_text
from orchestrator.run.driver import RunOptions
from orchestrator.run.inputs import materialize, uses_builtin
from orchestrator.run.spec import parse_spec
from orchestrator.run.spec_paths import load_spec
from storage.browse import spec_toml
from storage.db import open_db
from storage.queries import experiment_id
from storage.summary import prompt_frame
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


# The demo's own spec, shrunk: its pydoc domain (real demo text via `demo:` names), the paper's drafts and the
# future-work strategies, all three regimes; the tests' tiny trained verifier instead of the demo's models.
TINY_DEMO = """
[experiment]
name = "tiny-demo"
batch_size = 8
[verifier]
model = "{model}"
tokenizer = "mistral"
dtype = "float32"
device = "cpu"
threads = 1  # a tiny model: one torch thread is fastest, and the suite shares the cores
[[corpora]]
name = "pydoc"
path = "demo:pydoc-train"
max_tokens = 20000
[[corpora]]
name = "pydoc-distilled"
path = "demo:pydoc-train"
labels = "verifier"
label_max_tokens = 1500
label_chunk_tokens = 64
label_overlap_tokens = 16
[[tasks]]
name = "pydoc"
path = "demo:pydoc-test"
prompts = 2
prompt_words = 20
[[strategies]]
name = "plain"
draft = "plain"
[[strategies]]
name = "ngram"
draft = "ngram"
[[strategies]]
name = "olifant-pydoc"
draft = "olifant"
corpus = "pydoc"
[[strategies]]
name = "distilled-pydoc"
draft = "olifant"
corpus = "pydoc-distilled"
[[strategies]]
name = "hybrid-pydoc"
draft = "hybrid"
corpus = "pydoc"
[[strategies]]
name = "hybrid-pydoc-adaptive"
draft = "hybrid"
corpus = "pydoc"
adaptive = true
threshold = 0.3
online = true
k = [3]
[[strategies]]
name = "distilled-pydoc-tree"
draft = "olifant"
corpus = "pydoc-distilled"
tree = 3
[[strategies]]
name = "hybrid-pydoc-auto"
draft = "hybrid"
corpus = "pydoc"
k = "auto"
[sweep]
k = [2, 3]
regimes = ["uncached", "cached", "cached-standard"]
max_new_tokens = 16
warmup = false
[power]
sources = ["estimate"]
"""

REGIMES = ("cached", "cached-standard", "uncached")


def test_demo_spec_runs_the_real_verifier_on_three_domains():
    spec = load_spec(DEMO_SPEC)
    assert spec.verifier.model == "smollm2-135m" and spec.verifier.tokenizer is None  # SmolLM2's own tokenizer
    assert {t.name for t in spec.tasks} == {"shakespeare", "pydoc", "legal"}
    assert set(spec.sweep.regimes) == set(REGIMES)
    olifants = [s for s in spec.strategies if s.draft == "olifant" and s.name.startswith("olifant-")]
    assert len(olifants) == 3 and all(s.tasks is None for s in olifants)  # every base on every task: the diagonal
    names = {s.name for s in spec.strategies}
    assert all({f"distilled-{t}", f"hybrid-{t}", f"rest-{t}"} <= names for t in ("shakespeare", "pydoc", "legal"))


@pytest.mark.parametrize("name", ["demo.toml", "demo-toy.toml"])
def test_demo_specs_use_builtins(name):
    spec = load_spec(DEMO_SPEC.with_name(name))
    assert uses_builtin(spec)
    assert {s.draft for s in spec.strategies} >= {
        "plain",
        "ngram",
        "neural",
        "olifant",
        "hybrid",
        "lookup",
        "suffix",
        "rest",
    }
    corpus_trained = {c.name for c in spec.corpora if not c.distilled}
    assert {t.name for t in spec.tasks} == corpus_trained  # task names equal corpus names
    assert {c.name for c in spec.corpora if c.distilled} == {f"{t}-distilled" for t in corpus_trained}
    names = {s.name for s in spec.strategies}
    assert all({f"distilled-{t}", f"hybrid-{t}"} <= names for t in corpus_trained)


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
    for title in (
        "tokens_per_s (cached)",
        "speedup over plain",
        "acceptance (uncached)",
        "mal (cached)",
        "j_per_100_tokens",
        "Table 5",
        "olifant-wikitext",
    ):
        assert title in text
    assert "nan" not in text
    assert set(red["task"]) == {"wikitext", "pubmed"}
    assert (red["texts"] > 1).all()
    assert red[["within_text", "cross_doc", "gzip_ratio"]].stack().between(0, 1.5).all()


@pytest.mark.slow
@pytest.mark.usefixtures("ray_local")
def test_targets_over_a_demo_database(tmp_path, tiny_verifier):
    spec = tmp_path / "demo.toml"
    spec.write_text(TINY_DEMO.format(model=tiny_verifier))
    url, printed = f"sqlite:///{tmp_path / 'g.db'}", []
    run_demo(RunOptions(db_url=url), spec_path=str(spec), echo=printed.append)
    with open_db(url, migrate=False)[1]() as s:
        df = summary_frame(s, "tiny-demo")
        exp = experiment_id(s, "tiny-demo")
        prompts = prompt_frame(s, exp)
        spec = parse_spec(spec_toml(s, exp))
        checks = check_all(df, roles(spec), prompts)  # the roles from the stored spec, paired as the demo
        tree_roles_ = tree_roles(spec)
    got = {(c.target, c.task, c.regime): c for c in checks}
    want = (
        {("exact match 1.0", "all", "all"), ("hybrid-pydoc >= better part", "pydoc", "uncached")}
        | {("distilled-pydoc acceptance > olifant-pydoc", "pydoc", r) for r in REGIMES}
        | {("hybrid-pydoc never loses to plain", "pydoc", r) for r in REGIMES[:2]}
        | {("hybrid-pydoc-adaptive >= hybrid-pydoc at its best k", "pydoc", r) for r in REGIMES}
    )
    assert set(got) == want
    assert got[("exact match 1.0", "all", "all")].ok  # output-preserving in every cell
    assert all("missing" not in c.detail and "nan" not in c.detail for c in checks)
    uncached = df[df["regime"] == "uncached"]
    top = uncached.loc[uncached.groupby("strategy")["speedup"].idxmax()].set_index("strategy")  # each one's best k
    better = max(("ngram", "olifant-pydoc"), key=lambda name: top.loc[name, "speedup"])
    detail = got[("hybrid-pydoc >= better part", "pydoc", "uncached")].detail
    assert detail.startswith(f"{better}: k=") and f"{top.loc['hybrid-pydoc', 'speedup']:.2f}x [" in detail
    passes = f"tokens/pass {top.loc['hybrid-pydoc', 'mean_accepted_tokens']:.2f} vs {top.loc[better, 'mean_accepted_tokens']:.2f}"
    assert f"; {passes}; best k chosen on the other half of the prompts (hybrid-pydoc " in detail
    assert all(c.verdict in ("holds", "does not hold", "inconclusive", "tie", "by construction") for c in checks)
    with open_db(url, migrate=False)[1]() as s:
        found = read_findings(s, "tiny-demo")
    assert findings_markdown(found) in "\n".join(
        printed
    )  # the demo printed the findings table `greenspec findings` does
    shown = set(zip(found["target"], found["task"], found["regime"]))
    assert {(c.target, c.task, c.regime) for c in checks} <= shown  # these same verdicts among them
    trees = tree_checks(df, tree_roles_, prompts)
    assert {(c.target, c.regime) for c in trees} == (
        {("distilled-pydoc-tree more tokens/pass than distilled-pydoc at k=3", r) for r in REGIMES}
        | {("distilled-pydoc-tree best speedup > distilled-pydoc's best", "uncached")}
        | {("distilled-pydoc-tree best speedup > distilled-pydoc's best (reported)", r) for r in REGIMES[:2]}
        | {("hybrid-pydoc-auto >= hybrid-pydoc at its best fixed k", r) for r in REGIMES}
    )
    assert {(c.target, c.task, c.regime) for c in trees} <= shown
    report = tmp_path / "tiny-demo-report.html"  # beside the database, its path printed
    assert f"Report (one HTML file to share): {report}" in printed and report.is_file()
    assert f"{top.loc['hybrid-pydoc', 'speedup']:.2f} [" in report.read_text()

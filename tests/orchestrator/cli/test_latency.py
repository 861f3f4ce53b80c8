"""`greenspec latency`: standalone draft latency on a tiny spec (real tokenizer, IGTree, TiMBL, tiny neural model)."""

from __future__ import annotations

import pytest
from click.testing import CliRunner

from orchestrator.cli import main
from orchestrator.run.latency import measure_spec_file
from storage.db import open_db
from storage.latency import latency_frame
from workers.latency import (
    LatencyOptions,
    LatencyRow,
    format_table,
    summarize_times,
    time_proposals,
)

NEURAL = """
[[strategies]]
name = "neural"
draft = "neural"
model = "{model}"
tokenizer = "mistral"
[[strategies]]
name = "ngram-word"
draft = "ngram"
unit = "word"
"""


class CountingDraft:
    """A draft that records its calls (the timing loop's contract: reset, one untimed call, then repeats)."""

    def __init__(self):
        self.calls: list[tuple[str, int]] = []

    def reset(self):
        self.calls.append(("reset", 0))

    def propose(self, context, k):
        self.calls.append(("propose", k))
        return [1]


def test_timing_loop_resets_warms_and_repeats():
    d = CountingDraft()
    times = time_proposals(d, [[1, 2], [3, 4]], repeats=3)
    assert len(times) == 6 and all(t >= 0 for t in times)
    assert d.calls == ([("reset", 0)] + [("propose", 1)] * 4) * 2  # 1 untimed + 3 timed per context


def test_summary_statistics_in_microseconds():
    row = summarize_times("s", "ngram", "ngram", [1e-6, 2e-6, 3e-6, 4e-6, 100e-6])
    # mean (1+2+3+4+100)/5 = 22 us; median 3 us; p95 by linear interpolation: 4 + 0.8 * (100 - 4) = 80.8 us
    assert (row.queries, row.mean_us, row.median_us, row.min_us) == (
        5,
        pytest.approx(22.0),
        pytest.approx(3.0),
        pytest.approx(1.0),
    )
    assert row.p95_us == pytest.approx(80.8)


@pytest.fixture
def spec_path(write_spec, tiny_verifier, tmp_path):
    path = write_spec(name="lat")
    text = path.read_text().replace("[sweep]", NEURAL.format(model=tiny_verifier) + "[sweep]")
    text = text.replace("[experiment]\n", f'[experiment]\nartifacts = "{tmp_path / "artifacts"}"\n')
    path.write_text(text)
    return path


@pytest.mark.slow
def test_every_strategy_and_both_olifant_engines_are_timed(spec_path, tmp_path):
    name, rows = measure_spec_file(spec_path, LatencyOptions(prompts=2, repeats=3))
    assert name == "lat"
    got = {(r.strategy, r.engine) for r in rows}
    assert got == {
        ("ngram", "ngram"),
        ("ngram-word", "ngram"),
        ("olifant-pydoc", "native"),
        ("olifant-pydoc", "timbl"),
        ("neural", "neural"),
    }  # plain drafts nothing: not timed
    assert all(isinstance(r, LatencyRow) and r.queries == 6 and 0 < r.min_us <= r.median_us <= r.p95_us for r in rows)
    # both instance bases were trained here (none stored) and are reused by the next call
    built = {p.suffix for p in (tmp_path / "artifacts").iterdir()}
    assert {".ibase", ".igtree"} <= built  # TiMBL's instance base has sidecar files beside it
    mtimes = {p: p.stat().st_mtime_ns for p in (tmp_path / "artifacts").iterdir()}
    measure_spec_file(spec_path, LatencyOptions(prompts=1, repeats=1, timbl=True))
    assert {p: p.stat().st_mtime_ns for p in (tmp_path / "artifacts").iterdir()} == mtimes
    assert format_table(rows).splitlines()[0].startswith("| strategy")


@pytest.mark.slow
def test_cli_prints_stores_and_writes_csv(spec_path, tmp_path):
    db = f"sqlite:///{tmp_path / 'l.db'}"
    out = tmp_path / "lat.csv"
    res = CliRunner().invoke(
        main,
        ["--db", db, "latency", str(spec_path), "--prompts", "1", "--repeats", "2", "--no-timbl", "--out", str(out)],
    )
    assert res.exit_code == 0, res.output
    assert "olifant-pydoc" in res.output and "timbl" not in res.output
    assert out.read_text().splitlines()[0].startswith("strategy,draft,engine,queries")
    _, Session = open_db(db)
    with Session() as s:
        stored = latency_frame(s, "lat")
    assert set(stored["strategy"]) == {"ngram", "ngram-word", "olifant-pydoc", "neural"}
    assert (stored["queries"] == 2).all() and (stored["prompts"] == 1).all()


def test_bad_counts_are_one_line(spec_path, tmp_path):
    res = CliRunner().invoke(
        main, ["--db", f"sqlite:///{tmp_path / 'x.db'}", "latency", str(spec_path), "--prompts", "0"]
    )
    assert res.exit_code == 2 and "must be >= 1" in res.output


def test_contexts_may_outnumber_the_sweeps_prompts(spec_path):
    from orchestrator.run.latency import prompt_contexts
    from orchestrator.run.spec_paths import load_spec
    from workers.models.tokenizer import load_tokenizer

    spec = load_spec(spec_path)  # its task sweeps 2 prompts; its file holds more usable documents
    tok = load_tokenizer("mistral")
    contexts = prompt_contexts(spec, tok, 5)
    assert len(contexts) == 5 and all(c[0] == tok.bos_token_id for c in contexts)
    assert len(prompt_contexts(spec, tok, 500)) < 500  # a source with fewer documents gives what it has


SCORED = """
[[strategies]]
name = "hybrid-share"
draft = "hybrid"
corpus = "pydoc"
confidence = "share"
[[strategies]]
name = "hybrid-adaptive"
draft = "hybrid"
corpus = "pydoc"
confidence = "share"
adaptive = true
"""


def test_timbl_gap_names_what_needs_native_scores():
    from workers.latency import timbl_gap

    assert timbl_gap({"corpus": "c", "confidence": "depth", "adaptive": False}) is None
    assert timbl_gap({"corpus": "c", "confidence": "share"}) == 'confidence = "share"'
    assert timbl_gap({"corpus": "c", "adaptive": True}) == "adaptive length"
    assert timbl_gap({"corpus": "c", "ibase_min": 0.5}) == "ibase_min = 0.5"


@pytest.mark.slow
def test_scored_hybrids_are_timed_on_the_native_engine_and_the_table_says_so(write_spec, tmp_path):
    """`greenspec latency` on a spec with `confidence = "share"` hybrids crashed in TiMBL's engine."""
    path = write_spec(name="scored")
    text = path.read_text().replace("[sweep]", SCORED + "[sweep]")
    path.write_text(text.replace("[experiment]\n", f'[experiment]\nartifacts = "{tmp_path / "artifacts"}"\n'))
    res = CliRunner().invoke(
        main, ["--db", f"sqlite:///{tmp_path / 'l.db'}", "latency", str(path), "--prompts", "1", "--repeats", "1"]
    )
    assert res.exit_code == 0, res.output
    rows = [ln.split("|")[1:4] for ln in res.stdout.splitlines() if ln.startswith("| ") and "strategy" not in ln]
    engines = {(s.strip(), e.strip()) for s, _, e in rows}
    assert {
        ("olifant-pydoc", "native"),
        ("olifant-pydoc", "timbl"),
        ("hybrid-share", "native"),
        ("hybrid-adaptive", "native"),
    } <= engines
    assert not {("hybrid-share", "timbl"), ("hybrid-adaptive", "timbl")} & engines
    notes = [ln for ln in res.stdout.splitlines() if ln.startswith("note: ")]
    assert len(notes) == 2 and all("native engine only" in n for n in notes)
    assert 'confidence = "share"' in notes[0] and "adaptive length" in notes[1]

"""The findings frame (`greenspec.findings`): every claim and target a grid can answer with its verdict, the ones it
cannot with the reason, the validated model error widening speed margins (and an unvalidated regime's speed verdicts
inconclusive by rule); the same frame from `Results.findings`, `greenspec findings` and the demo's printout."""

from __future__ import annotations

import json
import math

import pandas as pd
import pytest
from sqlalchemy import update

import greenspec
from analysis.stats import BY_CONSTRUCTION, HOLDS, INCONCLUSIVE, NOT_TESTABLE
from greenspec.findings import (
    COLUMNS,
    FUTURE,
    OUTPUT,
    PAPER,
    TREES,
    findings_frame,
    findings_markdown,
    model_errors,
)
from orchestrator.cli.demo import DEMO_SPEC
from storage.db import open_db
from storage.models import Experiment
from tests.analysis.checks.test_claims import row
from tests.dashboard.populate import populate
from tests.orchestrator.conftest import cli
from workers.errors import GreenspecError

OLIFANTS = ("olifant-shakespeare", "olifant-pydoc", "olifant-legal")
TASKS = ("shakespeare", "pydoc", "legal")


def demo_like(regimes=("uncached", "cached"), n=20, measure="replay") -> pd.DataFrame:
    """The demo spec's olifant bases, 4-gram and hybrids on its three tasks: each base accepts 0.4 on its own domain
    and 0.2 elsewhere, speedup 1 + acceptance, over `n` prompts."""
    rows = []
    for task in TASKS:
        for s in (*OLIFANTS, "ngram", f"hybrid-{task}"):
            for regime in regimes:
                acc = 0.4 if s.endswith(task) else 0.2
                figures = {"acceptance": acc, "speedup": 1 + acc, "fta": acc, "prompts": n, "n_prompts": n}
                rows.append(row(s, task, regime, **figures, measure=measure, version="current", exact_match=1.0))
    return pd.DataFrame(rows)


def errors(**regimes) -> pd.DataFrame:
    """`storage.validation.prediction_error`'s band "all" rows: regime=(pairs, median_error, bias)."""
    return pd.DataFrame(
        [{"regime": r, "band": "all", "pairs": p, "median_error": m, "bias": b} for r, (p, m, b) in regimes.items()]
    )


def test_the_grid_answers_the_paper_claims_and_lists_what_it_cannot():
    frame = findings_frame(demo_like(), DEMO_SPEC.read_text(), None, errors(uncached=(12, 0.03, -0.05)))
    assert list(frame.columns) == COLUMNS
    assert list(dict.fromkeys(frame["section"])) == [PAPER, OUTPUT, FUTURE, TREES]
    paper = frame[frame["section"] == PAPER].set_index(["target", "task"])
    assert paper.loc[("domain diagonal: own base accepts most", "pydoc"), "verdict"] == HOLDS
    gain = paper.loc[("olifant-pydoc uncached speedup > 1", "pydoc")]
    assert (gain["verdict"], gain["estimate"], gain["lo"], gain["hi"], gain["prompts"]) == (HOLDS, 1.4, 1.38, 1.42, 20)
    assert gain["family"] == "olifant base uncached speedup > 1" and gain["correction"] == "Holm over 3"
    # the practical 2% only: the validated error is inside the replayed intervals already (analysis.model_error)
    assert "(margin 0.02)" in gain["detail"]
    assert frame.attrs["model_error"]["uncached"] == 0.0
    exact = frame[frame["section"] == OUTPUT].iloc[0]
    assert exact["verdict"] == BY_CONSTRUCTION  # every cell replayed: the output is the reference by construction
    gaps = frame[frame["verdict"] == NOT_TESTABLE]
    assert set(gaps["section"]) == {FUTURE, TREES}  # distilled, adaptive, tree and auto strategies ran no cell
    assert gaps["reason"].str.startswith("no results of ").all()


def test_a_replayed_regime_without_validation_is_inconclusive_by_rule():
    frame = findings_frame(demo_like(), DEMO_SPEC.read_text(), None, errors(uncached=(12, 0.03, 0.01)))
    assert math.isnan(frame.attrs["model_error"]["cached"])
    cached = frame[(frame["regime"] == "cached") & (frame["section"] != OUTPUT)]
    assert len(cached) and (cached["verdict"] == INCONCLUSIVE).all()
    assert (cached["reason"] == "model error unknown in cached").all()
    assert cached["detail"].str.contains("no generation both timed and replayed").all()
    assert not cached["detail"].str.contains("nan").any()
    # timed cells need no model: the same figures measured are judged
    timed = findings_frame(demo_like(measure="timed"), DEMO_SPEC.read_text(), None, None)
    assert timed.attrs["model_error"] == {}
    never = timed[timed["target"] == "hybrid-pydoc never loses to plain"]
    assert never["verdict"].tolist() == [HOLDS]


def test_model_errors_add_no_second_margin_where_validated_and_unknown_where_not():
    """A validated regime's error is inside its replayed intervals (analysis.model_error): no second margin; a regime
    with replayed cells and no pair has an unknown one (NaN: its speed verdicts are inconclusive)."""
    summary = demo_like(regimes=("uncached", "cached", "cached-standard"))
    got = model_errors(
        errors(uncached=(5, 0.04, -0.01), cached=(3, 0.02, 0.06), **{"cached-standard": (0, 0, 0)}), summary
    )
    assert got["uncached"] == 0.0 and got["cached"] == 0.0 and math.isnan(got["cached-standard"])


def test_model_errors_from_band_bounds_are_their_spread():
    """With the validation's band bounds (ln predicted / measured): a regime's error is its bands' max upper bound less
    min lower bound, what two bands erring differently move a paired comparison by; a regime validated but with no
    band bounded (fewer than 3 pairs in each) is unknown."""
    summary = demo_like(regimes=("uncached", "cached"))
    bounds = {("uncached", "plain"): (0.01, 0.03, 4), ("uncached", "k 5+"): (-0.02, 0.05, 6)}
    got = model_errors(errors(uncached=(10, 0.03, 0.01), cached=(2, 0.02, 0.0)), summary, bounds)
    assert got["uncached"] == pytest.approx(0.07) and math.isnan(got["cached"])


def test_claims_the_grid_cannot_answer_say_why():
    one_base = DEMO_SPEC.read_text()
    frame = findings_frame(demo_like(regimes=("cached",)), one_base, None, errors(cached=(9, 0.01, 0.0)))
    gaps = frame[(frame["section"] == PAPER) & (frame["verdict"] == NOT_TESTABLE)].set_index("target")["reason"]
    assert gaps["domain diagonal: own base accepts most"] == "no uncached cells with a draft"
    assert gaps["uncached energy ratio tracks speedup"] == "no uncached cells with a draft"
    few = findings_frame(demo_like(n=4), DEMO_SPEC.read_text(), None, errors(uncached=(9, 0.01, 0.0), cached=(9, 0, 0)))
    verdicts = few[few["section"] == PAPER]
    gain = verdicts[verdicts["target"] == "olifant-pydoc uncached speedup > 1"].iloc[0]
    assert gain["verdict"] == INCONCLUSIVE and gain["reason"].startswith("too few prompts")
    unparsed = findings_frame(demo_like(), "name = 'x'", None, None)
    reasons = unparsed.loc[unparsed["verdict"] == NOT_TESTABLE, "reason"]
    assert len(reasons) >= 4 and reasons.str.startswith("its stored spec does not parse").all()
    assert findings_frame(demo_like().iloc[:0], DEMO_SPEC.read_text())["reason"].eq("no results yet").all()


def test_markdown_names_every_section_and_escapes_pipes():
    frame = findings_frame(demo_like(), DEMO_SPEC.read_text(), None, errors(uncached=(12, 0.03, 0.01)))
    text = findings_markdown(frame)
    assert text.startswith("findings: ") and all(f"\n{s}\n" in text for s in (PAPER, OUTPUT, FUTURE, TREES))
    assert "- not testable here: distilled-pydoc: distilled acceptance > corpus-trained: no results" in text
    assert "families corrected for multiplicity:" in text


@pytest.fixture
def fixture_db(tmp_path) -> str:
    url = f"sqlite:///{tmp_path / 'g.db'}"
    populate(url)
    return url


def test_results_cli_and_formats_read_one_frame(fixture_db, tmp_path):
    frame = greenspec.open_results(fixture_db).findings("fixture")
    assert frame.attrs["experiment"] == "fixture"
    assert frame["reason"].str.startswith("its stored spec does not parse").any()  # the fixture's spec is no spec
    code, out, err = cli("--db", fixture_db, "findings")
    assert code == 0, err
    assert out.startswith("findings of fixture: ") and "exact match 1.0" in out
    code, out, err = cli("--db", fixture_db, "findings", "--format", "json", "-e", "fixture")
    doc = json.loads(out)
    assert code == 0 and doc["experiment"] == "fixture" and len(doc["findings"]) == len(frame)
    target = tmp_path / "f.csv"
    code, _, err = cli("--db", fixture_db, "findings", "--out", str(target))
    assert code == 0 and "written to" in err
    assert pd.read_csv(target)["verdict"].tolist() == frame["verdict"].tolist()
    code, _, err = cli("--db", fixture_db, "findings", "--out", str(target))
    assert code == 2 and "--force" in err
    code, _, err = cli("--db", fixture_db, "findings", "-e", "nope")
    assert code == 2 and "no experiment 'nope'" in err and "known: fixture" in err
    with pytest.raises(GreenspecError, match="no experiment 'nope' \\(known: fixture\\)"):
        greenspec.open_results(fixture_db).findings("nope")


def test_a_stored_demo_spec_gives_the_roles(fixture_db):
    """The spec is parsed from the database, as the demo's own: its olifant bases are named there."""
    engine, Session = open_db(fixture_db, migrate=False)
    with Session() as s:
        s.execute(update(Experiment).values(spec_toml=DEMO_SPEC.read_text()))
        s.commit()
    engine.dispose()
    frame = greenspec.open_results(fixture_db).findings()
    reasons = frame.loc[frame["verdict"] == NOT_TESTABLE, "reason"]
    assert not reasons.str.contains("does not parse").any()
    assert "no results of distilled-pydoc (or of what it is compared with)" in set(reasons)


def test_the_demo_ends_with_the_next_commands_and_their_db():
    from orchestrator.cli.demo import next_commands

    text = next_commands("postgresql://me:pw@db/runs", "my run")
    assert text.splitlines() == [
        "Next:",
        "  greenspec --db 'postgresql://me:***@db/runs' findings --experiment 'my run'",
        "  greenspec --db 'postgresql://me:***@db/runs' report --experiment 'my run' --out 'my run.html'",
        "  greenspec --db 'postgresql://me:***@db/runs' dashboard",
    ]

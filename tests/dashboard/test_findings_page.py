"""The Findings page: the verdicts `greenspec findings` prints, per section, with what the grid cannot answer."""

from __future__ import annotations

from pathlib import Path

from streamlit.testing.v1 import AppTest

APP = str(Path(__file__).resolve().parents[2] / "dashboard" / "app.py")


def test_findings_page_shows_the_verdicts_and_the_gaps(monkeypatch, fixture_db):
    monkeypatch.setenv("GREENSPEC_DB", fixture_db)
    at = AppTest.from_file(APP, default_timeout=90)
    at.switch_page("views/findings.py")
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    assert at.title[0].value == "Findings"
    metrics = {m.label: m.value for m in at.metric}
    assert metrics == {"holds": "0", "does not hold": "1", "tie": "0", "inconclusive": "2", "not testable here": "5"}
    assert [h.value for h in at.subheader][:2] == ["Paper's claims", "Output check"]
    claims = at.dataframe[0].value
    assert set(claims["target"]) == {
        "cached break-even near 20-25% first-token acceptance",
        "uncached energy ratio tracks speedup",
    }
    assert "greenspec findings --experiment fixture" in "\n".join(c.value for c in at.caption)
    gaps = "\n".join(m.value for m in at.markdown)
    assert "domain diagonal: own base accepts most: its stored spec does not parse" in gaps

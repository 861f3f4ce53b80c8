"""The report reads top-down, checked in headless Chromium at 1280 x 800: the findings and a figure's legend in the
first screen (also with a long findings table, which scrolls within its box), and no table wider than the page, with
every collapsed table opened too."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from dataclasses import replace
from pathlib import Path

import pandas as pd
import pytest

import greenspec
from greenspec.report import render
from tests.dashboard.populate import EXPERIMENT, populate

WIDTH, HEIGHT = 1280, 800
PROBE = """<script>
window.addEventListener('load', () => setTimeout(() => {
  const box = s => { const e = document.querySelector(s); if (!e) return null;
    const b = e.getBoundingClientRect(); return {top: b.top, bottom: b.bottom, right: b.right}; };
  const first = {findings: box('#findings'), table: box('#findings-table'), legend: box('#fig-acceptance .legend'),
    width: document.documentElement.scrollWidth, inner: window.innerWidth};
  document.querySelectorAll('details').forEach(d => d.open = true);
  first.opened = document.documentElement.scrollWidth;
  document.body.setAttribute('data-probe', JSON.stringify(first));
}, 300));
</script>"""


@pytest.fixture(scope="module")
def results(tmp_path_factory):
    url = f"sqlite:///{tmp_path_factory.mktemp('report') / 'g.db'}"
    populate(url)
    return greenspec.open_results(url)


def probe(html: str, tmp_path: Path) -> dict:
    """Where the first screen's parts lie once Chromium has drawn the page (and how wide it gets)."""
    chromium = shutil.which("chromium")
    if chromium is None:  # under CI=true, tests/conftest.py fails the run instead
        pytest.skip("chromium is not installed (make browser installs Debian's chromium)")
    page = tmp_path / "probe.html"
    page.write_text(html.replace("</body>", PROBE + "</body>"), encoding="utf-8")
    cmd = [chromium, "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking"]
    cmd += [f"--user-data-dir={tmp_path / 'chrome'}", f"--window-size={WIDTH},{HEIGHT}"]
    cmd += ["--virtual-time-budget=10000", "--dump-dom", page.as_uri()]
    dom = subprocess.run(cmd, capture_output=True, text=True, timeout=180).stdout
    found = re.search(r"data-probe=\"([^\"]+)\"", dom)
    assert found, dom[-2000:]
    return json.loads(found.group(1).replace("&quot;", '"'))


def first_screen_ok(at: dict) -> None:
    assert at["findings"] and at["legend"] and at["table"], at
    assert 0 <= at["findings"]["top"] < at["table"]["top"] < HEIGHT  # the findings and their first rows
    assert at["table"]["top"] < at["legend"]["top"] and at["legend"]["bottom"] <= HEIGHT  # then a figure's legend
    assert at["width"] <= at["inner"] and at["opened"] <= at["inner"]  # never wider than the page


def test_the_first_screen_shows_the_findings_and_a_legend(results, tmp_path):
    path = results.report(EXPERIMENT, tmp_path / "r.html")
    page = path.read_text()
    assert page.index('id="findings"') < page.index('id="figures"') < page.index('id="tables"')
    assert "<script src" not in re.sub(r"<script[^>]*>.*?</script>", "", page, flags=re.S)
    first_screen_ok(probe(page, tmp_path))


def test_a_long_findings_table_scrolls_within_the_first_screen(results, tmp_path):
    data = results.report_data(EXPERIMENT)
    found = results.findings(EXPERIMENT)
    long = pd.concat([found] * 40, ignore_index=True)  # 320 rows
    long.attrs = found.attrs
    first_screen_ok(probe(render(replace(data, findings=long)), tmp_path))


def test_figures_are_coloured_by_family_with_a_legend_and_the_validation_is_one(results):
    data = results.report_data(EXPERIMENT)
    errors = pd.DataFrame(
        [
            {
                "regime": r,
                "band": "all",
                "pairs": 9,
                "median_error": 0.03,
                "p90_error": 0.08,
                "bias": -0.02,
                "drift": 0.005,
                "noise": 0.01,
                "table_error": 0.028,
            }
            for r in ("cached", "uncached")
        ]
    )
    page = render(replace(data, prediction_error=errors, findings=results.findings(EXPERIMENT)))
    assert page.count("Plotly.newPlot") == 3 and 'id="fig-validation"' in page
    for family in ("ngram", "olifant"):  # one legend entry per family, not per cell
        assert page.count(f'"legendgroup":"{family}"') >= 2 and f'"name":"{family}"' in page
    assert '"showlegend":true' in page and '"text":"family"' in page
    assert page.count("<details>") >= 5  # the long tables collapsed
    toc = re.search(r"<nav>(.*?)</nav>", page).group(1)
    assert all(f'href="#{a}"' in toc for a in ("findings", "figures", "paper-tables", "cost-model", "failures", "spec"))
    assert all(f'id="{a}"' in page for a in re.findall(r'href="#([^"]+)"', toc))


def test_notes_and_tags_head_the_report(results):
    data = results.report_data(EXPERIMENT)
    spec = '[experiment]\nname = "fixture"\nnotes = "first run on <the> H200"\ntags = ["gpu", "baseline"]\n'
    page = render(replace(data, info={**data.info, "spec_toml": spec}))
    head = page[: page.index('id="findings"') if 'id="findings"' in page else page.index('id="figures"')]
    assert '<span class="tag">gpu</span><span class="tag">baseline</span>' in head
    assert '<p class="notes">first run on &lt;the&gt; H200</p>' in head
    assert '<p class="notes">' not in render(data)  # the fixture's spec has none

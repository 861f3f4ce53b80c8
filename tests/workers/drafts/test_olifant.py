"""The olifant draft: chained IGTree predictions from a trained instance base."""

from __future__ import annotations

import numpy as np
import pytest

from workers.drafts import make_draft
from workers.igtree import IGTree

pytestmark = pytest.mark.usefixtures("one_thread")


TEXT = (
    "Now is the winter of our discontent made glorious summer by this sun of York; and all the clouds "
    "that lour'd upon our house in the deep bosom of the ocean buried."
)


@pytest.fixture(scope="module")
def tree():
    """An IGTree fitted on a small token stream with a repeating pattern."""
    rng = np.random.default_rng(1)
    stream = np.concatenate([np.tile([10, 11, 12, 13, 14, 15], 20), rng.integers(20, 40, size=200)])
    windows = np.lib.stride_tricks.sliding_window_view(stream, 5)
    return IGTree.fit(windows[:, :4], windows[:, 4])


def test_olifant_chains_k_predictions(tree):
    draft = make_draft("olifant", ibase=tree)
    assert draft.window == 4
    assert draft.propose([3, 10, 11, 12, 13], 5) == [14, 15, 10, 11, 12]
    context = [25, 31, 22, 38, 27]
    got = draft.propose(context, 3)
    tail = context[-4:]
    for token in got:
        assert token == tree.predict(tail)
        tail = tail[1:] + [token]


def test_olifant_short_context_and_path(tree, tmp_path):
    path = tmp_path / "t.igtree"
    tree.save(path)
    from_path = make_draft("olifant", ibase=str(path))
    assert from_path.propose([12, 13], 2) == make_draft("olifant", ibase=tree).propose([12, 13], 2)
    assert len(from_path.propose([12], 3)) == 3


# neural ------------------------------------------------------------------------------------------------


def test_olifant_loads_either_backend_from_a_trained_path(tmp_path):
    """A trainer-written TiMBL *.ibase and a native *.igtree draft the same tokens (regression: .ibase paths)."""
    from pydoc_data.topics import topics

    from workers.corpora import TextSource
    from workers.models.tokenizer import load_tokenizer
    from workers.training.ibase import IBaseRequest, train_instance_base

    corpus = tmp_path / "c.txt"
    corpus.write_text("\n\n".join(topics[k] for k in sorted(topics)[:6]))
    src = TextSource(name="c", path=str(corpus))
    native = train_instance_base(IBaseRequest(src, "mistral", tmp_path, backend="native"))
    timbl = train_instance_base(IBaseRequest(src, "mistral", tmp_path, backend="timbl"))
    assert timbl.path.endswith(".ibase") and native.path.endswith(".igtree")
    a, b = make_draft("olifant", ibase=native.path), make_draft("olifant", ibase=timbl.path)
    tok = load_tokenizer("mistral")
    ids = tok(topics[sorted(topics)[2]][:400]).input_ids
    for end in range(1, len(ids), 7):
        assert a.propose(ids[:end], 4) == b.propose(ids[:end], 4)

"""The hybrid draft: session continuation when its match is long enough, the instance base otherwise."""

from __future__ import annotations

import numpy as np
import pytest

from workers.drafts import build_draft, lookup, make_draft
from workers.drafts.adaptive import AdaptiveLength
from workers.drafts.hybrid import choose, session_match
from workers.drafts.ngram import NgramTable
from workers.errors import DraftError
from workers.igtree import IGTree


@pytest.fixture(scope="module")
def tree():
    rng = np.random.default_rng(1)
    stream = np.concatenate([np.tile([10, 11, 12, 13, 14, 15], 20), rng.integers(20, 40, size=300)])
    windows = np.lib.stride_tricks.sliding_window_view(stream, 5)
    return IGTree.fit(windows[:, :4], windows[:, 4])


def test_choose_prefers_a_long_enough_session_match():
    assert choose((7, 3), lambda: (9, 1.0), min_match=2, n=4) == (7, 1.0, "session")
    assert choose((7, 2), lambda: (9, 1.0), min_match=2, n=4) == (7, 2 / 3, "session")
    assert choose((7, 1), lambda: (9, 0.5), min_match=2, n=4) == (9, 0.5, "ibase")
    assert choose((None, 0), lambda: (9, 0.0), min_match=1, n=4) == (9, 0.0, "ibase")


def test_choose_takes_only_confident_ibase_guesses_when_ibase_min_is_set():
    # an unsure guess (0.4 < 0.5) yields to the session's short match, and with no match at all drafting stops
    assert choose((7, 1), lambda: (9, 0.4), min_match=2, n=4, ibase_min=0.5) == (7, 1 / 3, "session")
    assert choose((None, 0), lambda: (9, 0.4), min_match=2, n=4, ibase_min=0.5) is None
    assert choose((7, 1), lambda: (9, 0.5), min_match=2, n=4, ibase_min=0.5) == (9, 0.5, "ibase")
    assert choose((7, 2), lambda: (9, 0.9), min_match=2, n=4, ibase_min=0.5) == (7, 2 / 3, "session")


def test_session_match_is_the_longest_seen_suffix():
    table = NgramTable(4)
    for t in [1, 2, 3, 4, 2, 3, 5, 2, 3]:
        table.add(t)
    assert session_match(table, [9, 2, 3]) == (4, 2) or session_match(table, [9, 2, 3]) == (5, 2)
    assert session_match(table, [4, 2, 3]) == (5, 3)
    assert session_match(table, [7, 7, 7]) == (None, 0)


def test_hybrid_follows_the_session_where_the_text_repeats(tree):
    draft = make_draft("hybrid", ibase=tree, n=4, min_match=2)
    ctx = [30, 31, 32, 33, 30, 31]  # the session saw 30 31 -> 32 -> 33; the tree never did
    assert draft.propose(ctx, 3) == [32, 33, 30]
    assert draft.sources == ["session", "session", "session"]
    olifant = make_draft("olifant", ibase=tree)
    fresh = [10, 11, 12, 13]  # nothing repeats: the instance base drafts every token
    draft.reset()
    assert draft.propose(fresh, 4) == olifant.propose(fresh, 4)
    assert draft.sources == ["ibase"] * 4


def test_min_match_decides_between_the_components(tree):
    ctx = [10, 11, 12, 13, 30, 13]  # session: 13 -> 30 (match 1); tree: 13 -> 14 at depth
    short = make_draft("hybrid", ibase=tree, n=4, min_match=1)
    long = make_draft("hybrid", ibase=tree, n=4, min_match=3)
    assert short.propose(ctx, 1) == [30] and short.sources == ["session"]
    assert long.propose(ctx, 1) == [int(tree.predict(ctx[-4:]))] and long.sources == ["ibase"]


def test_ibase_min_stops_where_neither_component_is_sure(tree):
    # 50 51 52 53 was never seen by the session (no match of its last token) and never by the tree (fallback
    # guess, majority share of the whole base, far below 0.9): the draft is empty; without ibase_min it guesses
    ctx = [50, 51, 52, 53]
    sure = make_draft("hybrid", ibase=tree, confidence="share", ibase_min=0.9)
    assert sure.propose(ctx, 3) == [] and sure.sources == []
    assert len(make_draft("hybrid", ibase=tree).propose(ctx, 3)) == 3
    # the repeated pattern's guesses are unanimous in the tree (share 1.0) and drafted by it past the session
    rep = [10, 11, 12, 13]
    assert sure.propose(rep, 2) == [14, 15] and sure.sources == ["ibase", "ibase"]


def test_hybrid_with_ibase_min_drafts_what_ngram_drafts_where_the_ibase_is_unsure(tree):
    # with no instance-base guess sure enough, the hybrid is exactly the session n-gram of the same order
    rng = np.random.default_rng(3)
    ngram = make_draft("ngram", n=4)
    hybrid = make_draft("hybrid", ibase=tree, n=4, min_match=3, confidence="share", ibase_min=1.0)
    for _ in range(20):
        ctx = [int(t) for t in rng.integers(50, 56, size=30)]  # tokens the tree never saw: fallback shares < 1
        assert hybrid.propose(ctx, 5) == ngram.propose(ctx, 5)


def test_hybrid_adaptive_cuts_by_confidence(tree):
    gate = AdaptiveLength(threshold=0.6)
    draft = make_draft("hybrid", ibase=tree, n=4, min_match=2, gate=gate)
    ctx = [30, 31, 32, 33, 30, 31]
    scored = make_draft("hybrid", ibase=tree, n=4, min_match=2).scored(ctx, 4)
    assert draft.propose(ctx, 4) == [t for t, c in scored[: next((i for i, (_, c) in enumerate(scored) if c < 0.6), 4)]]


def test_hybrid_options_and_errors(tree, tmp_path):
    entry = lookup("hybrid")
    opts = entry.parse({"corpus": "c", "min_match": 3})
    assert opts.identity() == {"n": 4, "min_match": 3}
    gated = entry.parse({"corpus": "c", "ibase_min": 0.5, "confidence": "share"}).identity()
    assert gated == {"n": 4, "min_match": 2, "ibase_min": 0.5, "confidence": "share"}
    with pytest.raises(DraftError, match="ibase_min"):
        make_draft("hybrid", ibase=tree, ibase_min=1.5)
    assert {r.artifact for r in opts.requires().values()} == {"ibase"}
    with pytest.raises(DraftError, match="min_match"):
        make_draft("hybrid", ibase=tree, n=3, min_match=3)
    path = tmp_path / "t.igtree"
    tree.save(path)
    from workers.drafts import BuildContext

    d = build_draft(
        "hybrid", {"corpus": "c", "adaptive": True, "online": True}, BuildContext(artifacts={"ibase": str(path)})
    )
    assert d.gate.online and d.propose([10, 11, 12, 13], 0) == []

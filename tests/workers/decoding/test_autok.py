"""k = "auto": the lengths follow the round-cost curve; without an experiment's table the verifier's is measured once per
process (no file beside it); output stays greedy."""

from __future__ import annotations

import numpy as np
import pytest

from tests.tiny_models import tiny_lm
from workers.decoding import REGIMES, autok, greedy_reference, speculative_generate
from workers.decoding.autok import (
    AutoLength,
    PassCosts,
    best_length,
    clear_curves,
    decoding_plan,
    tree_accepted,
)
from workers.decoding.costmodel import RoundCosts
from workers.decoding.tokentree import TokenTree
from workers.drafts import make_draft
from workers.igtree import IGTree
from workers.verifier import Verifier

pytestmark = pytest.mark.usefixtures("one_thread")

VOCAB, N_NEW = 500, 20
FLAT = PassCosts("v", "cpu", "uncached", 40, (1.0,) * 9)  # every length costs the same: draft the most
STEEP = PassCosts("v", "cpu", "cached", 40, tuple(1.0 + n for n in range(9)))  # each token costs a full pass


@pytest.fixture(scope="module")
def setup():
    verifier = Verifier(tiny_lm("llama", 0, vocab=VOCAB, echo=0.3))
    prompt = list(range(3, 40))
    ref = greedy_reference(verifier, prompt, N_NEW)
    other = list(range(60, 90))
    stream = np.array(prompt + ref + other + greedy_reference(verifier, other, N_NEW), dtype=np.int64)
    windows = np.lib.stride_tricks.sliding_window_view(stream, 5)
    return verifier, prompt, ref, IGTree.fit(windows[:, :4], windows[:, 4])


def test_best_length_follows_the_cost_curve():
    sure = [0.9] * 8
    assert best_length(sure, FLAT) == 8
    assert best_length(sure, STEEP) == 0  # 1.9 tokens for twice the cost of one: not worth it
    assert best_length([0.0] * 8, FLAT) == 0
    assert FLAT.break_even(4) == pytest.approx(0.0, abs=1e-6) and STEEP.break_even(1) == pytest.approx(1.0, abs=1e-6)
    assert STEEP.cost(12) == pytest.approx(13.0)  # extrapolated along the measured slope


@pytest.mark.parametrize("regime", list(REGIMES))
@pytest.mark.parametrize("trees", [False, True])
def test_auto_output_equals_greedy(setup, regime, trees):
    verifier, prompt, ref, ibase = setup
    cached, fastpath = REGIMES[regime]
    for costs, longest in ((FLAT, True), (STEEP, False)):
        auto = AutoLength(make_draft("olifant", ibase=ibase), costs)
        res = speculative_generate(verifier, auto, prompt, N_NEW, 8, cached, fastpath=fastpath, trees=trees)
        assert list(res.tokens) == ref
        assert (max(auto.chosen) >= 6) if longest else (max(auto.chosen) == 0), auto.chosen


def test_a_plan_reads_the_experiments_table_at_the_prompts_length(setup):
    """The table (or its JSON, as a job carries it) gives the regime's curve at this prompt's length; a tree strategy
    reads its tree rows."""
    verifier, prompt, _, ibase = setup
    rows = {"cached/chain/0": ((10, 1.0), (100, 2.0)), "cached/chain/4": ((10, 3.0), (100, 6.0))}
    rows |= {"cached/tree/4": ((10, 6.0), (100, 12.0))}
    table = RoundCosts("v", "cpu", rows)
    draft = make_draft("olifant", ibase=ibase)
    auto, plan = decoding_plan(None, draft, {"auto": True}, "cached", prompt, 4, table.to_json())
    assert plan == {"trees": False} and auto.costs == table.curve("cached", len(prompt), 8)
    tree, plan = decoding_plan(None, draft, {"auto": True, "tree": 4}, "cached", prompt, 4, table)
    assert plan == {"trees": True} and tree.costs.seconds[4] == pytest.approx(2 * auto.costs.seconds[4])
    with pytest.raises(ValueError, match="needs its round-cost table"):
        decoding_plan(None, draft, {"auto": True}, "cached", prompt, 4)


def test_plan_from_options(setup):
    verifier, prompt, _, ibase = setup
    draft = make_draft("olifant", ibase=ibase)
    assert decoding_plan(verifier, draft, {"tree": 4}, "uncached", prompt, 4) == (draft, {"trees": True})
    assert decoding_plan(verifier, draft, {}, "uncached", prompt, 5) == (draft, {"trees": False})


def test_a_measured_table_is_kept_until_cleared(setup, monkeypatch):
    """k = "auto" without the experiment's table measures the verifier's once per process and regime (in memory, no
    file); `clear_curves` forgets it, so the next plan measures again (a reloaded verifier never runs on a stale
    table)."""
    verifier, prompt, _, ibase = setup
    measured = []
    real = autok.measure_round_costs

    def measure(verifier, context, max_n, tree_sizes, regimes, **kw):
        measured.append(regimes)
        return real(verifier, context, max_n, tree_sizes, regimes, repeats=1)

    monkeypatch.setattr(autok, "measure_round_costs", measure)
    clear_curves()
    draft = make_draft("olifant", ibase=ibase)
    first, _ = decoding_plan(verifier, draft, {"auto": True}, "cached", prompt, 4)
    again, _ = decoding_plan(verifier, draft, {"auto": True}, "cached", prompt, 4)
    assert measured == [("cached",)] and again.costs == first.costs and verifier.cache is None
    assert len(first.costs.seconds) == 9 and all(s > 0 for s in first.costs.seconds)
    clear_curves()
    decoding_plan(verifier, draft, {"auto": True}, "cached", prompt, 4)
    assert measured == [("cached",), ("cached",)]
    clear_curves()


def test_tree_accepted_reads_the_path_off_the_new_tokens():
    tree = TokenTree((5, 9, 6, 7), (-1, -1, 0, 2))
    assert tree_accepted(tree, [5, 6, 8]) == 2 and tree_accepted(tree, [9, 1]) == 1 and tree_accepted(tree, [4]) == 0

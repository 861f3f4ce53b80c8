"""Replay equals the real run round for round: every draft x regime x k in {1, 3, 8}, chains and token trees,
adaptive length and k = "auto", on tiny Llama and Mistral verifiers; and what replay refuses, in one line."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from tests.tiny_models import noisy_copy, tiny_lm
from tests.workers.decoding.replay_checks import assert_same_rounds, assert_stated_shapes
from tests.workers.decoding.tree_drafts import SHAPES, ShapedTreeDraft
from workers.decoding import REGIMES, DecodeOptions, greedy_reference, speculative_generate
from workers.decoding.adaptive import AdaptiveLength
from workers.decoding.autok import AutoLength
from workers.decoding.costcurve import PassCosts
from workers.decoding.sampling import Warp
from workers.drafts import make_draft
from workers.igtree import IGTree
from workers.replay.rounds import rounds_differ
from workers.replay.verifier import ReferenceVerifier, ReplayError, ReplayMismatch, replay_generate
from workers.training.datastore import save_datastore
from workers.verifier import Verifier

pytestmark = pytest.mark.usefixtures("one_thread")

VOCAB, N_NEW, KS = 500, 16, (1, 3, 8)
EOS = 225  # both tiny verifiers emit it after the first prompt: that generation stops early, at EOS
COSTS = PassCosts("tiny", "cpu", "any", 40, (0.010, 0.011, 0.013, 0.016, 0.020, 0.025, 0.031, 0.038, 0.046))


def family_setup(family: str, folder):
    """A verifier, three prompts with their greedy references (EOS-stopped where the verifier emits it), and every
    draft kind over what the verifier says, so drafts are right sometimes and wrong sometimes."""
    verifier = Verifier(tiny_lm(family, 0, vocab=VOCAB, echo=0.3))
    prompts = [list(range(3, 40)), list(range(100, 130)) * 2, [11, 12, 13, 14] * 6]
    refs = [greedy_reference(verifier, p, N_NEW, eos_id=EOS) for p in prompts]
    other = list(range(60, 90))
    stream = np.array(
        [t for p, r in zip(prompts, refs) for t in p + r[: N_NEW // 2]] + other + greedy_reference(verifier, other, 30),
        dtype=np.int64,
    )
    windows = np.lib.stride_tricks.sliding_window_view(stream, 5)
    tree = IGTree.fit(windows[:, :4], windows[:, 4])
    path = folder / "corpus.rest.npy"
    save_datastore(stream, path)
    draft_model = noisy_copy(verifier.model, noise=0.01)
    drafts = {
        "plain": lambda: make_draft("plain"),
        "ngram": lambda: make_draft("ngram", n=4),
        "lookup": lambda: make_draft("lookup", max_ngram=3),
        "suffix": lambda: make_draft("suffix"),
        "rest": lambda: make_draft("rest", datastore=str(path)),
        "olifant": lambda: make_draft("olifant", ibase=tree),
        "olifant-adaptive": lambda: make_draft("olifant", ibase=tree, gate=AdaptiveLength(0.3, online=True)),
        "hybrid": lambda: make_draft("hybrid", ibase=tree, n=4),
        "neural": lambda: make_draft("neural", model=draft_model),
        "olifant-auto": lambda: AutoLength(make_draft("olifant", ibase=tree), COSTS),
    }
    return verifier, prompts, refs, drafts, family


@pytest.fixture(scope="module")
def families(tmp_path_factory):
    """Each verifier family's setup, built once when a test first asks for it."""
    built: dict[str, tuple] = {}

    def get(family: str) -> tuple:
        if family not in built:
            built[family] = family_setup(family, tmp_path_factory.mktemp(family))
        return built[family]

    return get


@pytest.fixture(params=["llama", "mistral"])
def setup(request, families):
    return families(request.param)


def matrix(ks_on_mistral: tuple[int, ...], names, regimes=tuple(REGIMES)):
    """(family, name, k, regime): every k on Llama; on Mistral (a sliding-window cache: the same rounds over another
    cache) the given ks only."""
    return [
        (family, name, k, regime)
        for family in ("llama", "mistral")
        for name in names
        for k in ((0,) if name == "plain" else KS if family == "llama" else ks_on_mistral)
        for regime in regimes
    ]


def both(verifier, draft_factory, prompt, ref, k, regime, trees=False):
    """The real run and the replay of one generation, each with a fresh draft."""
    cached, fastpath = REGIMES[regime]
    real = speculative_generate(
        verifier, draft_factory(), prompt, N_NEW, k, cached, eos_id=EOS, fastpath=fastpath, trees=trees
    )
    options = DecodeOptions(regime, k, N_NEW, eos_id=EOS, trees=trees)
    return real, replay_generate(draft_factory(), prompt, ref, verifier.vocab_size, options)


DRAFTS = (
    "plain",
    "ngram",
    "lookup",
    "suffix",
    "rest",
    "olifant",
    "olifant-adaptive",
    "hybrid",
    "neural",
    "olifant-auto",
)


@pytest.mark.parametrize("family,name,k,regime", matrix((3,), DRAFTS))
def test_replay_equals_the_real_run(families, family, name, k, regime):
    verifier, prompts, refs, drafts, _ = families(family)
    for prompt, ref in zip(prompts, refs):
        real, replayed = both(verifier, drafts[name], prompt, ref, k, regime)
        assert list(real.tokens) == ref  # the real run is greedy (the premise of replay)
        assert_same_rounds(real, replayed, (name, k, regime))
        assert_stated_shapes(real, regime, len(prompt))


@pytest.mark.parametrize("family,name,k,regime", matrix((8,), ["olifant", "hybrid", "olifant-auto", "ngram"]))
def test_replayed_token_trees_equal_the_real_run(families, family, name, k, regime):
    verifier, prompts, refs, drafts, _ = families(family)
    for prompt, ref in zip(prompts, refs):
        real, replayed = both(verifier, drafts[name], prompt, ref, k, regime, trees=True)
        assert_same_rounds(real, replayed, (name, k, regime))
        assert_stated_shapes(real, regime, len(prompt), trees=True)


@pytest.mark.parametrize("regime", list(REGIMES))
@pytest.mark.parametrize("shape", SHAPES)
def test_replayed_tree_shapes_equal_the_real_run(setup, shape, regime):
    """Trees with right and wrong branches at every level: replay walks them as the verifier does."""
    verifier, prompts, refs, _, _ = setup
    prompt, ref = prompts[0], refs[0]
    real, replayed = both(verifier, lambda: ShapedTreeDraft(prompt + ref, shape, VOCAB), prompt, ref, 8, regime, True)
    assert_same_rounds(real, replayed, (shape, regime))
    assert_stated_shapes(real, regime, len(prompt), trees=True)


def test_the_matrix_is_not_vacuous(setup):
    """Drafts are accepted and rejected, some references stop at EOS, the fast path rejects: the equality above
    covers every branch of the rounds."""
    verifier, prompts, refs, drafts, family = setup
    assert any(r[-1] == EOS and len(r) < N_NEW for r in refs), family
    runs = [
        both(verifier, drafts[n], p, r, 3, "cached")[1]
        for n in ("olifant", "ngram", "neural")
        for p, r in zip(prompts, refs)
    ]
    assert sum(r.accepted for r in runs) > 0 and sum(r.drafted - r.accepted for r in runs) > 0
    assert sum(r.fastpath_rejects for r in runs) > 0


def test_off_the_path_nothing_is_accepted():
    """The stand-in's greedy token leaves the reference at the first wrong token and answers an id no draft has."""
    v = ReferenceVerifier([1, 2, 3, 4, 5], vocab_size=10)
    assert v.logits([1, 2, 3]).argmax(-1).tolist() == [2, 3, 4]
    assert v.logits([1, 9, 3]).argmax(-1).tolist() == [2, 10, 10]  # after the wrong 9: off the path
    assert v.logits([1, 2, 3, 4, 5]).argmax(-1).tolist()[-1] == 10  # past the reference's end
    v.prefill([1, 2])
    assert v.extend([3, 8], keep=2).argmax(-1).tolist() == [4, 10]
    v.crop(3)
    assert v.cached_len == 3 and v.extend([4]).argmax(-1).tolist() == [5]
    assert v.last_shape == (1, 3, 1)


def test_sampled_and_stateful_generations_are_refused(setup):
    verifier, prompts, refs, _, _ = setup
    greedy = DecodeOptions("cached", 3, N_NEW, eos_id=EOS)
    sampled = DecodeOptions("cached", 3, N_NEW, eos_id=EOS, warp=Warp(0.8))
    with pytest.raises(ReplayError, match="greedy only: temperature 0.8"):
        replay_generate(make_draft("ngram"), prompts[0], refs[0], VOCAB, sampled)
    with pytest.raises(ReplayError, match="keeps state across generations"):
        replay_generate(make_draft("suffix", remember_outputs=True), prompts[0], refs[0], VOCAB, greedy)


def test_a_reference_the_rounds_cannot_reproduce_is_named():
    """A reference too short for max_new_tokens (stored by another version) is a mismatch, not a silent replay."""
    with pytest.raises(ReplayMismatch, match="left its reference at token 3"):
        replay_generate(make_draft("ngram"), [1, 2, 3], [4, 5, 6], 50, DecodeOptions("uncached", 3, 6))


def test_diverging_passes_name_the_round(setup):
    verifier, prompts, refs, drafts, _ = setup
    real, replayed = both(verifier, drafts["olifant"], prompts[0], refs[0], 3, "uncached")
    assert rounds_differ(real, replayed) is None
    torch.manual_seed(1)
    other = Verifier(tiny_lm("llama", 3, vocab=VOCAB, echo=0.3))  # another verifier: its rounds leave the reference
    cached, fastpath = REGIMES["uncached"]
    wrong = speculative_generate(other, drafts["olifant"](), prompts[0], N_NEW, 3, cached, eos_id=EOS)
    assert "diverge at round" in rounds_differ(wrong, replayed)

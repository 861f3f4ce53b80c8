"""Speculative decoding equals transformers' greedy `generate` for every draft, k and regime; counts add up.

At temperature > 0: reproducible per seed, top_k=1 is greedy again, counts add up in every regime (the output
distribution itself is tested statistically in test_sampling.py).
"""

from __future__ import annotations

import numpy as np
import pytest

from tests.tiny_models import VOCAB, noisy_copy, tiny_lm
from tests.workers.conftest import bpe_tokenizer
from workers.decoding import (
    REGIMES,
    DecodeOptions,
    GenerationResult,
    accept_length,
    greedy_reference,
    speculative_generate,
    warmup,
)
from workers.drafts import make_draft
from workers.igtree import IGTree
from workers.interfaces import Draft
from workers.verifier import Verifier

pytestmark = pytest.mark.usefixtures("one_thread")


N_NEW = 20
SEEDS = {"llama": 0, "mistral": 5}  # different weights per family (same seed gives the same numbers)
KS = (1, 3, 5, 8)
PROMPTS = (
    "To be, or not to be, that is the question: whether 'tis nobler in the mind",
    "The quick brown fox jumps over the lazy dog, and the dog",
)
SAMPLE_TEXT = (
    "Now is the winter of our discontent made glorious summer by this sun of York; and all the clouds "
    "that lour'd upon our house in the deep bosom of the ocean buried. Now are our brows bound with "
    "victorious wreaths; our bruised arms hung up for monuments; our stern alarums changed to merry meetings."
)


@pytest.fixture(scope="module")
def bridge_tok():
    return bpe_tokenizer([SAMPLE_TEXT, *PROMPTS])


@pytest.fixture(scope="module", params=["llama", "mistral"])
def setup(request, mistral_tok, bridge_tok):
    """A verifier, its prompts, their greedy references and one of every draft."""
    model = tiny_lm(request.param, seed=SEEDS[request.param], echo=0.3)
    verifier = Verifier(model)
    prompts = [mistral_tok(p).input_ids for p in PROMPTS]
    refs = [greedy_reference(verifier, p, N_NEW) for p in prompts]
    # the IGTree learns the verifier's own continuations, so it is often right
    stream = [t for p, r in zip(prompts, refs) for t in p + r]
    windows = np.lib.stride_tricks.sliding_window_view(np.array(stream), 5)
    tree = IGTree.fit(windows[:, :4], windows[:, 4])
    bridged_model = tiny_lm(request.param, seed=2, vocab=len(bridge_tok), hidden=32, layers=1)
    drafts = {
        "plain": make_draft("plain"),
        "ngram": make_draft("ngram", n=4),
        "ngram_word": make_draft("ngram", n=3, unit="word", tokenizer=mistral_tok),
        "olifant": make_draft("olifant", ibase=tree),
        "neural": make_draft("neural", model=noisy_copy(model)),
        "neural_self": make_draft("neural", model=model),
        "neural_bridged": make_draft(
            "neural", model=bridged_model, tokenizer=bridge_tok, verifier_tokenizer=mistral_tok
        ),
    }
    return verifier, prompts, refs, drafts


def assert_counts_add_up(res: GenerationResult, n_new: int, cached: bool, fastpath: bool) -> None:
    """The per-round lists, the totals and the first-token counts agree."""
    assert 0 <= res.accepted <= res.drafted
    assert sum(res.accept_hist) == len(res.accepted_per_step) == len(res.tokens_per_step) == len(res.drafted_per_step)
    assert sum(res.drafted_per_step) == res.drafted
    assert sum(res.tokens_per_step) == n_new and sum(res.accepted_per_step) == res.accepted
    assert all(a <= t for a, t in zip(res.accepted_per_step, res.tokens_per_step))
    assert res.first_checked == sum(d > 0 for d in res.drafted_per_step)
    assert 0 <= res.first_accepted <= res.first_checked
    if cached and fastpath:
        assert res.fastpath_rejects == res.first_checked - res.first_accepted
    else:
        assert res.fastpath_rejects == 0


@pytest.mark.parametrize("regime", list(REGIMES))
@pytest.mark.parametrize("k", KS)
@pytest.mark.parametrize("name", ["plain", "ngram", "ngram_word", "olifant", "neural", "neural_self", "neural_bridged"])
def test_equals_greedy_generate(setup, name, k, regime):
    verifier, prompts, refs, drafts = setup
    cached, fastpath = REGIMES[regime]
    which = k % 2  # alternate the prompts over k to keep the matrix fast
    res = speculative_generate(verifier, drafts[name], prompts[which], N_NEW, k, cached, fastpath=fastpath)
    assert list(res.tokens) == refs[which]
    assert res.stopped == "max_new_tokens" and res.seed is None
    assert_counts_add_up(res, N_NEW, cached, fastpath)
    assert res.bridged == (name in ("ngram_word", "neural_bridged"))


def test_the_verifier_as_its_own_draft_is_accepted_in_full(setup):
    verifier, prompts, refs, drafts = setup
    for regime, (cached, fastpath) in REGIMES.items():
        res = speculative_generate(verifier, drafts["neural_self"], prompts[0], N_NEW, 5, cached, fastpath=fastpath)
        assert res.accepted == res.drafted > 0
        assert res.fastpath_rejects == 0 and res.first_accepted == res.first_checked > 0
        # every round with room for drafts takes them all: 5 drafts + 1 bonus (uncached, standard), 5 (cached)
        assert res.steps == (5 if regime == "cached" else 4), regime


@pytest.mark.parametrize("regime", list(REGIMES))
def test_the_drafts_are_partly_accepted_here(setup, regime):
    """The matrix above exercises acceptances, partial ones (cache crops) and rejections for each draft."""
    verifier, prompts, refs, drafts = setup
    cached, fastpath = REGIMES[regime]
    for name in ("ngram", "ngram_word", "olifant", "neural"):
        results = [
            speculative_generate(verifier, drafts[name], p, N_NEW, 5, cached, fastpath=fastpath) for p in prompts
        ]
        assert sum(r.accepted for r in results) >= 5, name
        assert sum(r.steps for r in results) < 2 * N_NEW, name
        assert any(0 < n for r in results for n in r.accepted_per_step), name
        assert any(r.accepted < r.drafted for r in results), name


def test_plain_takes_one_step_per_token(setup):
    verifier, prompts, refs, drafts = setup
    for cached, fastpath in REGIMES.values():
        res = speculative_generate(verifier, drafts["plain"], prompts[0], N_NEW, 5, cached, fastpath=fastpath)
        assert res.steps == len(res.tokens) == N_NEW
        assert res.drafted == res.accepted == res.fastpath_rejects == 0
        assert res.accept_hist[0] == N_NEW


class WrongDraft(Draft):
    """Always proposes a token the verifier never chooses here."""

    name = "wrong"

    def __init__(self, token: int):
        self.token = token

    def propose(self, context, k):
        return [self.token] * k


class CountingVerifier(Verifier):
    """A real verifier that also counts the positions it is fed."""

    positions = 0

    def logits(self, ids, keep=0):
        self.positions += len(ids)
        return super().logits(ids, keep)

    def extend(self, new_ids, keep=0):
        self.positions += len(new_ids)
        return super().extend(new_ids, keep)


def test_fastpath_skips_the_k_token_pass_on_first_token_rejections(setup):
    verifier, prompts, refs, drafts = setup
    counting = CountingVerifier(verifier.model)
    wrong = WrongDraft(next(t for t in range(3, VOCAB) if t not in refs[0]))
    res = speculative_generate(counting, wrong, prompts[0], N_NEW, 8, cached=True)
    assert list(res.tokens) == refs[0]
    # every round but the last (one token left: no draft) is a fast-path reject fed one token only
    assert res.fastpath_rejects == N_NEW - 1 and res.accepted == 0
    assert res.steps == N_NEW
    assert counting.positions == len(prompts[0]) + N_NEW - 1  # exactly what plain decoding feeds
    counting.positions = 0
    plain = speculative_generate(counting, drafts["plain"], prompts[0], N_NEW, 8, cached=True)
    assert counting.positions == len(prompts[0]) + N_NEW - 1 and plain.steps == res.steps


def test_standard_scheme_feeds_the_pending_token_and_all_drafts(setup):
    """cached-standard: no fast path; every pass feeds the pending token + k drafts (the prompt + k at first)."""
    verifier, prompts, refs, drafts = setup
    counting = CountingVerifier(verifier.model)
    wrong = WrongDraft(next(t for t in range(3, VOCAB) if t not in refs[0]))
    res = speculative_generate(counting, wrong, prompts[0], N_NEW, 4, cached=True, fastpath=False)
    assert list(res.tokens) == refs[0] and res.steps == N_NEW
    drafted = [4] * (N_NEW - 4) + [3, 2, 1, 0]  # drafts shrink so the next token always fits
    assert list(res.drafted_per_step) == drafted and res.fastpath_rejects == 0
    assert res.first_checked == N_NEW - 1 and res.first_accepted == 0
    assert counting.positions == len(prompts[0]) + (N_NEW - 1) + sum(drafted)


def test_uncached_verifies_all_k_drafts_in_one_pass(setup):
    verifier, prompts, refs, drafts = setup
    wrong = WrongDraft(next(t for t in range(3, VOCAB) if t not in refs[0]))
    res = speculative_generate(verifier, wrong, prompts[0], N_NEW, 4, cached=False)
    assert list(res.tokens) == refs[0] and res.steps == N_NEW
    assert res.drafted == 4 * (N_NEW - 4) + 3 + 2 + 1  # drafts shrink so the bonus token always fits
    assert res.fastpath_rejects == 0


@pytest.mark.parametrize("regime", list(REGIMES))
def test_eos_mid_draft_stops_after_it(setup, regime):
    verifier, prompts, refs, drafts = setup
    cached, fastpath = REGIMES[regime]
    ref = refs[0]
    eos = ref[7]
    cut = ref.index(eos) + 1
    res = speculative_generate(
        verifier, drafts["neural_self"], prompts[0], N_NEW, 5, cached, eos_id=eos, fastpath=fastpath
    )
    assert list(res.tokens) == ref[:cut] == greedy_reference(verifier, prompts[0], N_NEW, eos_id=eos)
    assert res.stopped == "eos"
    assert sum(res.tokens_per_step) == cut


@pytest.mark.parametrize("regime", list(REGIMES))
def test_eos_as_the_first_token(setup, regime):
    verifier, prompts, refs, drafts = setup
    cached, fastpath = REGIMES[regime]
    res = speculative_generate(
        verifier, drafts["ngram"], prompts[1], N_NEW, 3, cached, eos_id=refs[1][0], fastpath=fastpath
    )
    assert list(res.tokens) == refs[1][:1] and res.stopped == "eos" and res.steps == 1


@pytest.mark.parametrize("regime", list(REGIMES))
@pytest.mark.parametrize("name", ["plain", "neural_self", "olifant"])
def test_max_new_tokens_one_and_zero(setup, name, regime):
    verifier, prompts, refs, drafts = setup
    cached, fastpath = REGIMES[regime]
    one = speculative_generate(verifier, drafts[name], prompts[0], 1, 8, cached, fastpath=fastpath)
    assert list(one.tokens) == refs[0][:1] and one.steps == 1 and one.drafted == 0
    zero = speculative_generate(verifier, drafts[name], prompts[0], 0, 8, cached, fastpath=fastpath)
    assert zero.tokens == () and zero.steps == 0


@pytest.mark.parametrize("n_new", [2, 7, 13])
def test_stops_exactly_at_max_new_tokens(setup, n_new):
    verifier, prompts, refs, drafts = setup
    for cached, fastpath in REGIMES.values():
        res = speculative_generate(verifier, drafts["neural_self"], prompts[0], n_new, 8, cached, fastpath=fastpath)
        assert list(res.tokens) == refs[0][:n_new]


def test_result_is_frozen_and_timed(setup):
    verifier, prompts, refs, drafts = setup
    warmup(verifier, drafts["ngram"], prompts[0], DecodeOptions("cached", 3, N_NEW))
    res = speculative_generate(verifier, drafts["ngram"], prompts[0], N_NEW, 3, cached=True)
    assert isinstance(res, GenerationResult) and res.n_tokens == N_NEW
    assert 0 < res.draft_s + res.verify_s <= res.wall_s
    assert res.started_at <= res.ended_at
    with pytest.raises(AttributeError):
        res.steps = 0  # frozen


def test_empty_prompt_and_negative_k_are_refused(setup):
    verifier, prompts, refs, drafts = setup
    with pytest.raises(ValueError, match="prompt_ids"):
        speculative_generate(verifier, drafts["plain"], [], 5, 3, cached=False)
    with pytest.raises(ValueError, match="k=-1"):
        speculative_generate(verifier, drafts["plain"], prompts[0], 5, -1, cached=False)


def test_accept_length():
    assert accept_length([1, 2, 3], [1, 2, 4, 9]) == 2
    assert accept_length([], [5]) == 0
    assert accept_length([7], [8, 7]) == 0
    assert accept_length([1, 2], [1, 2, 3]) == 2


def test_draft_ids_outside_the_verifiers_vocabulary_are_cut(setup):
    verifier, prompts, refs, drafts = setup
    wild = WrongDraft(VOCAB + 5)
    for cached, fastpath in REGIMES.values():
        res = speculative_generate(verifier, wild, prompts[0], 6, 3, cached, fastpath=fastpath)
        assert list(res.tokens) == refs[0][:6] and res.drafted == 0


# ---------------------------------------------------------------- temperature > 0


@pytest.mark.parametrize("regime", list(REGIMES))
@pytest.mark.parametrize("name", ["plain", "ngram", "ngram_word", "olifant", "neural", "neural_bridged"])
def test_top_k_one_samples_the_argmax_so_equals_greedy(setup, name, regime):
    """At T > 0 with top_k=1 the warped distribution is a point mass on the argmax: the sampling path is greedy."""
    verifier, prompts, refs, drafts = setup
    cached, fastpath = REGIMES[regime]
    res = speculative_generate(
        verifier, drafts[name], prompts[0], N_NEW, 3, cached, fastpath=fastpath, temperature=0.8, top_k=1, seed=3
    )
    assert list(res.tokens) == refs[0]
    assert_counts_add_up(res, N_NEW, cached, fastpath)


@pytest.mark.parametrize("regime", list(REGIMES))
@pytest.mark.parametrize("name", ["plain", "ngram", "olifant", "neural", "neural_bridged"])
def test_sampling_is_reproducible_per_seed_and_counts_add_up(setup, name, regime):
    verifier, prompts, refs, drafts = setup
    cached, fastpath = REGIMES[regime]
    opts = {"fastpath": fastpath, "temperature": 0.8, "top_k": 50, "top_p": 0.95}
    n_new = 10
    runs = [
        speculative_generate(verifier, drafts[name], prompts[1], n_new, 3, cached, seed=s, **opts) for s in (1, 1, 2)
    ]
    assert runs[0].tokens == runs[1].tokens and runs[0].seed == 1 and runs[2].seed == 2
    assert runs[0].tokens != runs[2].tokens  # 10 tokens from a 32000-token vocabulary
    for res in runs:
        assert len(res.tokens) == n_new and all(0 <= t < VOCAB for t in res.tokens)
        assert_counts_add_up(res, n_new, cached, fastpath)


def test_a_random_seed_is_recorded_and_reproduces(setup):
    verifier, prompts, refs, drafts = setup
    first = speculative_generate(verifier, drafts["ngram"], prompts[0], 8, 3, True, temperature=1.0)
    again = speculative_generate(verifier, drafts["ngram"], prompts[0], 8, 3, True, temperature=1.0, seed=first.seed)
    assert first.seed is not None and again.tokens == first.tokens


@pytest.mark.parametrize("regime", list(REGIMES))
def test_sampled_drafts_are_accepted_when_the_draft_is_the_verifier(setup, regime):
    """The neural draft samples from q = p: min(1, p/q) = 1, so every drafted token is accepted."""
    verifier, prompts, refs, drafts = setup
    cached, fastpath = REGIMES[regime]
    res = speculative_generate(
        verifier,
        drafts["neural_self"],
        prompts[0],
        N_NEW,
        4,
        cached,
        fastpath=fastpath,
        temperature=0.9,
        top_p=0.9,
        seed=5,
    )
    assert res.accepted == res.drafted > 0 and res.first_accepted == res.first_checked
    assert res.steps == (6 if regime == "cached" else 4)  # cached: prefill + 5 passes of 4 drafts


@pytest.mark.parametrize("regime", list(REGIMES))
def test_sampling_stops_at_eos(setup, regime):
    verifier, prompts, refs, drafts = setup
    cached, fastpath = REGIMES[regime]
    full = speculative_generate(
        verifier, drafts["ngram"], prompts[0], N_NEW, 3, cached, fastpath=fastpath, temperature=0.8, seed=4
    )
    eos = full.tokens[5]
    cut = full.tokens.index(eos) + 1
    res = speculative_generate(
        verifier, drafts["ngram"], prompts[0], N_NEW, 3, cached, fastpath=fastpath, temperature=0.8, seed=4, eos_id=eos
    )
    assert res.tokens == full.tokens[:cut] and res.stopped == "eos"
    assert_counts_add_up(res, cut, cached, fastpath)


def test_bad_sampling_settings_are_refused(setup):
    verifier, prompts, refs, drafts = setup
    with pytest.raises(ValueError, match="temperature=-1"):
        speculative_generate(verifier, drafts["plain"], prompts[0], 5, 3, cached=False, temperature=-1)
    with pytest.raises(ValueError, match="top_p=0"):
        speculative_generate(verifier, drafts["plain"], prompts[0], 5, 3, cached=True, temperature=1.0, top_p=0)

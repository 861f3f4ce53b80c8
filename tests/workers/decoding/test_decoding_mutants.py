"""The decoding ladder's small parts on hand-made tensors: Tally.record's cuts, the judges' edge rows, fit_vocab.

The end-to-end tests in test_decoding.py and test_sampling.py run these parts only through valid generations,
where some edges never show: a round longer than the room left after earlier rounds, an EOS beyond that room,
a chain whose logits have no row after the last draft, a distribution with two ids left, a residual against a
draft's q, a q in float32 or on another device, the verifier's vocab_size reaching a distribution draft.
"""

from __future__ import annotations

import time

import pytest
import torch
from torch._subclasses.fake_tensor import FakeTensorMode

from tests.tiny_models import tiny_lm
from workers.decoding import engine
from workers.decoding.engine import speculative_generate, warmup
from workers.decoding.judges import GreedyJudge, SamplingJudge, fit_vocab
from workers.decoding.options import REGIMES, DecodeOptions, regime_flags, regime_name
from workers.decoding.references import greedy_reference
from workers.decoding.regimes import ROUNDS, CachedRound
from workers.decoding.rounds import STOP_EOS, STOP_MAX, Tally, greedy_tokens, timed_pass
from workers.decoding.sampling import Warp
from workers.decoding.shapes import Chain
from workers.drafts import make_draft
from workers.verifier import Verifier

pytestmark = pytest.mark.usefixtures("one_thread")

F64 = torch.float64
T1 = Warp(1.0)


def sampling_judge(warp: Warp = T1) -> SamplingJudge:
    """A sampling judge whose generator is seeded, so the draft's draws repeat."""
    return SamplingJudge(warp, torch.Generator().manual_seed(0))


# ---------------------------------------------------------------- Tally.record


def test_record_cuts_a_round_at_the_room_left_after_earlier_rounds():
    tally = Tally(k=3)
    tally.record([7, 8], 2, None, 5)
    # room = 5 - 2 = 3: of [1, 2, 3, 4] only [1, 2, 3] fit; 3 accepted, all kept
    tally.record([1, 2, 3, 4], 3, None, 5)
    assert tally.tokens == [7, 8, 1, 2, 3]
    assert tally.tokens_per_step == [2, 3]
    assert tally.accepted_per_step == [2, 3]
    assert tally.stopped == STOP_MAX and tally.done(5)


def test_record_counts_only_the_accepted_tokens_kept():
    tally = Tally(k=3)
    tally.record([1, 2, 3, 4], 3, None, 2)  # room 2: 3 accepted, 2 of them kept
    assert tally.tokens == [1, 2] and tally.accepted_per_step == [2] and tally.tokens_per_step == [2]


def test_record_ignores_an_eos_beyond_the_room():
    tally = Tally(k=2)
    tally.record([4], 0, 9, 3)
    # room = 3 - 1 = 2: the EOS (9) is the third new token, past the room, so the cut is max_new_tokens's
    tally.record([6, 7, 9], 2, 9, 3)
    assert tally.tokens == [4, 6, 7]
    assert tally.stopped == STOP_MAX
    assert tally.tokens_per_step == [1, 2] and tally.accepted_per_step == [0, 2]


def test_record_stops_at_an_eos_within_the_room():
    tally = Tally(k=3)
    tally.record([6, 9, 7], 3, 9, 10)  # kept up to and including the EOS; 2 of the 3 accepted survive
    assert tally.tokens == [6, 9] and tally.stopped == STOP_EOS and tally.accepted_per_step == [2]


# ---------------------------------------------------------------- greedy


def test_greedy_tokens_is_the_argmax_of_the_last_axis():
    logits = torch.tensor([[0.0, 2.0, 1.0], [3.0, 0.0, 1.0]])
    assert greedy_tokens(logits) == [1, 0]
    # with a leading batch axis the vocabulary is still the last one: [[1, 0]], not the argmax over positions
    # (per id over the 2 rows: [1, 0, 0])
    assert greedy_tokens(logits[None]) == [[1, 0]]


def test_greedy_chain_with_no_row_after_the_last_draft_gives_none():
    logits = torch.tensor([[0.0, 2.0, 1.0], [3.0, 0.0, 1.0]])  # argmax 1, then 0
    assert GreedyJudge().chain(logits, [1, 0], [None, None]) == (2, None)


def test_greedy_chain_gives_the_row_after_the_accepted_drafts():
    logits = torch.tensor([[0.0, 2.0, 1.0], [3.0, 0.0, 1.0], [0.0, 0.0, 4.0]])
    n, row = GreedyJudge().chain(logits, [1, 2], [None, None])  # 1 passes, 2 fails against argmax 0
    assert n == 1 and row.tolist() == [3.0, 0.0, 1.0]


# ---------------------------------------------------------------- sampling judge


def test_known_is_the_token_of_a_point_mass_only():
    judge = sampling_judge()
    assert judge.known(torch.tensor([0.0, 0.0, 1.0, 0.0], dtype=F64)) == 2
    assert judge.known(torch.tensor([0.0, 0.5, 0.5, 0.0], dtype=F64)) is None  # two ids left
    assert judge.known(torch.tensor([0.25, 0.25, 0.25, 0.25], dtype=F64)) is None


def test_reject_of_a_point_mass_draft_removes_the_token():
    p = torch.tensor([0.5, 0.25, 0.25], dtype=F64)
    # p without id 0, normalised: [0, 0.25, 0.25] / 0.5
    assert sampling_judge().reject(p, 0, None).tolist() == [0.0, 0.5, 0.5]


def test_reject_of_a_distribution_draft_takes_the_residual_against_q():
    p = torch.tensor([0.5, 0.25, 0.25], dtype=F64)
    q = torch.tensor([0.25, 0.75, 0.0], dtype=F64)
    # max(0, p - q) = [0.25, 0, 0.25], normalised [0.5, 0, 0.5]; p without the token (1) would be [2/3, 0, 1/3]
    assert sampling_judge().reject(p, 1, q).tolist() == [0.5, 0.0, 0.5]


def test_sampling_chain_with_no_row_after_the_last_draft_gives_none():
    # top_k=1 makes every row a point mass, so both drafts pass with probability 1 (no draw decides)
    judge = sampling_judge(Warp(1.0, top_k=1))
    logits = torch.tensor([[0.0, 5.0, 1.0], [3.0, 0.0, 1.0]])
    assert judge.chain(logits, [1, 0], [None, None]) == (2, None)


def test_sampling_chain_gives_the_distribution_after_the_accepted_drafts():
    judge = sampling_judge(Warp(1.0, top_k=1))
    logits = torch.tensor([[0.0, 5.0, 1.0], [3.0, 0.0, 1.0], [0.0, 0.0, 2.0]])
    n, row = judge.chain(logits, [1, 0], [None, None])
    assert n == 2 and row.dtype == F64 and row.tolist() == [0.0, 0.0, 1.0]


def test_propose_passes_the_verifiers_vocab_size_to_a_distribution_draft():
    # a draft over 10 ids before a verifier of 6: the draft must put no mass on ids 6..9, so that fit_vocab's
    # cut loses nothing; without vocab_size its q would lose that mass and sum to less than 1
    draft = make_draft("neural", model=tiny_lm("mistral", seed=0, vocab=10, hidden=16, layers=1))
    draft.reset()
    tokens, qs = sampling_judge().propose(draft, [1, 2, 3], 3, 6)
    assert len(tokens) == len(qs) == 3
    for q in qs:
        assert q.shape == (6,) and q.dtype == F64
        assert float(q.sum()) == pytest.approx(1.0, abs=1e-12)
    assert all(0 <= t < 6 for t in tokens)


# ---------------------------------------------------------------- fit_vocab


def test_fit_vocab_pads_a_short_q_with_zeros_in_float64():
    q = fit_vocab(torch.tensor([0.25, 0.75]), 4)  # float32 in (0.25 and 0.75 are exact in float32)
    assert q.dtype == F64 and q.tolist() == [0.25, 0.75, 0.0, 0.0]


def test_fit_vocab_cuts_a_long_q_and_keeps_a_fitting_one():
    q = torch.tensor([0.5, 0.5, 0.0, 0.0, 0.0], dtype=F64)
    assert fit_vocab(q, 3).tolist() == [0.5, 0.5, 0.0]
    assert fit_vocab(q[:3].to(torch.float32), 3).dtype == F64


def test_fit_vocab_brings_a_q_from_another_device_to_the_cpu():
    # a GPU draft's q, without a GPU: fake tensors on the meta device carry device and dtype through the ops
    with FakeTensorMode():
        q = torch.empty(3, device="meta", dtype=torch.float32)
        out = fit_vocab(q, 5)
        assert out.device.type == "cpu" and out.dtype == F64 and out.shape == (5,)


# ---------------------------------------------------------------- warmup


def test_warmup_warms_the_timed_runs_own_path(monkeypatch):
    """The warm-up is one short generation in the regime and with the options of the run it precedes (an uncached
    or greedy warm-up before a cached or sampled run would leave that run's first-call costs in its timing)."""
    calls = []
    monkeypatch.setattr(engine, "generate", lambda *args: calls.append(args))
    verifier, draft, prompt = object(), object(), [5, 6, 7]
    timed = DecodeOptions("cached-standard", 3, 100, eos_id=2, warp=Warp(0.8, top_k=5), seed=11)
    warmup(verifier, draft, prompt, timed)
    warmup(verifier, draft, prompt, DecodeOptions("uncached", 2, 5, trees=True))
    assert calls == [
        (verifier, draft, prompt, DecodeOptions("cached-standard", 3, 8, eos_id=2, warp=Warp(0.8, top_k=5), seed=11)),
        (verifier, draft, prompt, DecodeOptions("uncached", 2, 5, trees=True)),  # shorter than a warm-up: as timed
    ]


def test_every_regime_has_one_round_and_options_refuse_the_rest():
    assert set(ROUNDS) == set(REGIMES)
    assert [regime_flags(r) for r in ("uncached", "cached", "cached-standard")] == [
        (False, True),
        (True, True),
        (True, False),
    ]
    assert [regime_name(*regime_flags(r)) for r in REGIMES] == list(REGIMES)
    assert regime_name(False, fastpath=False) == "uncached"  # fastpath means nothing without a cache
    with pytest.raises(
        ValueError, match="regime 'paged' is not accepted; give one of uncached, cached, cached-standard"
    ):
        regime_flags("paged")
    with pytest.raises(
        ValueError, match="regime 'paged' is not accepted; give one of uncached, cached, cached-standard"
    ):
        DecodeOptions("paged", 3, 10)
    with pytest.raises(ValueError, match="max_new_tokens=-1 must be >= 0"):
        DecodeOptions("cached", 3, -1)
    with pytest.raises(ValueError, match="token trees are greedy only; got temperature=0.5"):
        DecodeOptions("cached", 3, 10, warp=Warp(0.5), trees=True)


def test_speculative_generate_passes_one_options_object(monkeypatch):
    """Every flag lands in the one DecodeOptions the loop gets: none is dropped on the way."""
    calls = []
    monkeypatch.setattr(engine, "generate", lambda *args: calls.append(args[3]))
    speculative_generate(object(), object(), [5], 9, 4, True, 7, False, 0.5, 3, 0.9, 13)
    speculative_generate(object(), object(), [5], 9, 4, False, trees=True)
    assert calls == [
        DecodeOptions("cached-standard", 4, 9, eos_id=7, warp=Warp(0.5, 3, 0.9), seed=13),
        DecodeOptions("uncached", 4, 9, trees=True),
    ]


# ---------------------------------------------------------------- the timers and the draft's id range


class StubVerifier:
    """What `propose` and `timed_pass` use of a verifier: its vocabulary size and a device sync."""

    vocab_size = 10
    last_shape = (1, 0, 1)  # what `timed_pass` records of each pass

    def sync(self) -> None:
        pass


class SleepyDraft:
    """Proposes `tokens` after sleeping `pause_s`, so its time is known from below."""

    def __init__(self, tokens: list[int], pause_s: float = 0.0):
        self.tokens, self.pause_s = tokens, pause_s

    def propose(self, context, k: int) -> list[int]:
        time.sleep(self.pause_s)
        return self.tokens[:k]

    def reset(self) -> None:
        pass


def test_draft_and_verify_times_add_up_over_rounds():
    """draft_s and verify_s are sums over the generation's rounds: each round's time is added, never replaces."""
    tally, verifier, pause = Tally(k=2), StubVerifier(), 0.02
    draft = SleepyDraft([1, 2], pause)
    for _ in range(3):
        Chain(GreedyJudge()).propose(draft, [5], 2, verifier, tally)
        timed_pass(verifier, tally, time.sleep, pause)
    # three rounds of >= 20 ms each way: at least 60 ms in each timer (one round's alone would be ~20 ms)
    assert tally.draft_s >= 3 * pause and tally.verify_s >= 3 * pause
    assert tally.draft_s < 3 * pause + 0.5 and tally.verify_s < 3 * pause + 0.5  # and no more than a sum
    assert tally.steps == 3 and tally.drafted == 6 and tally.drafted_per_step == [2, 2, 2]


def test_a_draft_id_outside_the_verifiers_vocabulary_cuts_the_draft_there():
    verifier = StubVerifier()  # ids 0..9
    for tokens, kept in (([1, 10, 2], [1]), ([9, 3], [9, 3]), ([4, -1, 5], [4]), ([10], [])):
        tally = Tally(k=3)
        drafts = Chain(GreedyJudge()).propose(SleepyDraft(tokens), [5], 3, verifier, tally)
        assert drafts.tokens == kept and drafts.qs == [None] * len(kept), tokens
        assert tally.drafted == len(kept) and tally.drafted_per_step == [len(kept)]


def test_cached_round_ends_on_the_verifiers_own_eos_without_asking_the_draft():
    """When the pending row's token is EOS, the cached round emits it at once: the draft is not asked (nothing
    drafted, no draft time, no fast-path reject counted) and no pass runs."""
    draft, tally = SleepyDraft([3, 3]), Tally(k=2)
    draft.propose = lambda context, k: pytest.fail("the draft was asked")  # noqa: ARG005
    rnd = CachedRound(StubVerifier(), draft, Chain(GreedyJudge()), tally, k=2, eos_id=2)
    rnd.pending = torch.tensor([0.0, 1.0, 5.0, 0.0])  # the verifier's next token: 2, the EOS
    assert rnd.step([7, 8], room=5) == ([2], 0) and rnd.pending is None
    assert tally.drafted_per_step == [0] and tally.drafted == 0 and tally.fastpath_rejects == 0
    assert tally.steps == 0 and tally.draft_s == 0.0


def test_every_pass_computes_the_vocabulary_head_only_for_the_positions_it_uses():
    """The output head (hidden x 32000 here) is most of a small model's pass: the paper's cached prefill asks for
    the last position only, and every other pass for no more rows than it feeds (keep = 0 means all of them)."""
    asked = []

    class Spy(Verifier):
        def prefill(self, ids, keep=0):
            asked.append(("prefill", len(ids), keep))
            return super().prefill(ids, keep)

        def extend(self, new_ids, keep=0):
            asked.append(("extend", len(new_ids), keep))
            return super().extend(new_ids, keep)

    verifier = Spy(tiny_lm("llama", seed=0, echo=0.3))
    draft = make_draft("ngram", n=2)
    for regime, (cached, fastpath) in (("cached", (True, True)), ("cached-standard", (True, False))):
        asked.clear()
        speculative_generate(verifier, draft, [5, 6, 7, 5, 6, 7, 5, 6], 12, 3, cached, fastpath=fastpath)
        assert asked[0][0] == "prefill" and [a[0] for a in asked].count("prefill") == 1, (regime, asked)
        assert len(asked) > 2 and all(keep == 0 or keep <= fed for _, fed, keep in asked), (regime, asked)
        if regime == "cached":  # the prompt's last position only: its row is the first pending one
            assert asked[0] == ("prefill", 8, 1)


# ---------------------------------------------------------------- speculative_generate's own arguments


@pytest.fixture(scope="module")
def small_verifier():
    return Verifier(tiny_lm("mistral", seed=5, echo=0.3))


def test_k_zero_is_plain_greedy_in_every_regime(small_verifier):
    """k = 0 is how plain runs: allowed (only k < 0 is refused), nothing drafted, the greedy text."""
    prompt = [5, 6, 7, 8]
    ref = greedy_reference(small_verifier, prompt, 10)
    for regime, (cached, fastpath) in REGIMES.items():
        res = speculative_generate(small_verifier, make_draft("ngram", n=2), prompt, 10, 0, cached, fastpath=fastpath)
        assert list(res.tokens) == ref and res.drafted == 0 and set(res.drafted_per_step) == {0}, regime


def test_sampling_defaults_warp_nothing_but_the_temperature(small_verifier):
    """temperature > 0 with top_k and top_p left out samples from the whole distribution: the same tokens as
    top_k = 0, top_p = 1 for each seed, and not the greedy text that top_k = 1 gives."""
    prompt, draft = [5, 6, 7, 8], make_draft("ngram", n=2)
    greedy = list(
        speculative_generate(small_verifier, draft, prompt, 10, 3, True, temperature=1.0, top_k=1, seed=0).tokens
    )
    defaults = []
    for seed in range(3):
        res = speculative_generate(small_verifier, draft, prompt, 10, 3, True, temperature=1.0, seed=seed)
        whole = speculative_generate(
            small_verifier, draft, prompt, 10, 3, True, temperature=1.0, top_k=0, top_p=1.0, seed=seed
        )
        assert res.tokens == whole.tokens and res.seed == seed
        defaults.append(list(res.tokens))
    assert any(tokens != greedy for tokens in defaults)


def test_an_empty_prompt_is_refused_in_words_that_say_what_to_give():
    with pytest.raises(ValueError) as err:
        speculative_generate(StubVerifier(), make_draft("plain"), [], 5, 3, cached=False)
    assert str(err.value) == "speculative_generate: prompt_ids is empty; give at least one token (e.g. BOS)"


def test_the_result_records_its_own_wall_time_histogram_and_bridging(small_verifier):
    """wall_s is the generation's own span (not a clock reading), the histogram has one bin per accepted count
    0..k, and a draft object without a `bridged` attribute (any duck-typed draft) counts as not bridged."""
    for k in (1, 3):
        res = speculative_generate(small_verifier, SleepyDraft([5, 6, 7]), [5, 6, 7, 5, 6], 8, k, True)
        assert 0 < res.wall_s <= res.ended_at - res.started_at + 0.05
        assert len(res.accept_hist) == k + 1 and sum(res.accept_hist) == len(res.accepted_per_step)
        assert res.bridged is False

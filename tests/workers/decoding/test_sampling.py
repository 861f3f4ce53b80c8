"""Sampling at temperature > 0: the exact rules and the engine's output distribution (the warping: test_warping.py).

The statistical tests draw a few thousand seeded generations per draft x regime x warp from tiny real models
(vocab 8, peaked logits) and compare the joint distribution of the first two new tokens with the exact one,
computed from the model with transformers' own warpers, by a chi-square test at p = 0.001. A deliberately
wrong rule (accept a draft whenever it is the argmax) run through the same seam must be rejected.
"""

from __future__ import annotations

import copy
from collections import Counter

import numpy as np
import pytest
import torch
from transformers import LlamaConfig, LlamaForCausalLM
from transformers.generation.logits_process import (
    LogitsProcessorList,
    TemperatureLogitsWarper,
    TopKLogitsWarper,
    TopPLogitsWarper,
)

from tests.workers.decoding.test_warping import hf_scores
from workers.decoding import REGIMES, speculative_generate
from workers.decoding.sampling import EXACT, ExactRule, Warp, make_generator, sample, warped_probs
from workers.drafts import make_draft
from workers.igtree import IGTree
from workers.interfaces import Draft
from workers.verifier import Verifier

pytestmark = pytest.mark.usefixtures("one_thread")

ALPHA = 0.001
V = 8  # vocabulary of the statistical models: 64 joint outcomes of two tokens
PROMPT = [1, 5, 3, 5, 3, 5, 3]  # repetitive, so the in-session n-gram drafts something
N_GEN = 1200  # seeded generations per draft x regime x warp (6 x 1200 per draft)
K = 2
SCALE = 10.0  # output-head scale of the statistical verifier: peaked distributions, drafts often accepted
WARPS = {"T1": Warp(1.0), "T0.7-top_k5-top_p0.9": Warp(0.7, top_k=5, top_p=0.9)}


# ---------------------------------------------------------------- helpers


class ArgmaxShortcutRule(ExactRule):
    """A deliberately WRONG rule: a draft equal to p's argmax is always accepted (the greedy habit; biased)."""

    def accept(self, p, token, q, generator):
        return token == int(p.argmax()) or super().accept(p, token, q, generator)


def hf_probs(logits: torch.Tensor, warp: Warp) -> torch.Tensor:
    """The sampling distribution transformers' generate uses (its own warper classes, in its order), float64."""
    procs = LogitsProcessorList()
    if warp.temperature != 1.0:
        procs.append(TemperatureLogitsWarper(float(warp.temperature)))
    if warp.top_k:
        procs.append(TopKLogitsWarper(warp.top_k))
    if warp.top_p < 1.0:
        procs.append(TopPLogitsWarper(warp.top_p))
    return hf_scores(procs, logits).softmax(-1).to(torch.float64)


def chi_square_p(counts: Counter, probs: dict, n: int) -> float:
    """p-value of Pearson's chi-square for observed `counts` against `probs`; cells expected < 5 are pooled."""
    if any(probs.get(cell, 0.0) == 0.0 for cell in counts):
        return 0.0  # an impossible outcome was observed
    cells = sorted(probs, key=lambda c: probs[c] * n)
    small = [c for c in cells if probs[c] * n < 5]
    big = [c for c in cells if probs[c] * n >= 5]
    if small and sum(probs[c] for c in small) * n < 5 and big:
        small.append(big.pop(0))  # the pool itself must reach 5
    bins = [[c] for c in big] + ([small] if small else [])
    stat = 0.0
    for group in bins:
        e = n * sum(probs[c] for c in group)
        o = sum(counts.get(c, 0) for c in group)
        stat += (o - e) ** 2 / e
    df = torch.tensor((len(bins) - 1) / 2, dtype=torch.float64)
    return float(torch.special.gammaincc(df, torch.tensor(stat / 2, dtype=torch.float64)))  # chi2.sf(stat, df)


def tiny_model(seed: int, scale: float) -> LlamaForCausalLM:
    """A tiny random Llama over V tokens; `scale` on the output head makes its distributions peaked."""
    torch.manual_seed(seed)
    cfg = LlamaConfig(
        vocab_size=V,
        hidden_size=16,
        intermediate_size=32,
        num_hidden_layers=1,
        num_attention_heads=2,
        num_key_value_heads=1,
        max_position_embeddings=64,
    )
    model = LlamaForCausalLM(cfg).eval()
    with torch.no_grad():
        model.lm_head.weight.mul_(scale)
    return model


class MemoVerifier(Verifier):
    """The real tiny model run once per distinct context (full forward); its cache is the id list it holds.

    A KV cache means exactly that list; the real cache's equivalence with full forwards is tested greedily in
    test_decoding.py. Memoising lets a few thousand generations run in seconds.
    """

    def __init__(self, model):
        super().__init__(model)
        self._memo: dict[tuple[int, ...], torch.Tensor] = {}
        self._ids: list[int] = []

    def full(self, ids) -> torch.Tensor:
        key = tuple(ids)
        if key not in self._memo:
            self._memo[key] = super().logits(ids)  # (T, V)
        return self._memo[key]

    @property
    def cached_len(self) -> int:
        return len(self._ids)

    def logits(self, ids, keep=0):
        out = self.full(ids)
        return out[-keep:] if keep else out

    def prefill(self, ids, keep=0):
        self._ids = list(ids)
        return self.logits(ids, keep)

    def extend(self, new_ids, keep=0):
        start = len(self._ids)
        self._ids = self._ids + list(new_ids)
        out = self.full(self._ids)[start:]
        return out[-keep:] if keep else out

    def crop(self, n_tokens):
        self._ids = self._ids[:n_tokens]


class FixedDraft(Draft):
    """Deterministic: proposes a fixed sequence (here the verifier's greedy chain) by position."""

    name = "fixed"

    def __init__(self, seq: list[int], start: int):
        self.seq, self.start = seq, start

    def propose(self, context, k):
        i = len(context) - self.start
        return self.seq[i : i + k]


class SampledDraft(Draft):
    """A distribution draft over a second tiny model (memoised): samples from its warped q, reports q."""

    name = "sampled"

    def __init__(self, verifier: MemoVerifier):
        self.model = verifier
        self._q: dict[tuple, torch.Tensor] = {}

    def propose(self, context, k):
        return []  # used only at T > 0

    def q(self, ids: list[int], warp: Warp) -> torch.Tensor:
        """The draft model's warped distribution after `ids` (memoised: a function of ids and warp)."""
        key = (tuple(ids), warp)
        if key not in self._q:
            self._q[key] = warped_probs(self.model.full(ids)[-1], warp)
        return self._q[key]

    def propose_with_probs(self, context, k, warp, generator, vocab_size=None):
        tokens, rows = [], []
        for _ in range(k):
            q = self.q(list(context) + tokens, warp)
            tokens.append(sample(q, generator))
            rows.append(q)
        return tokens, torch.stack(rows)


def exact_joint(verifier: MemoVerifier, warp: Warp) -> dict[tuple[int, int], float]:
    """P(first two new tokens) from the model with transformers' warpers: p1(t1) * p2(t2 | t1)."""
    p1 = hf_probs(verifier.full(PROMPT)[-1:], warp)[0]
    joint = {}
    for t1 in torch.nonzero(p1 > 0).flatten().tolist():
        p2 = hf_probs(verifier.full(PROMPT + [t1])[-1:], warp)[0]
        for t2 in torch.nonzero(p2 > 0).flatten().tolist():
            joint[(t1, t2)] = float(p1[t1] * p2[t2])
    return joint


def greedy_chain(verifier: MemoVerifier, n: int) -> list[int]:
    """The verifier's argmax continuation of PROMPT, n tokens."""
    ids = list(PROMPT)
    for _ in range(n):
        ids.append(int(verifier.full(ids)[-1].argmax()))
    return ids[len(PROMPT) :]


def run_many(verifier, draft, regime: str, warp: Warp, n: int, rule=EXACT, seed0: int = 0):
    """n seeded generations of 3 tokens: (counts of the first two, drafted, accepted)."""
    cached, fastpath = REGIMES[regime]
    counts, drafted, accepted = Counter(), 0, 0
    for s in range(seed0, seed0 + n):
        res = speculative_generate(
            verifier,
            draft,
            PROMPT,
            3,
            K,
            cached,
            fastpath=fastpath,
            temperature=warp.temperature,
            top_k=warp.top_k,
            top_p=warp.top_p,
            seed=s,
            rule=rule,
        )
        counts[res.tokens[:2]] += 1
        drafted += res.drafted
        accepted += res.accepted
    return counts, drafted, accepted


@pytest.fixture(scope="module")
def stat_setup():
    """A memoised tiny verifier, its exact joints per warp, and one draft of each kind that gets accepted."""
    return build_stat_setup()


def build_stat_setup():
    """See stat_setup."""
    verifier = MemoVerifier(tiny_model(seed=3, scale=SCALE))
    draft_verifier = MemoVerifier(noisy(verifier.model, 0.15))
    chain = greedy_chain(verifier, 12)
    stream = np.array(PROMPT + chain + [4, 2, 6, 0, 7, 1] + chain[::-1])
    windows = np.lib.stride_tricks.sliding_window_view(stream, 5)
    drafts = {
        "plain": make_draft("plain"),
        "fixed": FixedDraft(chain, len(PROMPT)),
        "ngram": make_draft("ngram", n=3),
        "olifant": make_draft("olifant", ibase=IGTree.fit(windows[:, :4], windows[:, 4])),
        "sampled": SampledDraft(draft_verifier),
    }
    joints = {name: exact_joint(verifier, warp) for name, warp in WARPS.items()}
    return verifier, drafts, joints


def noisy(model, noise: float, seed: int = 11):
    """The model with Gaussian noise on every weight: a draft close to the verifier, not equal."""
    torch.manual_seed(seed)
    out = copy.deepcopy(model)
    with torch.no_grad():
        for p in out.parameters():
            p.add_(noise * torch.randn_like(p))
    return out


# ---------------------------------------------------------------- the rules alone


P = torch.tensor([0.05, 0.4, 0.25, 0.0, 0.2, 0.1], dtype=torch.float64)
Q = torch.tensor([0.3, 0.1, 0.3, 0.2, 0.0, 0.1], dtype=torch.float64)


def test_rule_values():
    assert EXACT.accept_probability(P, 1, None) == 0.4  # point mass: p(x)
    assert EXACT.accept_probability(P, 1, Q) == 1.0  # p(x) >= q(x)
    assert EXACT.accept_probability(P, 0, Q) == pytest.approx(0.05 / 0.3)
    assert EXACT.accept_probability(P, 3, Q) == 0.0
    rest = EXACT.residual(P, 1, None)
    assert rest[1] == 0 and torch.allclose(rest, torch.tensor([0.05, 0, 0.25, 0, 0.2, 0.1], dtype=torch.float64) / 0.6)
    res = EXACT.residual(P, 0, Q)  # max(0, p - q) = [0, .3, 0, 0, .2, 0]
    assert torch.allclose(res, torch.tensor([0, 0.6, 0, 0, 0.4, 0], dtype=torch.float64))
    assert torch.equal(EXACT.residual(Q, 2, Q), Q)  # nothing left (p == q): p itself, never reached by a draw


def one_position(rule, draft_token, q, gen) -> int:
    """The token a position gets: the draft's if accepted, else a draw from the residual."""
    if rule.accept(P, draft_token, q, gen):
        return draft_token
    return sample(rule.residual(P, draft_token, q), gen)


@pytest.mark.parametrize("kind", ["point-argmax", "point-other", "point-impossible", "q"])
def test_one_position_is_distributed_as_p(kind):
    gen, _ = make_generator(0)
    n = 6000
    counts = Counter()
    for _ in range(n):
        if kind == "q":
            token, q = sample(Q, gen), Q
        else:
            token, q = {"point-argmax": 1, "point-other": 4, "point-impossible": 3}[kind], None
        counts[one_position(EXACT, token, q, gen)] += 1
    assert chi_square_p(counts, {i: float(P[i]) for i in range(6)}, n) > ALPHA


def test_the_argmax_shortcut_is_caught_at_one_position():
    gen, _ = make_generator(0)
    n = 3000
    counts = Counter(one_position(ArgmaxShortcutRule(), 1, None, gen) for _ in range(n))
    assert chi_square_p(counts, {i: float(P[i]) for i in range(6)}, n) < ALPHA


def test_chi_square_p_values():
    # Pearson's statistic 4.0 on 1 degree of freedom: p = 0.0455003; 2.0 on 3: p = 0.5724067 (chi-square tables)
    assert chi_square_p(Counter({0: 60, 1: 40}), {0: 0.5, 1: 0.5}, 100) == pytest.approx(0.0455003, abs=1e-6)
    uniform4 = {i: 0.25 for i in range(4)}
    assert chi_square_p(Counter({0: 30, 1: 20, 2: 25, 3: 25}), uniform4, 100) == pytest.approx(0.5724067, abs=1e-6)
    assert chi_square_p(Counter({0: 50, 2: 1}), {0: 0.5, 1: 0.5}, 51) == 0.0  # impossible outcome observed


# ---------------------------------------------------------------- the engine, statistically


@pytest.mark.slow
@pytest.mark.parametrize("warp_name", list(WARPS))
@pytest.mark.parametrize("regime", list(REGIMES))
@pytest.mark.parametrize("draft_name", ["plain", "fixed", "ngram", "olifant", "sampled"])
def test_first_two_tokens_follow_the_verifiers_warped_distribution(stat_setup, draft_name, regime, warp_name):
    verifier, drafts, joints = stat_setup
    counts, drafted, accepted = run_many(verifier, drafts[draft_name], regime, WARPS[warp_name], N_GEN)
    assert sum(counts.values()) == N_GEN
    if draft_name != "plain":  # the rules are exercised both ways
        assert 0 < accepted < drafted, (accepted, drafted)
    assert chi_square_p(counts, joints[warp_name], N_GEN) > ALPHA


@pytest.mark.slow
def test_the_real_neural_draft_keeps_the_distribution(stat_setup):
    """End to end with NeuralDraft itself (its own KV cache and propose_with_probs), in the cached regime.

    Fewer generations than above (each runs the draft model for real); the matrix above covers every regime
    with a memoised distribution draft that follows the same protocol.
    """
    verifier, drafts, joints = stat_setup
    neural = make_draft("neural", model=noisy(verifier.model, 0.15))
    warp_name, n = "T0.7-top_k5-top_p0.9", 500
    counts, drafted, accepted = run_many(verifier, neural, "cached", WARPS[warp_name], n)
    assert 0 < accepted < drafted
    assert chi_square_p(counts, joints[warp_name], n) > ALPHA


@pytest.mark.slow
@pytest.mark.parametrize("regime", list(REGIMES))
def test_a_wrong_rule_is_rejected(stat_setup, regime):
    """Accepting a draft whenever it is the argmax (the greedy habit) biases the output: the test must see it."""
    verifier, drafts, joints = stat_setup
    counts, _, _ = run_many(verifier, drafts["fixed"], regime, WARPS["T1"], N_GEN, rule=ArgmaxShortcutRule())
    assert chi_square_p(counts, joints["T1"], N_GEN) < ALPHA


# ---------------------------------------------------------------- the neural draft's distribution


def test_neural_draft_reports_the_distribution_it_samples_from():
    model = tiny_model(seed=5, scale=4.0)
    draft = make_draft("neural", model=model)
    warp = Warp(0.7, top_k=5, top_p=0.9)
    gen, _ = make_generator(1)
    tokens, q = draft.propose_with_probs(PROMPT, 3, warp, gen)
    assert len(tokens) == 3 and q.shape == (3, V) and q.dtype == torch.float64
    with torch.no_grad():
        full = model(input_ids=torch.tensor([PROMPT + tokens[:2]])).logits[0, -3:]  # after PROMPT, +t1, +t1 t2
    assert torch.allclose(q, warped_probs(full, warp), atol=1e-6)
    assert all(q[i, t] > 0 for i, t in enumerate(tokens))
    again, _ = make_generator(1)
    assert draft.propose_with_probs(PROMPT, 3, warp, again)[0] == tokens  # the generator drives it
    # ids the verifier lacks get no mass
    _, cut = draft.propose_with_probs(PROMPT, 2, warp, gen, vocab_size=V - 3)
    assert float(cut[:, V - 3 :].sum()) == 0 and torch.allclose(cut.sum(-1), torch.ones(2, dtype=torch.float64))


def test_neural_draft_samples_its_first_token_from_q():
    model = tiny_model(seed=5, scale=4.0)
    draft = make_draft("neural", model=model)
    gen, _ = make_generator(2)
    n, counts = 800, Counter()
    for _ in range(n):
        tokens, q = draft.propose_with_probs(PROMPT, 1, Warp(1.0), gen)
        counts[tokens[0]] += 1
    assert chi_square_p(counts, {i: float(q[0, i]) for i in range(V)}, n) > ALPHA

"""The retrieval drafts (lookup, suffix, rest) under speculative decoding equal transformers' greedy `generate`."""

from __future__ import annotations

import inspect

import numpy as np
import pytest

from tests.tiny_models import tiny_lm
from workers.decoding import greedy_reference, speculative_generate
from workers.drafts import make_draft
from workers.training.datastore import save_datastore
from workers.verifier import Verifier

pytestmark = pytest.mark.usefixtures("one_thread")

N_NEW = 24
KS = (1, 3, 8)
SEEDS = {"llama": 0, "mistral": 5}
PROMPTS = (
    "To be, or not to be, that is the question: whether 'tis nobler in the mind",
    "The quick brown fox jumps over the lazy dog, and the dog",
)
CORPUS = (  # the datastore's documents: the verifier's own continuations of these give REST something to find
    "To be, or not to be, that is the question",
    "The quick brown fox jumps over the lazy dog",
    "Now is the winter of our discontent made glorious summer by this sun of York",
)
# cached-standard (pending token + k drafts, no fast path) where speculative_generate offers it
REGIMES = {"uncached": {"cached": False}, "cached": {"cached": True}}
if "fastpath" in inspect.signature(speculative_generate).parameters:
    REGIMES["cached-standard"] = {"cached": True, "fastpath": False}


@pytest.fixture(scope="module", params=["llama", "mistral"])
def setup(request, mistral_tok, tmp_path_factory):
    """A verifier, its prompts and greedy references, and the retrieval drafts (REST over a real datastore)."""
    verifier = Verifier(tiny_lm(request.param, SEEDS[request.param], echo=0.3))
    prompts = [mistral_tok(p).input_ids for p in PROMPTS]
    refs = [greedy_reference(verifier, p, N_NEW) for p in prompts]
    docs = [mistral_tok(d).input_ids for d in CORPUS]
    stream = [t for d in docs for t in d + greedy_reference(verifier, d, N_NEW)]
    stream += [t for p, r in zip(prompts, refs) for t in p + r[: N_NEW // 2]]  # REST right for the first half only
    path = tmp_path_factory.mktemp("datastore") / "corpus.rest.npy"
    save_datastore(np.array(stream), path)
    drafts = {
        "lookup": make_draft("lookup"),
        "lookup3": make_draft("lookup", max_ngram=3),
        "suffix": make_draft("suffix"),
        "suffix_remember": make_draft("suffix", remember_outputs=True, max_spec_factor=2.0, min_token_prob=0.0),
        "rest": make_draft("rest", datastore=str(path)),
    }
    return verifier, prompts, refs, drafts


@pytest.mark.parametrize("regime", list(REGIMES))
@pytest.mark.parametrize("k", KS)
@pytest.mark.parametrize("name", ["lookup", "lookup3", "suffix", "suffix_remember", "rest"])
def test_equals_greedy_generate(setup, name, k, regime):
    verifier, prompts, refs, drafts = setup
    which = (k + len(name)) % 2  # alternate the prompts to keep the matrix fast
    res = speculative_generate(verifier, drafts[name], prompts[which], N_NEW, k, **REGIMES[regime])
    assert list(res.tokens) == refs[which]
    assert 0 <= res.accepted <= res.drafted and sum(res.tokens_per_step) == N_NEW
    assert sum(res.drafted_per_step) == res.drafted and sum(res.accepted_per_step) == res.accepted


@pytest.mark.parametrize("regime", list(REGIMES))
def test_each_draft_is_partly_accepted_here(setup, regime):
    """The matrix above is not vacuous: every draft proposes, is accepted, and is rejected."""
    verifier, prompts, refs, drafts = setup
    for name in ("lookup", "suffix", "rest"):
        results = [speculative_generate(verifier, drafts[name], p, N_NEW, 3, **REGIMES[regime]) for p in prompts]
        assert sum(r.accepted for r in results) >= 3, name
        assert sum(r.steps for r in results) < 2 * N_NEW + 2, name
        assert any(r.accepted < r.drafted for r in results), name

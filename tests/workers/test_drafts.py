"""Drafts: the registry, the in-session n-gram (token and word), the IGTree draft and the neural draft."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from transformers import LlamaConfig, LlamaForCausalLM

from workers.drafts import DRAFTS, Draft, make_draft
from workers.drafts.base import common_prefix_len, continuation_ids
from workers.drafts.ngram import NgramTable
from workers.errors import DraftError
from workers.igtree import IGTree
from tests.workers.conftest import bpe_tokenizer

pytestmark = pytest.mark.usefixtures("one_thread")


TEXT = (
    "Now is the winter of our discontent made glorious summer by this sun of York; and all the clouds "
    "that lour'd upon our house in the deep bosom of the ocean buried."
)


@pytest.fixture(scope="module")
def bpe_tok():
    """A byte-level BPE trained here: a vocabulary unlike Mistral's."""
    return bpe_tokenizer([TEXT])


def tiny_llama(vocab: int, seed: int = 0):
    """A small random Llama (fp32, eval)."""
    torch.manual_seed(seed)
    cfg = LlamaConfig(vocab_size=vocab, hidden_size=32, intermediate_size=64, num_hidden_layers=1,
                      num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=256)
    return LlamaForCausalLM(cfg).eval()


def manual_greedy(model, ids: list[int], k: int) -> list[int]:
    """k greedy tokens by full forwards, no cache: what the neural draft must reproduce."""
    ids = list(ids)
    out = []
    with torch.no_grad():
        for _ in range(k):
            token = int(model(torch.tensor([ids])).logits[0, -1].argmax())
            out.append(token)
            ids.append(token)
    return out


# registry ----------------------------------------------------------------------------------------------


def test_registry_names_and_protocol():
    assert DRAFTS == ("plain", "ngram", "olifant", "neural")
    for name, opts in (("plain", {}), ("ngram", {"n": 3})):
        draft = make_draft(name, **opts)
        assert isinstance(draft, Draft) and draft.name == name and draft.bridged is False


def test_unknown_draft_names_the_accepted_ones():
    with pytest.raises(DraftError, match="'medusa' is unknown; accepted: plain, ngram, olifant, neural"):
        make_draft("medusa")


def test_bad_options_are_a_draft_error():
    with pytest.raises(DraftError, match="'ngram'.*accepted: n, unit, tokenizer"):
        make_draft("ngram", size=4)
    with pytest.raises(DraftError, match="n=1"):
        make_draft("ngram", n=1)
    with pytest.raises(DraftError, match="unit='char'"):
        make_draft("ngram", unit="char")
    with pytest.raises(DraftError, match="needs tokenizer"):
        make_draft("ngram", unit="word")
    with pytest.raises(DraftError, match="needs ibase"):
        make_draft("olifant", ibase=None)
    with pytest.raises(DraftError, match="ibase=int"):
        make_draft("olifant", ibase=3)


def test_plain_proposes_nothing():
    assert make_draft("plain").propose([1, 2, 3], 5) == []


# n-gram ------------------------------------------------------------------------------------------------


def test_ngram_chains_the_most_frequent_continuation():
    draft = make_draft("ngram", n=4)
    assert draft.propose([5, 6, 7, 8, 5, 6, 7], 3) == [8, 5, 6]
    assert draft.propose([5, 6, 7, 8, 5, 6, 7], 0) == []


def test_ngram_backs_off_to_shorter_contexts_and_stops_when_nothing_matches():
    draft = make_draft("ngram", n=4)
    assert draft.propose([1, 2, 3, 9, 1, 2], 2) == [3, 9]  # 9 1 2 unseen; 1 2 -> 3, then 1 2 3 -> 9
    draft.reset()
    assert draft.propose([1, 2, 3, 4], 3) == []  # 4 never seen followed by anything


def test_ngram_prefers_frequent_then_recent():
    table = NgramTable(2)
    for unit in [1, 7, 1, 7, 1, 8]:
        table.add(unit)
    assert table.predict([1]) == 7  # 1 -> 7 twice, 1 -> 8 once
    table.add(1)
    table.add(8)
    assert table.predict([1]) == 8  # a 2-2 tie goes to the more recent


def test_ngram_is_incremental_and_equals_a_fresh_rebuild():
    rng = np.random.default_rng(0)
    stream = [int(t) for t in rng.integers(0, 6, size=200)]
    running = make_draft("ngram", n=4)
    for end in range(10, 200, 7):
        fresh = make_draft("ngram", n=4)
        assert running.propose(stream[:end], 5) == fresh.propose(stream[:end], 5)
    assert len(running._table.units) == end  # only what it was shown, each token counted once


def test_ngram_rebuilds_when_the_context_is_not_a_continuation():
    draft = make_draft("ngram", n=3)
    assert draft.propose([1, 2, 3, 1, 2], 1) == [3]
    assert draft.propose([4, 5, 6, 4, 5], 1) == [6]  # a new session without reset(): no stale counts
    assert draft.propose([4, 5, 6, 4], 1) == [5]


def test_word_ngram_drafts_through_text(mistral_tok):
    draft = make_draft("ngram", n=3, unit="word", tokenizer=mistral_tok)
    assert draft.bridged
    context = mistral_tok("the cat sat on the mat and the cat sat on").input_ids
    ids = draft.propose(context, 4)
    assert ids and mistral_tok.decode(context + ids, skip_special_tokens=True).startswith(
        "the cat sat on the mat and the cat sat on the mat")


def test_continuation_ids_refuses_a_merge(mistral_tok):
    assert mistral_tok.decode(continuation_ids(mistral_tok, "the cat", " sat")) == "sat"
    base = mistral_tok.encode("hel", add_special_tokens=False)
    merged = mistral_tok.encode("hello", add_special_tokens=False)
    if merged[:len(base)] != base:  # "hel" + "lo" re-tokenizes the context: no safe proposal
        assert continuation_ids(mistral_tok, "hel", "lo") == []


def test_common_prefix_len():
    assert common_prefix_len([1, 2, 3], [1, 2, 4]) == 2
    assert common_prefix_len([1, 2], [1, 2, 3]) == 2
    assert common_prefix_len([], [1]) == 0


# olifant -----------------------------------------------------------------------------------------------


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


def test_neural_proposes_the_models_greedy_tokens_with_a_reused_cache():
    model = tiny_llama(64)
    draft = make_draft("neural", model=model)
    context = [1, 5, 9, 13, 2, 7]
    first = draft.propose(context, 5)
    assert first == manual_greedy(model, context, 5)
    # the next call shares a prefix (2 accepted + a different token): cache cropped, not rebuilt
    later = context + first[:2] + [(first[2] + 1) % 64]
    assert draft.propose(later, 4) == manual_greedy(model, later, 4)
    assert len(draft._cached_ids) == len(later) + 3
    shorter = context[:3]
    assert draft.propose(shorter, 2) == manual_greedy(model, shorter, 2)
    draft.reset()
    assert draft._cache is None and draft.propose(context, 5) == first


def test_neural_is_not_bridged_with_one_tokenizer(mistral_tok):
    draft = make_draft("neural", model=tiny_llama(64), tokenizer=mistral_tok, verifier_tokenizer=mistral_tok)
    assert draft.bridged is False


def test_neural_bridge_reencodes_the_drafts_text(mistral_tok, bpe_tok):
    model = tiny_llama(len(bpe_tok), seed=3)
    with torch.no_grad():  # a zero head row scores 0: keep the random draft on printable ASCII tokens
        for i in range(len(bpe_tok)):
            piece = bpe_tok.decode([i])
            if i in bpe_tok.all_special_ids or not (piece.isascii() and piece.isprintable()):
                model.lm_head.weight[i].zero_()
    draft = make_draft("neural", model=model, tokenizer=bpe_tok, verifier_tokenizer=mistral_tok)
    assert draft.bridged is True
    context = mistral_tok("Now is the winter of our").input_ids
    ids = draft.propose(context, 6)
    assert 0 < len(ids) <= 6 and all(0 <= t < 32000 for t in ids)
    # the proposal is the draft's own greedy text, re-encoded for the verifier
    text = mistral_tok.decode(context, skip_special_tokens=True)
    draft_ids = bpe_tok.encode(text)
    guess_text = bpe_tok.decode(draft_ids + manual_greedy(model, draft_ids, 6))[len(text):]
    proposed = mistral_tok.decode(context + ids, skip_special_tokens=True)[len(text):]
    assert proposed and guess_text.startswith(proposed.rstrip())


def test_neural_rejects_a_non_model():
    with pytest.raises(DraftError, match="neural"):
        make_draft("neural", model=None)
    with pytest.raises(DraftError, match="model=int"):
        make_draft("neural", model=42)


def test_olifant_loads_either_backend_from_a_trained_path(tmp_path):
    """A trainer-written TiMBL *.ibase and a native *.igtree draft the same tokens (regression: .ibase paths)."""
    from pydoc_data.topics import topics

    from workers.corpora import TextSource
    from workers.tokenizer import load_tokenizer
    from workers.trainer import train_instance_base

    corpus = tmp_path / "c.txt"
    corpus.write_text("\n\n".join(topics[k] for k in sorted(topics)[:6]))
    src = TextSource(name="c", path=str(corpus))
    native = train_instance_base(src, "mistral", tmp_path, backend="native")
    timbl = train_instance_base(src, "mistral", tmp_path, backend="timbl")
    assert timbl.path.endswith(".ibase") and native.path.endswith(".igtree")
    a, b = make_draft("olifant", ibase=native.path), make_draft("olifant", ibase=timbl.path)
    tok = load_tokenizer("mistral")
    ids = tok(topics[sorted(topics)[2]][:400]).input_ids
    for end in range(1, len(ids), 7):
        assert a.propose(ids[:end], 4) == b.propose(ids[:end], 4)

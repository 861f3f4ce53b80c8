"""The neural draft: a small causal LM drafting greedily, bridged through text when vocabularies differ."""

from __future__ import annotations

import pytest
import torch
from transformers import LlamaConfig, LlamaForCausalLM

from tests.workers.conftest import bpe_tokenizer
from workers.drafts import make_draft
from workers.errors import DraftError

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
    cfg = LlamaConfig(
        vocab_size=vocab,
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=1,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=256,
    )
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
    guess_text = bpe_tok.decode(draft_ids + manual_greedy(model, draft_ids, 6))[len(text) :]
    proposed = mistral_tok.decode(context + ids, skip_special_tokens=True)[len(text) :]
    assert proposed and guess_text.startswith(proposed.rstrip())


def test_neural_rejects_a_non_model():
    with pytest.raises(DraftError, match="neural"):
        make_draft("neural", model=None)
    with pytest.raises(DraftError, match="model=int"):
        make_draft("neural", model=42)

"""Small random causal LMs for the tests: real transformers models, a few layers wide, made in a second on CPU."""

from __future__ import annotations

import copy

import torch
from transformers import LlamaConfig, LlamaForCausalLM, MistralConfig, MistralForCausalLM

VOCAB = 32000  # the real Mistral vocabulary, so the word-level n-gram and the text bridge run on real text


def tiny_lm(kind: str, seed: int, vocab: int = VOCAB, hidden: int = 48, layers: int = 2, echo: float = 0.0):
    """A small random causal LM (fp32, eval) of the given family.

    `echo` adds that much of the input embedding to the output head: the model then tends to repeat recent
    tokens (as real LMs do at length), so in-session drafts see both acceptances and rejections.
    """
    torch.manual_seed(seed)
    cfg_cls, model_cls = (LlamaConfig, LlamaForCausalLM) if kind == "llama" else (MistralConfig, MistralForCausalLM)
    cfg = cfg_cls(
        vocab_size=vocab,
        hidden_size=hidden,
        intermediate_size=2 * hidden,
        num_hidden_layers=layers,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=512,
    )
    model = model_cls(cfg).eval()
    with torch.no_grad():
        model.lm_head.weight.add_(echo * model.model.embed_tokens.weight)
    return model


def noisy_copy(model, noise: float = 0.004, seed: int = 7):
    """The model with small Gaussian noise on every weight: a draft that agrees often, not always."""
    torch.manual_seed(seed)
    draft = copy.deepcopy(model)
    with torch.no_grad():
        for p in draft.parameters():
            p.add_(noise * torch.randn_like(p))
    return draft

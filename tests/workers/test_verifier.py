"""The verifier: device resolution, uncached and cached forwards that agree, cropping, loading."""

from __future__ import annotations

import pytest
import torch
from transformers import MistralConfig, MistralForCausalLM

from workers.errors import ModelError
from workers.verifier import Verifier, load_verifier, resolve_device

pytestmark = pytest.mark.usefixtures("one_thread")


@pytest.fixture(scope="module")
def model():
    torch.manual_seed(0)
    cfg = MistralConfig(
        vocab_size=128,
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=256,
    )
    return MistralForCausalLM(cfg).eval()


IDS = [1, 17, 45, 3, 99, 12, 64, 7, 30, 2, 81]


def test_resolve_device_here():
    expected = "cuda" if torch.cuda.is_available() else "mps" if torch.backends.mps.is_available() else "cpu"
    assert resolve_device("auto").type == expected
    assert resolve_device("cpu") == torch.device("cpu")
    with pytest.raises(ModelError, match="'tpu' is not accepted; give one of auto, cuda, mps, cpu"):
        resolve_device("tpu")
    if not torch.cuda.is_available():
        with pytest.raises(ModelError, match="'cuda' is not available"):
            resolve_device("cuda")


def test_full_forward_and_keep(model):
    v = Verifier(model)
    full = v.logits(IDS)
    assert full.shape == (len(IDS), 128)
    assert torch.allclose(v.logits(IDS, keep=3), full[-3:], atol=1e-6)
    v.sync()  # a no-op on cpu, a barrier on cuda/mps


def test_prefill_extend_equal_the_full_forward(model):
    v = Verifier(model)
    full = v.logits(IDS)
    head = v.prefill(IDS[:5])
    assert v.cached_len == 5
    tail = v.extend(IDS[5:8])
    last = v.extend(IDS[8:], keep=1)
    assert v.cached_len == len(IDS)
    assert torch.allclose(head, full[:5], atol=1e-5)
    assert torch.allclose(tail, full[5:8], atol=1e-5)
    assert torch.allclose(last, full[-1:], atol=1e-5)


def test_crop_drops_rejected_positions(model):
    v = Verifier(model)
    v.prefill(IDS[:6])
    v.extend([5, 6, 7, 8])  # a draft, of which only the first token is kept
    v.crop(7)
    assert v.cached_len == 7
    again = v.extend(IDS[7:])
    other = v.logits(IDS[:6] + [5] + IDS[7:])
    assert torch.allclose(again, other[7:], atol=1e-5)
    v.crop(20)  # longer than the cache: nothing to drop
    assert v.cached_len == 7 + len(IDS[7:])


def test_extend_before_prefill_is_an_error(model):
    with pytest.raises(RuntimeError, match="before prefill"):
        Verifier(model).extend([1])


def test_load_verifier_from_a_directory(model, tmp_path):
    model.save_pretrained(tmp_path / "tiny")
    v = load_verifier(str(tmp_path / "tiny"), dtype="float32", device="cpu")
    assert v.device.type == "cpu" and v.vocab_size == 128
    assert torch.allclose(v.logits(IDS), Verifier(model).logits(IDS), atol=1e-6)


def test_load_verifier_errors_are_one_line(tmp_path):
    with pytest.raises(ModelError) as err:
        load_verifier(str(tmp_path / "missing-model"))
    assert "missing-model" in str(err.value) and "\n" not in str(err.value)
    with pytest.raises(ModelError, match="dtype 'float33' is not accepted"):
        load_verifier(str(tmp_path), dtype="float33")

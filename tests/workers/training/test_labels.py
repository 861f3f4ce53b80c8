"""Verifier labels: batched, chunked teacher forcing equals the verifier's own argmax."""

from __future__ import annotations

import json
from itertools import pairwise
from pathlib import Path

import numpy as np
import pytest
import torch
from transformers import MistralConfig, MistralForCausalLM

from workers.training.label_progress import progress_file, read_progress
from workers.training.labels import (
    NO_LABEL,
    agreement,
    label_corpus,
    label_positions,
    load_labelled,
    windows,
)
from workers.verifier import Verifier

pytestmark = pytest.mark.usefixtures("one_thread")


@pytest.fixture(scope="module")
def verifier():
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
    return Verifier(MistralForCausalLM(cfg).eval())


def corpus(lengths, seed=0):
    """Documents of these lengths (BOS = 1 first), flat, with offsets."""
    rng = np.random.default_rng(seed)
    docs = [np.concatenate([[1], rng.integers(3, 128, size=n - 1)]) for n in lengths]
    offsets = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
    return np.concatenate(docs).astype(np.uint16), offsets


def full_argmax(verifier, ids) -> list[int]:
    """The verifier's argmax after every token of `ids`, one plain full forward."""
    return verifier.logits([int(t) for t in ids]).argmax(-1).tolist()


def test_windows_label_every_target_once():
    offsets = np.array([0, 5, 6, 40, 41 + 100], dtype=np.int64)
    seen = []
    for w in windows(offsets, chunk_tokens=16, overlap_tokens=4):
        assert w.end - w.start <= 16 and w.first - w.start >= 1
        assert w.first == w.start + 1 or w.first - w.start == 4  # a document's head, or the overlap's context
        seen.extend(range(w.first, w.end))
    targets = [p for a, b in pairwise(offsets) for p in range(a + 1, b)]
    assert sorted(seen) == targets and len(seen) == len(set(seen))
    with pytest.raises(ValueError, match="overlap_tokens"):
        list(windows(offsets, 8, 7))


def test_labels_equal_the_full_forward_argmax_when_documents_fit(verifier):
    tokens, offsets = corpus([30, 2, 17, 45])
    labels = label_positions(verifier, tokens, offsets, chunk_tokens=64, overlap_tokens=8, batch_chunks=3)
    for a, b in pairwise(offsets):
        assert labels[a] == NO_LABEL
        assert labels[a + 1 : b].tolist() == full_argmax(verifier, tokens[a : b - 1])


def test_long_documents_are_labelled_from_their_window(verifier):
    tokens, offsets = corpus([70, 9])
    labels = label_positions(verifier, tokens, offsets, chunk_tokens=24, overlap_tokens=8, batch_chunks=2)
    for w in windows(offsets, 24, 8):  # each label: the argmax of a plain forward over its window
        expect = full_argmax(verifier, tokens[w.start : w.end - 1])
        assert labels[w.first : w.end].tolist() == expect[w.first - 1 - w.start :]
    for p in range(1, 70):  # at least 8 tokens of context (or the whole prefix)
        start = max(w.start for w in windows(offsets, 24, 8) if w.first <= p < w.end)
        assert p - start >= min(p, 8)
    assert 0.0 <= agreement(tokens, labels) <= 1.0


def test_passes_packed_by_length_give_the_labels_of_one_window_a_pass(verifier):
    """Windows go longest first, as many a pass as fit the padded budget: the labels are those of one window per
    pass, whatever the packing; progress reaches every labelled position."""
    tokens, offsets = corpus([70, 3, 9, 30, 2, 17])
    seen = []
    packed = label_positions(
        verifier,
        tokens,
        offsets,
        chunk_tokens=24,
        overlap_tokens=8,
        batch_chunks=3,
        on_progress=lambda *a: seen.append(a),
    )
    single = label_positions(verifier, tokens, offsets, chunk_tokens=24, overlap_tokens=8, batch_chunks=1)
    assert packed.tolist() == single.tolist()
    total = sum(b - a - 1 for a, b in pairwise(offsets))
    assert seen[-1] == (total, total) and [d for d, _ in seen] == sorted(d for d, _ in seen)
    assert len(seen) < len(list(windows(offsets, 24, 8)))  # short windows shared a pass


def test_label_corpus_writes_a_manifest(verifier, tmp_path, mistral_tok):
    from workers.contracts import LabelJob
    from workers.corpora import TextSource

    src = tmp_path / "c.txt"
    src.write_text("The cat sat on the mat.\n\nA second document, a little longer than the first one.")
    tiny = Verifier(
        MistralForCausalLM(
            MistralConfig(
                vocab_size=32000,
                hidden_size=16,
                intermediate_size=32,
                num_hidden_layers=1,
                num_attention_heads=2,
                num_key_value_heads=1,
                max_position_embeddings=64,
            )
        ).eval()
    )
    job = LabelJob(
        key="ab" * 32,
        corpus=TextSource(name="c", path=str(src)),
        out_dir=str(tmp_path / "out"),
        max_tokens=20,
        chunk_tokens=8,
        overlap_tokens=2,
        batch_chunks=2,
    )
    rec = label_corpus(tiny, mistral_tok, job)
    tokens, offsets, labels = load_labelled(rec.path)
    assert rec.n_tokens == len(tokens) == 20 and rec.n_labelled == 20 - rec.n_docs
    assert json.loads(Path(rec.path).read_text())["chunk_tokens"] == 8
    assert labels.tolist() == label_positions(tiny, tokens, offsets, chunk_tokens=8, overlap_tokens=2).tolist()
    assert rec.ended_at >= rec.started_at and rec.wall_s > 0
    progress = read_progress(progress_file(job.out_dir, job.key))  # what the driver's progress line reads
    assert progress["done"] == progress["total"] == rec.n_labelled and progress["name"] == "c"

"""Instances: tokenising a corpus into a token file and windowing it, with the real Mistral tokenizer."""

from __future__ import annotations

import numpy as np
import pytest

from workers.corpora import TextSource
from workers.errors import CorpusError
from workers.igtree import PAD
from workers.igtree.instances import (
    instance_offset,
    make_instances,
    shard_bounds,
    token_dtype,
    tokenize_source,
)

TEXT = "Hello world, this is one.\n\nSecond doc here.\n\nThird.\n"


@pytest.fixture(scope="module")
def tok():
    from workers.models.tokenizer import load_tokenizer

    return load_tokenizer("mistral")


@pytest.fixture
def corpus(tmp_path):
    path = tmp_path / "c.txt"
    path.write_text(TEXT)
    return TextSource(name="c", path=str(path))


def test_token_file_holds_every_document_with_bos(corpus, tok, tmp_path):
    tf = tokenize_source(corpus, tok, tmp_path / "out", batch_docs=2)  # two batches
    expected = tok(["Hello world, this is one.", "Second doc here.", "Third."]).input_ids
    assert tf.dtype == np.dtype(np.uint16).str and token_dtype(tok) == np.uint16
    assert tf.tokens().tolist() == [t for doc in expected for t in doc]
    assert tf.offsets().tolist() == [0, len(expected[0]), len(expected[0]) + len(expected[1]), tf.n_tokens]
    assert tf.n_docs == 3 and tf.n_instances == tf.n_tokens - 3
    assert isinstance(tf.tokens(), np.memmap)


def test_windows_pad_document_starts_and_never_target_bos(corpus, tok, tmp_path):
    tf = tokenize_source(corpus, tok, tmp_path)
    tokens, offsets = tf.tokens(), tf.offsets()
    contexts, targets = make_instances(tokens, offsets, window=4)
    assert contexts.shape == (tf.n_instances, 4) and contexts.dtype == np.int32
    first = tokens[: offsets[1]].tolist()
    assert contexts[0].tolist() == [PAD, PAD, PAD, 1] and targets[0] == first[1]
    assert contexts[3].tolist() == first[:4] and targets[3] == first[4]
    second = len(first) - 1  # index of the second document's first instance
    assert contexts[second].tolist() == [PAD, PAD, PAD, 1]  # no window crosses a document boundary
    assert 1 not in targets.tolist()  # BOS is a context value, never a target


def test_instances_in_ranges_concatenate_to_the_whole(corpus, tok, tmp_path):
    tf = tokenize_source(corpus, tok, tmp_path)
    tokens, offsets = tf.tokens(), tf.offsets()
    whole = make_instances(tokens, offsets, window=3)
    bounds = shard_bounds(tf.n_tokens, 4)
    parts = [make_instances(tokens, offsets, 3, lo, hi) for lo, hi in bounds]
    assert np.array_equal(np.concatenate([p[0] for p in parts]), whole[0])
    assert np.array_equal(np.concatenate([p[1] for p in parts]), whole[1])
    for lo, _ in bounds:
        assert instance_offset(offsets, lo) == len(make_instances(tokens, offsets, 3, 0, lo)[1])


def test_max_tokens_cuts_the_stream(corpus, tok, tmp_path):
    tf = tokenize_source(corpus, tok, tmp_path, max_tokens=10, batch_docs=1)
    full = tokenize_source(corpus, tok, tmp_path / "full")
    assert tf.n_tokens == 10
    assert tf.tokens().tolist() == full.tokens()[:10].tolist()
    assert tf.offsets()[-1] == 10


def test_empty_corpus_is_a_clear_error(tmp_path, tok):
    empty = tmp_path / "empty.txt"
    empty.write_text("\n\n   \n")
    with pytest.raises(CorpusError, match="empty.txt gave no instances"):
        tokenize_source(TextSource(name="empty", path=str(empty)), tok, tmp_path)
    assert not list(tmp_path.glob("empty.tokens*"))  # nothing half-written


def test_large_vocab_uses_uint32():
    class Big:
        def __len__(self):
            return 100_000

    assert token_dtype(Big()) == np.uint32


@pytest.mark.parametrize("max_tokens", [None, 2, 9, 23, 10_000])
def test_tokenising_by_document_ranges_gives_the_identical_file(tok, tmp_path, max_tokens):
    import pydoc_data.topics

    from workers.igtree.instances import tokenize_parallel
    from workers.igtree.partitioned import local_map

    topics = pydoc_data.topics.topics
    path = tmp_path / "t.txt"
    path.write_text("\n\n".join(topics[k][:300] for k in sorted(topics)[:40]))
    source = TextSource(name="t", path=str(path))
    whole = tokenize_source(source, tok, tmp_path / "whole", max_tokens=max_tokens)
    parts = tokenize_parallel(
        source, "mistral", tmp_path / "parts", local_map, workers=3, docs_per_task=7, max_tokens=max_tokens
    )
    assert (parts.n_tokens, parts.n_docs) == (whole.n_tokens, whole.n_docs)
    assert np.array_equal(parts.tokens(), whole.tokens()) and np.array_equal(parts.offsets(), whole.offsets())
    with pytest.raises(CorpusError, match="no instances"):  # one token: no instance either way
        tokenize_parallel(source, "mistral", tmp_path / "one", local_map, workers=2, docs_per_task=7, max_tokens=1)


def test_a_capped_part_stops_at_the_cap(tmp_path):
    """Under `max_tokens` a document range is tokenised only up to the batch that reaches the cap: a 10^6-token
    prefix of a large corpus does not tokenise the whole of its first range."""
    from workers.igtree.instances import tokenize_docs

    path = tmp_path / "t.txt"
    path.write_text("\n\n".join(f"paragraph {i} of the text, with a few words in it." for i in range(200)))
    source = TextSource(name="t", path=str(path))
    whole = tokenize_docs(source, "mistral", tmp_path / "a", 0, 0, 200, batch_docs=10)
    capped = tokenize_docs(source, "mistral", tmp_path / "b", 0, 0, 200, batch_docs=10, max_tokens=25)
    assert whole["n_docs"] == 200 and capped["n_docs"] == 10 and 25 <= capped["n_tokens"] < whole["n_tokens"]
    lengths = np.fromfile(capped["lengths_path"], dtype=np.int64)
    assert np.array_equal(lengths, np.fromfile(whole["lengths_path"], dtype=np.int64)[:10])

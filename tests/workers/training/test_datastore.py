"""REST's datastore: suffix array, longest-suffix search, trie's heaviest path, build from a real corpus file."""

from __future__ import annotations

import numpy as np
import pytest

from workers.contracts import ArtifactJob
from workers.corpora import TextSource
from workers.training.datastore import (
    Datastore,
    DatastoreError,
    build,
    frequent_path,
    match_range,
    save_datastore,
    suffix_array,
)


def is_mapped(array: np.ndarray) -> bool:
    """Whether the array's memory is a mapped file (its base chain ends in an mmap)."""
    import mmap

    while isinstance(array, np.ndarray):
        array = array.base
    return isinstance(array, mmap.mmap)


def naive_sa(tokens: list[int]) -> list[int]:
    return sorted(range(len(tokens)), key=lambda i: tokens[i:])


@pytest.mark.parametrize("alphabet", [2, 7, 32000])
def test_suffix_array_equals_a_naive_sort_on_large_alphabets(alphabet):
    rng = np.random.default_rng(alphabet)
    for n in (1, 2, 50, 400):
        tokens = rng.integers(0, alphabet, size=n)
        assert suffix_array(tokens).tolist() == naive_sa(tokens.tolist())
    assert suffix_array(np.array([31999, 0, 31999, 0, 17])).tolist() == naive_sa([31999, 0, 31999, 0, 17])


def naive_longest(tokens: list[int], context: list[int], max_match: int, min_match: int):
    """REST's loop: the longest context suffix occurring with a token after it, longest first."""
    for length in range(min(max_match, len(context)), min_match - 1, -1):
        q = context[len(context) - length :]
        starts = [i for i in range(len(tokens) - length) if tokens[i : i + length] == q]
        if starts:
            return length, starts
    return None


def naive_draft(tokens: list[int], context: list[int], k: int, max_match=16, min_match=2, max_occ=5000) -> list[int]:
    found = naive_longest(tokens, context, max_match, min_match)
    if found is None:
        return []
    length, starts = found
    starts = sorted(starts, key=lambda i: tokens[i:])[:max_occ]  # suffix-array order
    conts = [tokens[i + length : i + length + k] for i in starts]
    path: list[int] = []
    for depth in range(k):
        counts: dict[int, int] = {}
        for c in conts:
            if len(c) > depth and c[:depth] == path:
                counts[c[depth]] = counts.get(c[depth], 0) + 1
        if not counts:
            break
        path.append(min(counts, key=lambda t: (-counts[t], t)))
    return path


def test_draft_equals_rest_retrieval_done_naively(tmp_path):
    rng = np.random.default_rng(3)
    checked = nonempty = 0
    for trial in range(6):
        alphabet = (3, 5, 40)[trial % 3]
        tokens = rng.integers(0, alphabet, size=int(rng.integers(30, 300))).tolist()
        save_datastore(np.array(tokens), tmp_path / f"d{trial}.npy")
        store = Datastore.open(tmp_path / f"d{trial}.npy")
        for _ in range(40):
            context = rng.integers(0, alphabet, size=int(rng.integers(0, 25))).tolist()
            for k, max_occ in ((1, 5000), (3, 2), (8, 5000)):
                expected = naive_draft(tokens, context, k, max_occ=max_occ)
                assert store.draft(context, k, max_occurrences=max_occ) == expected, (tokens, context, k)
                checked += 1
                nonempty += bool(expected)
    assert checked == 720 and 100 < nonempty < 720


def test_longest_suffix_wins_and_its_most_frequent_continuation(tmp_path):
    #          0  1  2  3  4  5  6  7  8  9 10 11 12 13
    tokens = [1, 2, 3, 9, 4, 2, 3, 7, 2, 3, 7, 5, 2, 3]
    save_datastore(np.array(tokens), tmp_path / "d.npy")
    store = Datastore.open(tmp_path / "d.npy")
    assert store.draft([2, 3], 2) == [7, 2]  # "2 3" -> 9 once, 7 twice; the trailing "2 3" has no next
    assert store.draft([1, 2, 3], 2) == [9, 4]  # the 3-token suffix occurs: only its continuation counts
    assert store.draft([8, 8, 1, 2, 3], 3, max_match=2) == [7, 2, 3]  # only 2 tokens may match
    assert store.draft([6, 3], 2) == [] and store.draft([3], 2) == []  # min_match 2
    assert store.draft([5, 3], 2, min_match=1) == [7, 2]  # "3" -> 9 4, 7 2, 7 5, (end): 7, then 2 (tie, smaller)
    assert (
        match_range(store.tokens, store.sa, np.array([2, 3], dtype=np.int32))[1]
        - match_range(store.tokens, store.sa, np.array([2, 3], dtype=np.int32))[0]
        == 4
    )


def test_frequent_path_breaks_ties_to_the_smaller_id():
    conts = np.array([[5, 1], [4, 2], [5, 3], [4, -1]])
    assert frequent_path(conts, 2) == [4, 2]


def test_open_refuses_a_file_that_is_not_a_datastore(tmp_path):
    np.save(tmp_path / "x.npy", np.zeros(4))
    with pytest.raises(DatastoreError, match="not a \\(2, n\\)"):
        Datastore.open(tmp_path / "x.npy")
    with pytest.raises(DatastoreError, match="cannot be opened"):
        Datastore.open(tmp_path / "missing.npy")


def test_build_from_a_corpus_file_with_the_mistral_tokenizer(tmp_path):
    text = tmp_path / "plays.txt"
    text.write_text("To be, or not to be, that is the question.\n\nTo be, or not to be: the same again.\n")
    info = build(
        ArtifactJob(
            kind="datastore",
            corpus=TextSource(name="plays", path=str(text)),
            tokenizer="mistral",
            out_dir=str(tmp_path / "out"),
            options={"max_tokens": None},
        )
    )
    store = Datastore.open(info.path)
    assert info.kind == "datastore" and info.bytes == (tmp_path / "out" / info.path.split("/")[-1]).stat().st_size
    assert info.meta["tokens"] == store.n_tokens > 20 and info.meta["docs"] == 2 and info.build_s > 0
    assert store.sa.tolist() == naive_sa(store.tokens.tolist())
    assert is_mapped(store.tokens) and is_mapped(store.sa)  # memory-mapped, not read into the process
    from workers.models.tokenizer import load_tokenizer

    tok = load_tokenizer("mistral")
    context = tok("To be, or not").input_ids
    assert tok.decode(store.draft(context, 4)).strip().startswith("to be")

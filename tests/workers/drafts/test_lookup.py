"""The `lookup` draft proposes exactly what transformers' PromptLookupCandidateGenerator proposes."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from transformers.generation.candidate_generator import PromptLookupCandidateGenerator

from workers.drafts import lookup, make_draft
from workers.errors import DraftError

pytestmark = pytest.mark.usefixtures("one_thread")


def transformers_candidates(context: list[int], k: int, max_ngram: int = 2) -> list[int]:
    """The new tokens transformers' prompt lookup proposes after `context` (no length limit, no EOS)."""
    gen = PromptLookupCandidateGenerator(
        num_output_tokens=k, max_matching_ngram_size=max_ngram, max_length=len(context) + 10_000
    )
    ids = torch.tensor([context], dtype=torch.long)
    out, _ = gen.get_candidates(ids)
    return out[0, len(context) :].tolist()


def contexts(n: int, seed: int = 0):
    """Random contexts over small alphabets (many repeats) and a large one (few), of many lengths."""
    rng = np.random.default_rng(seed)
    for i in range(n):
        alphabet = (2, 3, 5, 20, 32000)[i % 5]
        yield [int(t) for t in rng.integers(0, alphabet, size=int(rng.integers(1, 60)))]


@pytest.mark.parametrize("max_ngram", [1, 2, 3])
def test_lookup_proposes_exactly_what_transformers_proposes(max_ngram):
    draft = make_draft("lookup", max_ngram=max_ngram)
    checked = matched = 0
    for context in contexts(400, seed=max_ngram):
        for k in (1, 3, 8):
            expected = transformers_candidates(context, k, max_ngram)
            assert draft.propose(context, k) == expected, (context, k)
            checked += 1
            matched += bool(expected)
    assert checked == 1200 and 200 < matched < 1200  # both outcomes occur: matches and no match


def test_lookup_takes_the_first_match_of_the_longest_ngram():
    draft = make_draft("lookup")
    assert draft.propose([4, 5, 6, 7, 5, 6], 3) == [7, 5, 6]
    assert draft.propose([1, 9, 2, 6, 1, 6], 2) == [1, 6]  # "1 6" has no earlier match; "6" at 3 has 1 6 after it
    assert draft.propose([1, 2, 3, 4, 2, 3], 8) == [4, 2, 3]  # fewer than k near the end
    assert draft.propose([1, 2, 3], 3) == [] and draft.propose([7], 3) == []
    assert draft.propose([5, 5], 0) == []


def test_lookup_min_ngram_refuses_short_matches():
    assert make_draft("lookup", max_ngram=2, min_ngram=2).propose([1, 9, 2, 6, 1, 6], 2) == []
    with pytest.raises(DraftError, match="min_ngram"):
        make_draft("lookup", max_ngram=1, min_ngram=2)
    with pytest.raises(DraftError, match="min_ngram=3 exceeds max_ngram=2"):
        lookup("lookup").parse({"min_ngram": 3})
    assert lookup("lookup").parse({}).identity() == {"max_ngram": 2, "min_ngram": 1}

"""The in-session n-gram draft (token and word units)."""

from __future__ import annotations

import numpy as np
import pytest

from workers.drafts import make_draft
from workers.drafts.ngram import NgramTable

pytestmark = pytest.mark.usefixtures("one_thread")


def test_ngram_chains_the_most_frequent_continuation():
    draft = make_draft("ngram", n=4)
    assert draft.propose([5, 6, 7, 8, 5, 6, 7], 3) == [8, 5, 6]
    assert draft.propose([5, 6, 7, 8, 5, 6, 7], 0) == []


def test_ngram_backs_off_to_shorter_contexts_and_stops_when_nothing_matches():
    draft = make_draft("ngram", n=4)
    assert draft.propose([1, 2, 3, 9, 1, 2], 2) == [3, 9]  # 9 1 2 unseen; 1 2 -> 3, then 1 2 3 -> 9
    draft.reset()
    assert draft.propose([1, 2, 3, 4], 3) == []  # 4 never seen followed by anything


def test_ngram_prefers_frequent_then_recent():
    table = NgramTable(2)
    for unit in [1, 7, 1, 7, 1, 8]:
        table.add(unit)
    assert table.predict([1]) == 7  # 1 -> 7 twice, 1 -> 8 once
    table.add(1)
    table.add(8)
    assert table.predict([1]) == 8  # a 2-2 tie goes to the more recent


def test_ngram_is_incremental_and_equals_a_fresh_rebuild():
    rng = np.random.default_rng(0)
    stream = [int(t) for t in rng.integers(0, 6, size=200)]
    running = make_draft("ngram", n=4)
    for end in range(10, 200, 7):
        fresh = make_draft("ngram", n=4)
        assert running.propose(stream[:end], 5) == fresh.propose(stream[:end], 5)
    assert len(running._table.units) == end  # only what it was shown, each token counted once


def test_ngram_rebuilds_when_the_context_is_not_a_continuation():
    draft = make_draft("ngram", n=3)
    assert draft.propose([1, 2, 3, 1, 2], 1) == [3]
    assert draft.propose([4, 5, 6, 4, 5], 1) == [6]  # a new session without reset(): no stale counts
    assert draft.propose([4, 5, 6, 4], 1) == [5]


def test_word_ngram_drafts_through_text(mistral_tok):
    draft = make_draft("ngram", n=3, unit="word", tokenizer=mistral_tok)
    assert draft.bridged
    context = mistral_tok("the cat sat on the mat and the cat sat on").input_ids
    ids = draft.propose(context, 4)
    assert ids and mistral_tok.decode(context + ids, skip_special_tokens=True).startswith(
        "the cat sat on the mat and the cat sat on the mat"
    )

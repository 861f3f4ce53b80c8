"""The `suffix` draft: SuffixDecoding through arctic-inference's SuffixDecodingCache, one request per generation."""

from __future__ import annotations

import numpy as np
import pytest

from workers.drafts import BuildContext, build_draft, lookup, make_draft
from workers.errors import DraftError
from workers.training.datastore import save_datastore


def test_suffix_drafts_the_continuation_of_the_session():
    draft = make_draft("suffix", min_token_prob=0.0)
    draft.reset()
    assert draft.propose([5, 6, 7, 8, 9, 5, 6, 7], 3) == [8, 9, 5]
    assert draft.propose([5, 6, 7, 8, 9, 5, 6, 7], 0) == []
    assert draft.propose([5, 6, 7, 8, 9, 5, 6, 7, 8, 9], 2) == [5, 6]  # the request grows with the output


def test_adaptive_length_follows_max_spec_factor():
    context = [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 1, 2]
    short = make_draft("suffix", max_spec_factor=1.0, min_token_prob=0.0)
    assert short.propose(context, 8) == [3, 4]  # a 2-token match allows 1.0 x 2 tokens
    long = make_draft("suffix", max_spec_factor=4.0, min_token_prob=0.0)
    assert long.propose(context, 8) == [3, 4, 5, 6, 7, 8, 9, 10]


def test_reset_starts_a_new_request_and_forgets_outputs_unless_remembered():
    first, second = [1, 2, 3, 4, 5, 6], [9, 3, 4]
    for remember, expected in ((False, []), (True, [5, 6])):
        draft = make_draft("suffix", remember_outputs=remember, max_spec_factor=2.0, min_token_prob=0.0)
        draft.reset()
        draft.propose([1, 2], 3)
        draft.propose(first, 3)  # the output 3 4 5 6 enters this request (and the global tree if remembered)
        draft.reset()
        assert draft.propose(second, 2) == expected
        assert len(draft.cache.active_requests) == 1


def test_a_prompt_never_drafts_from_its_own_earlier_outputs_only_from_other_prompts():
    """A sweep runs each prompt once per k and regime: the second run must not draft the first one's output."""
    draft = make_draft("suffix", remember_outputs=True, max_spec_factor=4.0, min_token_prob=0.0)
    prompt, output = [7, 1, 2], [3, 4, 5, 6]
    draft.reset()
    draft.propose(prompt, 3)
    draft.propose(prompt + output, 3)  # the output enters the request
    draft.reset()  # and the global tree
    first = set(draft.cache.cached_requests)
    assert draft.propose([8, 1, 2, 3], 2) == [4, 5]  # another prompt drafts from it
    draft.reset()
    assert draft.propose(prompt, 3) == []
    assert draft.propose(prompt + [3], 2) == []  # the same prompt again: "3 4 5" is no longer there to draft
    draft.reset()
    # one output per prompt: the other prompt's and this run's ("3"); the first run's is gone
    assert len(draft.cache.cached_requests) == 2 and first.isdisjoint(draft.cache.cached_requests)
    assert draft.propose([8, 3], 2) == []


def test_remembered_outputs_are_bounded_and_the_oldest_go_first():
    """Only the newest max_remembered_outputs outputs stay in the global tree; a seeding corpus is never evicted."""
    draft = make_draft(
        "suffix",
        remember_outputs=True,
        max_remembered_outputs=2,
        corpus=[[40, 41, 42, 43]],
        max_spec_factor=2.0,
        min_token_prob=0.0,
    )
    for start in (10, 20, 30):  # three generations: outputs start+1 start+2 start+3
        draft.reset()
        draft.propose([start], 3)
        draft.propose([start, start + 1, start + 2, start + 3], 3)
    draft.reset()
    assert len(draft.cache.cached_requests) == 1 + 2  # the corpus and the 2 newest outputs
    assert draft.propose([99, 11, 12], 1) == []  # the oldest output was evicted
    assert draft.propose([99, 11, 12, 21, 22], 1) == [23]  # the newer ones remain
    assert draft.propose([99, 11, 12, 21, 22, 41, 42], 1) == [43]  # and the corpus
    with pytest.raises(DraftError, match="max_remembered_outputs=0"):
        make_draft("suffix", remember_outputs=True, max_remembered_outputs=0)


def test_the_bound_enters_the_cell_key_only_when_outputs_are_remembered():
    options = lookup("suffix").options
    assert "max_remembered_outputs" not in options().identity()
    remembering = options(remember_outputs=True, max_remembered_outputs=5).identity()
    assert remembering["max_remembered_outputs"] == 5 and remembering["remembers"] == "other prompts"
    assert "remembers" not in options().identity()


def test_a_context_that_does_not_continue_the_request_starts_a_new_one():
    draft = make_draft("suffix", min_token_prob=0.0)
    assert draft.propose([1, 2, 3, 1, 2], 1) == [3]
    assert draft.propose([4, 5, 6, 4, 5], 1) == [6]  # no reset(): still no stale tokens
    assert draft.propose([4, 5, 6, 4], 1) == [5] and len(draft.cache.active_requests) == 1


def test_a_corpus_seeds_the_global_tree(tmp_path):
    path = tmp_path / "c.rest.npy"
    save_datastore(np.array([7, 8, 9, 10, 11, 12]), path)
    draft = build_draft(
        "suffix",
        {"corpus": "plays", "min_token_prob": 0.0, "max_spec_factor": 2.0},
        BuildContext(artifacts={"datastore": str(path)}),
    )
    assert draft.corpus_tokens == 6
    draft.reset()
    assert draft.propose([1, 8, 9], 3) == [10, 11, 12]
    from_lists = make_draft("suffix", corpus=[[7, 8, 9, 10]], min_token_prob=0.0)
    assert from_lists.propose([3, 9], 3) == [10]


def test_suffix_options():
    opts = lookup("suffix").parse({"max_spec_factor": 2.0, "min_token_prob": 0.2})
    assert opts.requires() == {} and opts.identity()["max_spec_factor"] == 2.0
    assert set(lookup("suffix").parse({"corpus": "plays"}).requires()) == {"datastore"}
    with pytest.raises(DraftError, match="max_spec_factor"):
        make_draft("suffix", max_spec_factor=0)
    with pytest.raises(DraftError, match="min_token_prob"):
        lookup("suffix").parse({"min_token_prob": 1.5})

"""The paper's 4-gram baseline (§5.3): word 4-grams over the session, the first sub-token of each word."""

from __future__ import annotations

import pytest

from workers.drafts.continuation import continuation_ids
from workers.drafts.ngram import NgramDraft
from workers.drafts.ngram_paper import PaperNgramDraft, first_subtoken
from workers.errors import DraftError

LOOP = "the cat sat on the mat . the cat sat on the"


def _ids(tok, text: str) -> list[int]:
    return tok(text).input_ids  # with BOS, as the runner encodes prompts


def test_single_token_words_draft_the_next_words(mistral_tok):
    draft = PaperNgramDraft(tokenizer=mistral_tok)
    got = draft.propose(_ids(mistral_tok, LOOP), k=3)
    # "on the" -> "mat", then "the mat" -> ".", then "mat ." -> "the": one token each
    assert mistral_tok.convert_ids_to_tokens(got) == ["▁mat", "▁.", "▁the"]
    assert draft.bridged and draft.name == "ngram-paper"


def test_multi_token_word_keeps_only_its_first_sub_token(mistral_tok):
    text = "we saw the hippopotamus swim . then we saw the"
    first = mistral_tok.convert_ids_to_tokens(continuation_ids(mistral_tok, "a", " hippopotamus"))
    assert len(first) >= 2  # the word really is several sub-tokens in Mistral's vocabulary
    paper = PaperNgramDraft(tokenizer=mistral_tok).propose(_ids(mistral_tok, text), k=2)
    # the paper's draft: first piece of "hippopotamus", then the first piece of the next word "swim"
    assert mistral_tok.convert_ids_to_tokens(paper) == [first[0], "▁swim"]
    # greenspec's word n-gram keeps every sub-token: its two drafts are the word's first two pieces
    full = NgramDraft(n=4, unit="word", tokenizer=mistral_tok).propose(_ids(mistral_tok, text), k=2)
    assert mistral_tok.convert_ids_to_tokens(full) == first[:2] and paper[0] == full[0] and paper[1] != full[1]


@pytest.mark.parametrize("word", ["hippopotamus", "Rome", "(1994)", "well-known", "naïve", "3,000", "Ħ"])
def test_first_subtoken_equals_encoding_in_context(mistral_tok, word):
    context = "In the spring of that year the committee wrote that"
    in_context = continuation_ids(mistral_tok, context, " " + word)
    assert first_subtoken(mistral_tok, word) == in_context[0]


def test_session_grows_with_verifier_output_and_resets(mistral_tok):
    draft = PaperNgramDraft(tokenizer=mistral_tok)
    assert draft.propose(_ids(mistral_tok, "one two three four"), k=2) == []  # nothing seen twice yet
    ids = _ids(mistral_tok, "one two three four one two three")
    assert mistral_tok.convert_ids_to_tokens(draft.propose(ids, k=1)) == ["▁four"]
    # a new prompt that does not extend the session rebuilds the table from it alone
    draft.reset()
    assert draft.propose(_ids(mistral_tok, "five six seven"), k=2) == []


def test_incomplete_last_word_is_context_not_counted(mistral_tok):
    # "hippopot" is cut mid-word: it is the history's last word but not yet a counted unit
    ids = mistral_tok("a b hippopotamus c a b hippopotamus").input_ids
    draft = PaperNgramDraft(tokenizer=mistral_tok)
    cut = ids[:-1]
    assert mistral_tok.decode(cut, skip_special_tokens=True).split()[-1] != "hippopotamus"
    draft.propose(cut, k=1)
    assert draft._table.units == ["a", "b", "hippopotamus", "c", "a", "b"]


def test_options_are_checked():
    with pytest.raises(DraftError, match="needs tokenizer"):
        PaperNgramDraft()
    with pytest.raises(DraftError, match="n=1"):
        PaperNgramDraft(tokenizer=object(), n=1)


def test_k_zero_and_empty_context(mistral_tok):
    draft = PaperNgramDraft(tokenizer=mistral_tok)
    assert draft.propose(_ids(mistral_tok, LOOP), k=0) == [] and draft.propose([], k=3) == []


@pytest.mark.parametrize("cached", [False, True], ids=["uncached", "cached"])
@pytest.mark.parametrize("k", [1, 3, 5])
def test_speculative_output_equals_plain_greedy(mistral_tok, one_thread, k, cached):
    from tests.tiny_models import tiny_lm
    from workers.decoding import greedy_reference, speculative_generate
    from workers.verifier import Verifier

    verifier = Verifier(tiny_lm("mistral", seed=5, echo=1.0))  # echo: it repeats recent tokens, so drafts land
    prompt = mistral_tok(LOOP + " mat . the cat sat on the").input_ids
    ref = greedy_reference(verifier, prompt, 16)
    res = speculative_generate(verifier, PaperNgramDraft(tokenizer=mistral_tok), prompt, 16, k, cached)
    assert list(res.tokens) == ref and res.bridged
    assert 0 < res.accepted < res.drafted  # here: " the" repeated is drafted right, a word of sub-tokens is not

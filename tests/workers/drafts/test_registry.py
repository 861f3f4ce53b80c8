"""The draft registry: names, make_draft, options and shared helpers."""

from __future__ import annotations

import pytest

from workers.drafts import Draft, lookup, make_draft, names
from workers.drafts.continuation import continuation_ids
from workers.errors import DraftError
from workers.interfaces import common_prefix_len

pytestmark = pytest.mark.usefixtures("one_thread")


def test_registry_names_and_protocol():
    assert names()[:4] == ("plain", "ngram", "olifant", "neural")
    for name, opts in (("plain", {}), ("ngram", {"n": 3})):
        draft = make_draft(name, **opts)
        assert isinstance(draft, Draft) and draft.name == name and draft.bridged is False


def test_unknown_draft_names_the_accepted_ones():
    with pytest.raises(DraftError, match=r"unknown draft 'medusa' \(known: plain, ngram, olifant, neural"):
        make_draft("medusa")


def test_every_entry_parses_its_options_and_refuses_unknown_keys():
    for name in names():
        entry = lookup(name)
        assert entry.name == name and issubclass(entry.cls, Draft)
        with pytest.raises(DraftError, match=rf"draft '{name}': unknown key 'bogus'"):
            entry.parse(
                {"bogus": 1, "corpus": "c", "model": "m"}
                if name in ("olifant", "neural", "rest", "hybrid")
                else {"bogus": 1}
            )


def test_options_identity_replaces_corpus_by_artifact():
    opts = lookup("olifant").parse({"corpus": "wiki"})
    assert opts.identity() == {} and opts.corpora() == {"wiki"}
    assert {r.artifact for r in opts.requires().values()} == {"ibase"}
    assert lookup("ngram").parse({"n": 3}).identity() == {"n": 3, "unit": "token"}
    with pytest.raises(DraftError, match="n: Input should be greater than or equal to 2"):
        lookup("ngram").parse({"n": 1})


def test_bad_options_are_a_draft_error():
    with pytest.raises(DraftError, match="'ngram'.*accepted: n, unit, tokenizer"):
        make_draft("ngram", size=4)
    with pytest.raises(DraftError, match="n=1"):
        make_draft("ngram", n=1)
    with pytest.raises(DraftError, match="unit='char'"):
        make_draft("ngram", unit="char")
    with pytest.raises(DraftError, match="needs tokenizer"):
        make_draft("ngram", unit="word")
    with pytest.raises(DraftError, match="needs ibase"):
        make_draft("olifant", ibase=None)
    with pytest.raises(DraftError, match="ibase=int"):
        make_draft("olifant", ibase=3)


def test_continuation_ids_refuses_a_merge(mistral_tok):
    assert mistral_tok.decode(continuation_ids(mistral_tok, "the cat", " sat")) == "sat"
    base = mistral_tok.encode("hel", add_special_tokens=False)
    merged = mistral_tok.encode("hello", add_special_tokens=False)
    if merged[: len(base)] != base:  # "hel" + "lo" re-tokenizes the context: no safe proposal
        assert continuation_ids(mistral_tok, "hel", "lo") == []


def test_common_prefix_len():
    assert common_prefix_len([1, 2, 3], [1, 2, 4]) == 2
    assert common_prefix_len([1, 2], [1, 2, 3]) == 2
    assert common_prefix_len([], [1]) == 0


# olifant -----------------------------------------------------------------------------------------------

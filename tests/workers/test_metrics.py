"""Metrics: acceptance, MAL, speed, ROUGE-L, exact match, draft latency, redundancy, energy."""

from __future__ import annotations

import gzip
import math
from types import SimpleNamespace

import pytest

from workers.drafts import make_draft
from workers.metrics import (
    acceptance_rate,
    cross_document_overlap,
    draft_latency,
    exact_match,
    gzip_ratio,
    lcs_length,
    mal,
    mean_accepted_tokens,
    redundancy,
    rouge_l,
    tokens_per_s,
    within_text_repetition,
    word_ngrams,
)


def test_rouge_l_known_cases():
    assert rouge_l([1, 2, 3, 4], [1, 2, 3, 4]) == 1.0
    assert rouge_l([1, 2, 3, 4], [1, 3, 4, 5]) == pytest.approx(0.75)  # LCS 1 3 4
    # LCS "a c" = 2: P = 2/3, R = 2/5, F = 2PR/(P+R) = 0.5
    assert rouge_l(list("abc"), list("xaycz")) == pytest.approx(0.5)
    assert rouge_l([1, 2], [3, 4]) == 0.0
    assert rouge_l([], []) == 1.0
    assert rouge_l([], [1]) == 0.0 and rouge_l([1], []) == 0.0
    assert rouge_l((5, 6, 7), [7, 6, 5]) == pytest.approx(1 / 3)


def test_lcs_length_equals_the_full_table_on_random_sequences():
    import random

    from workers.metrics import _lcs_table

    rng = random.Random(0)
    for _ in range(500):  # small alphabets: long shared prefixes and suffixes, and repeats across them
        a = [rng.randrange(3) for _ in range(rng.randrange(12))]
        b = (
            a[: rng.randrange(len(a) + 1)]
            + [rng.randrange(3) for _ in range(rng.randrange(6))]
            + a[rng.randrange(len(a) + 1) :]
        )
        assert lcs_length(a, b) == _lcs_table(a, b) == lcs_length(b, a), (a, b)
    assert lcs_length(list(range(300)), list(range(300))) == 300


def test_lcs_length():
    assert lcs_length("ABCBDAB", "BDCABA") == 4  # e.g. B C B A
    assert lcs_length([], [1, 2]) == 0
    # "1 2": the third 1 cannot extend it; the cell that skips a's last item must read the row above, one column on
    assert lcs_length([1, 2, 1], [1, 2]) == 2
    assert lcs_length([1, 2], [1, 2, 1]) == 2 and lcs_length([3], [3]) == 1


def test_exact_match():
    assert exact_match((1, 2, 3), [1, 2, 3])
    assert not exact_match([1, 2, 3], [1, 2])


def test_acceptance_mal_and_speed():
    assert acceptance_rate(6, 8) == 0.75
    assert math.isnan(acceptance_rate(0, 0))  # plain drafts nothing: undefined
    assert mal(accepted=12, rounds=5) == pytest.approx(2.4)
    assert mean_accepted_tokens(17, 5) == pytest.approx(3.4)  # Spec-Bench: bonus tokens included
    assert tokens_per_s(100, 4.0) == 25.0
    assert math.isnan(tokens_per_s(0, 0.0))


def _gzip_ratio_by_hand(text: str) -> float:
    """The definition written out with the standard library: gzip bytes (no timestamp) over UTF-8 bytes."""
    raw = text.encode("utf-8")
    return len(gzip.compress(raw, mtime=0)) / len(raw)


def test_redundancy_summarises_table_5():
    looping = "the cat sat on the mat the cat sat on the mat"
    fresh = "a quick brown fox jumps over one lazy dog today"
    r = redundancy([looping, fresh, ""])
    assert r["texts"] == 2  # the empty text is left out
    # looping: 12 words, 9 4-grams, 6 distinct ("the cat sat on", "cat sat on the", "sat on the mat" recur):
    # 1 - 6/9 = 1/3; fresh: 10 distinct words, 7 distinct 4-grams: 0; mean (1/3 + 0) / 2 = 1/6
    assert r["repetition"] == pytest.approx(1 / 6)
    assert r["overlap"] == 0.0  # the two texts share no 4-gram
    assert r["gzip_ratio"] == pytest.approx((_gzip_ratio_by_hand(looping) + _gzip_ratio_by_hand(fresh)) / 2)
    assert math.isnan(redundancy([fresh])["overlap"]) and redundancy([])["texts"] == 0
    empty = redundancy(["", ""])
    assert empty["texts"] == 0 and all(math.isnan(empty[k]) for k in ("repetition", "overlap", "gzip_ratio"))


def test_redundancy_with_shared_ngrams_and_another_n():
    a, b = "x y z w v", "q x y z w"
    r = redundancy([a, b], n=4)
    # a: {xyzw, yzwv}, b: {qxyz, xyzw}: each shares 1 of 2 -> overlap 1/2; no repeats within a text
    assert r == {
        "texts": 2,
        "repetition": 0.0,
        "overlap": 0.5,
        "gzip_ratio": pytest.approx((_gzip_ratio_by_hand(a) + _gzip_ratio_by_hand(b)) / 2),
    }
    r2 = redundancy(["p q p q p", "p q r"], n=2)
    # "p q p q p": bigrams pq qp pq qp -> 2 distinct of 4: repetition 1/2; "p q r": pq qr, none repeated: 0
    # overlap: text 1 {pq, qp}: pq shared -> 1/2; text 2 {pq, qr}: pq shared -> 1/2
    assert r2["repetition"] == pytest.approx(0.25) and r2["overlap"] == pytest.approx(0.5)


def test_word_ngrams_lowercase_in_order():
    assert word_ngrams("A B c d E", 4) == [("a", "b", "c", "d"), ("b", "c", "d", "e")]
    assert word_ngrams("One two", 2) == [("one", "two")]
    assert word_ngrams("one two three four five") == [("one", "two", "three", "four"), ("two", "three", "four", "five")]
    assert word_ngrams("too short", 3) == []


def test_draft_latency_counts_n_single_token_queries():
    class Counting:
        calls: list[int] = []

        def reset(self):
            self.calls.clear()

        def propose(self, context, k):
            assert list(context) == [1, 2, 3]  # the measured context, as given
            self.calls.append(k)
            return [1]

    draft = Counting()
    draft.calls.append(99)  # a call before the measurement: reset() must clear it
    lat = draft_latency(draft, [1, 2, 3])  # the paper's 50 queries by default
    assert draft.calls == [1] * 50 and lat.n == 50
    assert draft_latency(draft, [1, 2, 3], n=7).n == 7 and draft.calls == [1] * 7
    real = draft_latency(make_draft("ngram"), list(range(100)) * 2, n=10)
    assert real.n == 10 and real.mean_s > 0


def test_draft_latency_times_each_proposal_on_the_clock(monkeypatch):
    clock = {"now_s": 100.0}
    monkeypatch.setattr("workers.metrics.time", SimpleNamespace(perf_counter=lambda: clock["now_s"]))

    class Timed:
        """Each proposal takes 1 ms on the clock, the tenth 91 ms; time between proposals is not theirs."""

        def __init__(self):
            self.n = 0

        def reset(self):
            self.n = 0

        def propose(self, context, k):
            self.n += 1
            clock["now_s"] += 0.091 if self.n == 10 else 0.001
            return [1]

    lat = draft_latency(Timed(), [1, 2, 3], n=10)
    assert lat.n == 10
    assert lat.mean_s == pytest.approx((9 * 0.001 + 0.091) / 10)  # 10 ms
    assert lat.median_s == pytest.approx(0.001)


def test_within_text_repetition():
    assert within_text_repetition("a b a b a", n=2) == 0.5  # bigrams ab ba ab ba: 2 distinct of 4
    assert within_text_repetition("a b c d a b c d a b c d") == pytest.approx(5 / 9)  # 9 4-grams, 4 distinct
    assert within_text_repetition("one two three four five") == 0.0
    assert within_text_repetition("too short") == 0.0
    assert within_text_repetition("A b C d a B c D", n=4) == pytest.approx(1 - 4 / 5)  # case-folded


def test_cross_document_overlap():
    texts = ["a b c d e", "x a b c d", "p q r s t"]
    # text 1: {abcd, bcde} -> abcd shared: 1/2; text 2: {xabc, abcd}: 1/2; text 3: 0
    assert cross_document_overlap(texts) == pytest.approx((0.5 + 0.5 + 0.0) / 3)
    assert cross_document_overlap(["a b c d", "a b c d"]) == 1.0
    assert cross_document_overlap(["short", "texts"]) == 0.0
    # n = 2: {ab, bc} and {bc, cd} share bc: 1/2 each; {xy} shares nothing: 0 -> (1/2 + 1/2 + 0) / 3
    assert cross_document_overlap(["a b c", "b c d", "x y"], n=2) == pytest.approx(1 / 3)


def test_gzip_ratio_is_lower_for_redundant_text():
    redundant = "the same words again " * 50
    varied = " ".join(f"w{i * 7919 % 1000}" for i in range(200))
    assert gzip_ratio(redundant) < 0.1 < gzip_ratio(varied)
    # one byte: gzip's 10-byte header, a 3-byte fixed-Huffman block holding the literal, an 8-byte trailer
    assert gzip_ratio("a") == 21.0
    assert math.isnan(gzip_ratio(""))


# ---------------------------------------------------------------- Table 5 on the paper's definitions (§5.5)


def test_token_ngrams():
    from workers.metrics import token_ngrams

    assert token_ngrams([1, 2, 3, 4, 5]) == [(1, 2, 3, 4), (2, 3, 4, 5)]
    assert token_ngrams([1, 2, 3]) == []


def test_repeated_ngram_share_counts_occurrences_seen_earlier():
    from workers.metrics import repeated_ngram_share

    # 4-grams: 1234 2341 3412 4123 1234 2341 -> 6, of which the last two occurred earlier: 2/6
    assert repeated_ngram_share([1, 2, 3, 4, 1, 2, 3, 4, 1]) == pytest.approx(2 / 6)
    # 7 7 7 7 7 7: three 4-grams, all (7 7 7 7): the 2nd and 3rd repeat the 1st -> 2/3
    assert repeated_ngram_share([7] * 6) == pytest.approx(2 / 3)
    assert repeated_ngram_share([1, 2, 3, 4, 5]) == 0.0
    assert math.isnan(repeated_ngram_share([1, 2, 3]))  # no 4-gram: undefined, not 0


def test_cross_document_shares_use_distinct_ngrams():
    from workers.metrics import cross_document_shares

    a, b, c = [1, 2, 3, 4, 5], [2, 3, 4, 5, 6], [7, 8, 9, 10]
    # a: {1234, 2345}, 2345 also in b -> 1/2; b: {2345, 3456} -> 1/2; c: {78910} -> 0/1
    assert cross_document_shares([a, b, c]) == pytest.approx([0.5, 0.5, 0.0])
    # repeats inside one text do not count as overlap: d = 1234 1234 (distinct {1234, 2341, 3412, 4123})
    d = [1, 2, 3, 4, 1, 2, 3, 4]
    assert cross_document_shares([d, [9, 9, 9, 9]]) == [0.0, 0.0]
    # a text without 4-grams is NaN and shares nothing
    assert math.isnan(cross_document_shares([a, [1, 2]])[1]) and cross_document_shares([a, [1, 2]])[0] == 0.0


def test_concatenated_gzip_ratio_is_one_ratio_over_the_joined_texts():
    from workers.metrics import concatenated_gzip_ratio

    # b"ab\ncd": 10-byte gzip header + 7-byte deflate stream + 8-byte trailer = 25 bytes over 5 raw bytes
    assert concatenated_gzip_ratio(["ab", "cd"]) == pytest.approx(25 / 5)
    # four copies of "abcd" joined by newlines: 27 bytes over 19; the mean of per-text ratios would be 24/4 = 6
    assert concatenated_gzip_ratio(["abcd"] * 4) == pytest.approx(27 / 19)
    assert math.isnan(concatenated_gzip_ratio([]))


def test_paper_redundancy_row():
    from workers.metrics import paper_redundancy

    a, b, c = [1, 2, 3, 4, 1, 2, 3, 4, 1], [2, 3, 4, 1, 9], [5, 6]
    r = paper_redundancy([a, b, c], ["x", "y", "z"])
    # within: a = 2/6 (above), b = 0/2, c has no 4-gram (skipped): mean (1/3 + 0) / 2 = 1/6
    assert r.within_text == pytest.approx(1 / 6)
    # cross: a distinct {1234, 2341, 3412, 4123}, with 2341 in b -> 1/4; b {2341, 3419} -> 1/2; mean 3/8
    assert r.cross_doc == pytest.approx(3 / 8)
    assert r.texts == 3 and r.gzip_ratio > 0
    alone = paper_redundancy([a], ["x"])
    assert math.isnan(alone.cross_doc) and alone.within_text == pytest.approx(1 / 3)
    assert math.isnan(paper_redundancy([], []).within_text)

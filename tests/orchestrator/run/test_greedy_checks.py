"""The end-to-end checks fail on what decoding replaced by "repeat the first token" would store (no Ray: quick)."""

from __future__ import annotations

from types import SimpleNamespace

from tests.orchestrator.run.greedy_checks import decoding_problems


def test_decoding_checks_fail_on_repeat_the_first_token():
    """`decoding_problems` on what "repeat the first token" decoding would store: every check fires."""
    reference = [28723, 1, 259, 345, 259, 1]  # a varied greedy reference
    fake = []
    for draft in ("plain", "ngram", "olifant"):
        for regime in ("uncached", "cached"):
            tokens = [reference[0]] * len(reference)  # the first token, repeated
            # the broken decoder's drafts: all rejected
            fake.append(
                SimpleNamespace(
                    strategy=draft,
                    draft=draft,
                    k=2,
                    regime=regime,
                    prompt_index=0,
                    tokens=tokens,
                    exact_match=tokens == reference,
                    rouge_l=1 / 6,
                    drafted=0 if draft == "plain" else 6,
                    accepted=0,
                    accepted_per_step=[0] * 6,
                )
            )
    problems = decoding_problems(fake)
    assert sum("not the greedy reference" in p for p in problems) == 6
    assert sum("one token repeated" in p for p in problems) == 6
    for draft in ("olifant", "ngram"):
        assert f"{draft}: never both accepted and rejected" in problems
    assert "olifant and ngram: no cached round cropped the cache" in problems


def _gen(draft, regime, accepted, drafted, per_step, tokens=(5, 6, 7, 8)):
    return SimpleNamespace(
        strategy=draft,
        draft=draft,
        k=2,
        regime=regime,
        prompt_index=0,
        tokens=list(tokens),
        exact_match=True,
        rouge_l=1.0,
        drafted=drafted,
        accepted=accepted,
        accepted_per_step=per_step,
    )


def test_decoding_checks_pass_real_looking_generations_and_name_each_gap():
    good = [
        _gen("plain", "cached", 0, 0, [0, 0, 0]),
        _gen("ngram", "cached", 1, 4, [0, 1, 0]),
        _gen("olifant", "cached", 2, 6, [1, 0, 1]),
    ]
    assert decoding_problems(good) == []
    # every draft accepted in full (no crop), or none at all: each gap named
    full = [
        _gen("plain", "cached", 0, 0, [0]),
        _gen("ngram", "cached", 4, 4, [2, 2]),
        _gen("olifant", "uncached", 1, 4, [1, 0]),
    ]
    assert decoding_problems(full) == [
        "ngram: never both accepted and rejected",
        "olifant and ngram: no cached round cropped the cache",
    ]
    one = [
        _gen("plain", "cached", 0, 0, [0]),
        _gen("ngram", "cached", 3, 6, [2, 0, 1]),
        _gen("olifant", "cached", 2, 4, [2, 0]),
    ]
    assert decoding_problems(one) == []  # ngram's round of 1 of 2 crops: one draft is enough
    wrong = [*good, SimpleNamespace(**{**vars(good[1]), "exact_match": False, "rouge_l": 0.75})]
    assert decoding_problems(wrong) == ["ngram k=2 cached prompt 0: not the greedy reference"]

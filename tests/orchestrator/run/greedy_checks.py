"""What the end-to-end tests check on stored generations, as a pure function (tested on its own in test_checks)."""

from __future__ import annotations


def decoding_problems(gens) -> list[str]:
    """Why stored generations do not show real greedy speculative decoding of a varied verifier ([] if they do).

    Each generation must equal its independent greedy reference, no generation may be one token repeated,
    olifant and ngram must each have a generation whose drafts were partly accepted (0 < accepted < drafted), and
    one of them, cached, a round that accepted some but not all of its k drafts (the cache crop path). Which one
    crops depends on the tiny verifier's text, whose training numerics differ from CPU to CPU: the crop path is
    exercised either way.
    """
    problems = [
        f"{g.strategy} k={g.k} {g.regime} prompt {g.prompt_index}: not the greedy reference"
        for g in gens
        if not (g.exact_match and g.rouge_l == 1.0)
    ]
    problems += [f"{g.strategy} {g.regime}: one token repeated" for g in gens if len(set(g.tokens)) < 2]
    drafting = ("olifant", "ngram")
    for draft in drafting:
        if not any(0 < g.accepted < g.drafted for g in gens if g.draft == draft):
            problems.append(f"{draft}: never both accepted and rejected")
    if not any(0 < a < g.k for g in gens if g.draft in drafting and g.regime == "cached" for a in g.accepted_per_step):
        problems.append("olifant and ngram: no cached round cropped the cache")
    return problems

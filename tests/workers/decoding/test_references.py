"""Batched greedy references equal the unbatched ones, and the teacher-forced check tells a greedy continuation from
one that is not (a wrong token, a short one without EOS, an EOS inside)."""

from __future__ import annotations

import pytest

from tests.tiny_models import tiny_lm
from workers.decoding import references
from workers.decoding.references import greedy_reference, greedy_references, is_greedy
from workers.verifier import Verifier

pytestmark = pytest.mark.usefixtures("one_thread")

PROMPTS = [list(range(3, 40)), list(range(100, 130)) * 2, [11, 12, 13, 14] * 6, [5, 6]]  # lengths differ: padding


@pytest.fixture(scope="module", params=["llama", "mistral"])
def verifier(request):
    return Verifier(tiny_lm(request.param, 0, vocab=500, echo=0.3))


@pytest.mark.parametrize("eos", [None, 225])
def test_batched_references_equal_the_unbatched_ones(verifier, eos):
    single = [greedy_reference(verifier, p, 16, eos) for p in PROMPTS]
    assert greedy_references(verifier, PROMPTS, 16, eos) == single
    assert eos is None or any(len(r) < 16 and r[-1] == eos for r in single)  # one stops at EOS: the cut is exercised


def test_the_check_refuses_what_is_not_greedy(verifier):
    ref = greedy_reference(verifier, PROMPTS[0], 16)
    assert is_greedy(verifier, PROMPTS[0], ref, 16, None)
    wrong = ref[:5] + [(ref[5] + 1) % 500] + ref[6:]
    assert not is_greedy(verifier, PROMPTS[0], wrong, 16, None)
    assert not is_greedy(verifier, PROMPTS[0], ref[:10], 16, None)  # short, and not ended by EOS
    assert not is_greedy(verifier, PROMPTS[0], ref[:3] + [7] + ref[4:], 16, 7)  # an EOS inside


def test_a_reference_failing_the_check_is_made_again_alone(verifier, monkeypatch):
    """Batched kernels may break a near tie the other way: such a reference is regenerated unbatched."""
    single = [greedy_reference(verifier, p, 16) for p in PROMPTS]
    real, checked = references.is_greedy, []

    def fails_the_first(v, prompt, ref, n, eos):
        checked.append(list(prompt))
        return list(prompt) != PROMPTS[0] and real(v, prompt, ref, n, eos)

    monkeypatch.setattr(references, "is_greedy", fails_the_first)
    assert references.greedy_references(verifier, PROMPTS, 16) == single
    assert checked == [list(p) for p in PROMPTS]  # every batched reference was checked

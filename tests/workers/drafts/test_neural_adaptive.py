"""The neural draft with adaptive length: the draft model's probability decides where drafting stops."""

from __future__ import annotations

import pytest
import torch

from tests.workers.drafts.test_neural import manual_greedy, tiny_llama
from workers.decoding.adaptive import AdaptiveLength, stop_rule
from workers.drafts import make_draft
from workers.errors import DraftError

pytestmark = pytest.mark.usefixtures("one_thread")


def manual_probs(model, ids: list[int], k: int) -> list[float]:
    """The softmax max after each greedy step, by full forwards."""
    ids, out = list(ids), []
    with torch.no_grad():
        for _ in range(k):
            p = torch.softmax(model(torch.tensor([ids])).logits[0, -1], -1)
            out.append(float(p.max()))
            ids.append(int(p.argmax()))
    return out


def test_neural_adaptive_stops_at_the_first_improbable_guess():
    model = tiny_llama(64)
    context = [1, 5, 9, 13, 2, 7]
    greedy, probs = manual_greedy(model, context, 6), manual_probs(model, context, 6)
    threshold = sorted(probs)[len(probs) // 2]  # some guesses above, some below
    draft = make_draft("neural", model=model, gate=AdaptiveLength(threshold))
    expect = stop_rule(list(zip(greedy, probs)), threshold)
    assert draft.propose(context, 6) == expect == greedy[: len(expect)]
    assert len(expect) < 6
    scored = make_draft("neural", model=model).scored(context, 6)  # no gate: all k scored
    assert [t for t, _ in scored] == greedy and [p for _, p in scored] == pytest.approx(probs, abs=1e-5)


def test_neural_adaptive_refuses_a_bridged_draft(mistral_tok):
    from tests.workers.conftest import bpe_tokenizer

    bpe = bpe_tokenizer(["some text to learn a few merges from, some text"])
    with pytest.raises(DraftError, match="adaptive drafting"):
        make_draft(
            "neural",
            model=tiny_llama(len(bpe)),
            tokenizer=bpe,
            verifier_tokenizer=mistral_tok,
            gate=AdaptiveLength(0.5),
        )

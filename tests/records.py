"""A generation record the tests build where only its tokens and its window matter: a plain generation (no draft, no
rounds), one verifier step per token."""

from __future__ import annotations

from workers.contracts import GenerationRecord
from workers.decoding.records import Decoded


def plain_generation(
    tokens: tuple[int, ...], started_at: float = 0.0, ended_at: float = 0.1, text: str = "x", verify_s: float = 0.1
) -> GenerationRecord:
    """A plain generation of `tokens` over [started_at, ended_at] on the CPU, after a 3-token prompt."""
    decoded = Decoded(
        tokens=tokens,
        steps=len(tokens),
        drafted=0,
        accepted=0,
        accept_hist=(),
        accepted_per_step=(),
        tokens_per_step=(),
        wall_s=ended_at - started_at,
        draft_s=0.0,
        verify_s=verify_s,
        started_at=started_at,
        ended_at=ended_at,
        stopped="length",
    )
    return GenerationRecord(decoded, n_prompt_tokens=3, text=text, device="cpu")

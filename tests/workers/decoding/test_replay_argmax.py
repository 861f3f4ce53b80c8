"""Replay's one-hot byte rows take numpy's argmax (`greedy_tokens`, `greedy_token`): the same ids as torch's."""

from __future__ import annotations

import torch

from workers.decoding.rounds import greedy_token, greedy_tokens


def test_byte_rows_give_torchs_argmax():
    g = torch.Generator().manual_seed(0)
    rows = torch.randint(0, 3, (7, 1001), generator=g, dtype=torch.uint8)  # ties: the first maximum, both ways
    assert greedy_tokens(rows) == rows.argmax(dim=-1).tolist() == rows.to(torch.int32).argmax(dim=-1).tolist()
    assert [greedy_token(r) for r in rows] == greedy_tokens(rows)
    floats = torch.randn(3, 50, generator=g)
    assert greedy_tokens(floats) == floats.argmax(dim=-1).tolist() and greedy_token(floats[0]) == int(
        floats[0].argmax()
    )

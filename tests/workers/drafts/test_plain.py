"""The plain draft."""

from __future__ import annotations

import pytest

from workers.drafts import make_draft

pytestmark = pytest.mark.usefixtures("one_thread")


def test_plain_proposes_nothing():
    assert make_draft("plain").propose([1, 2, 3], 5) == []


# n-gram ------------------------------------------------------------------------------------------------

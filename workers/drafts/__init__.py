"""Draft models behind one protocol, made by name.

Example:
    >>> make_draft("plain").propose([1, 2, 3], k=3)
    []
    >>> make_draft("ngram", n=4).propose([7, 8, 9, 7, 8], k=2)
    [9, 7]
"""

from __future__ import annotations

import inspect

from workers.drafts.base import Draft
from workers.errors import DraftError

DRAFTS = ("plain", "ngram", "olifant", "neural")


def make_draft(name: str, **options) -> Draft:
    """Build the draft called `name` with its options (see each module); unknown names raise DraftError."""
    if name == "plain":
        from workers.drafts.plain import PlainDraft as cls
    elif name == "ngram":
        from workers.drafts.ngram import NgramDraft as cls
    elif name == "olifant":
        from workers.drafts.olifant import OlifantDraft as cls
    elif name == "neural":
        from workers.drafts.neural import NeuralDraft as cls
    else:
        raise DraftError(f"draft {name!r} is unknown; accepted: {', '.join(DRAFTS)}")
    try:
        inspect.signature(cls).bind(**options)
    except TypeError as err:
        accepted = ", ".join(inspect.signature(cls).parameters) or "none"
        raise DraftError(f"draft {name!r}: options {sorted(options)} not accepted ({err}); accepted: {accepted}") from err
    return cls(**options)


__all__ = ["DRAFTS", "Draft", "DraftError", "make_draft"]

"""Draft models behind one protocol, made by name through the registry (`workers.drafts.registry`).

Example:
    >>> make_draft("plain").propose([1, 2, 3], k=3)
    []
    >>> make_draft("ngram", n=4).propose([7, 8, 9, 7, 8], k=2)
    [9, 7]
"""

from __future__ import annotations

import inspect

from workers.drafts.registry import BuildContext, DraftEntry, DraftOptions, Requirement, lookup, names
from workers.errors import DraftError
from workers.interfaces import Draft


def make_draft(name: str, **options) -> Draft:
    """Build the draft called `name` from Python objects (see each module); unknown names raise DraftError."""
    cls = lookup(name).cls
    try:
        inspect.signature(cls).bind(**options)
    except TypeError as err:
        accepted = ", ".join(inspect.signature(cls).parameters) or "none"
        raise DraftError(
            f"draft {name!r}: options {sorted(options)} not accepted ({err}); accepted: {accepted}"
        ) from err
    return cls(**options)


def build_draft(name: str, options: dict, ctx: BuildContext) -> Draft:
    """Build a strategy's draft on the worker from its stored options and the artifacts it required."""
    entry = lookup(name)
    return entry.build(entry.parse(options), ctx)


__all__ = [
    "BuildContext",
    "Draft",
    "DraftEntry",
    "DraftError",
    "DraftOptions",
    "Requirement",
    "build_draft",
    "lookup",
    "make_draft",
    "names",
]

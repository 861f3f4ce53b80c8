"""The `ngram` draft: an in-session n-gram over the running generation (prompt and verifier output).

No training: every accepted token extends the table, so a generation that repeats itself is drafted from
its own past. Token-level by default; `unit="word"` is the paper's weaker word-level variant, which counts
whitespace words of the decoded text and reaches the verifier's ids by re-encoding (the text path).

Example:
    >>> draft = NgramDraft(n=4)
    >>> draft.propose([1, 2, 3, 9, 1, 2], k=2)    # 1 2 -> 3 and 2 3 -> 9 were seen
    [3, 9]
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from typing import Annotated, Literal

from pydantic import Field

from workers.drafts.continuation import continuation_ids
from workers.drafts.registry import BuildContext, DraftEntry, DraftOptions
from workers.errors import DraftError
from workers.interfaces import Draft

UNITS = ("token", "word")


class NgramTable:
    """Next-unit counts after every context of 1..n-1 units; the most frequent (then most recent) wins."""

    def __init__(self, n: int):
        self.n = n
        self.units: list[Hashable] = []
        # context tuple (any length 1..n-1) -> {next unit: [count, last position]}
        self.table: dict[tuple, dict[Hashable, list[int]]] = {}

    def add(self, unit: Hashable) -> None:
        """Append one unit to the running text and count it after each of its preceding contexts."""
        self.units.append(unit)
        pos = len(self.units) - 1
        for order in range(1, min(self.n - 1, pos) + 1):
            nexts = self.table.setdefault(tuple(self.units[pos - order : pos]), {})
            entry = nexts.setdefault(unit, [0, pos])
            entry[0] += 1
            entry[1] = pos

    def predict(self, history: Sequence[Hashable]) -> Hashable | None:
        """The most frequent next unit after the longest seen suffix of `history` (None if no suffix was seen)."""
        for order in range(min(self.n - 1, len(history)), 0, -1):
            nexts = self.table.get(tuple(history[len(history) - order :]))
            if nexts:
                return max(nexts.items(), key=lambda item: item[1])[0]
        return None

    def chain(self, history: Sequence[Hashable], k: int) -> list[Hashable]:
        """Up to k units predicted one after another, each fed back as context."""
        tail = list(history[-(self.n - 1) :]) if self.n > 1 else []
        out: list[Hashable] = []
        for _ in range(k):
            unit = self.predict(tail)
            if unit is None:
                break
            out.append(unit)
            tail = (tail + [unit])[-(self.n - 1) :]
        return out


class NgramDraft(Draft):
    """In-session n-gram draft over tokens (default) or words (`unit="word"`, needs `tokenizer`)."""

    name = "ngram"

    def __init__(self, n: int = 4, unit: str = "token", tokenizer=None):
        if not isinstance(n, int) or n < 2:
            raise DraftError(f"ngram: n={n!r} is not accepted; give an integer >= 2")
        if unit not in UNITS:
            raise DraftError(f"ngram: unit={unit!r} is not accepted; give one of {', '.join(UNITS)}")
        if unit == "word" and tokenizer is None:
            raise DraftError("ngram: unit='word' drafts through text and needs tokenizer=<the verifier's tokenizer>")
        self.n, self.unit, self.tokenizer = n, unit, tokenizer
        self.bridged = unit == "word"
        self.reset()

    def reset(self) -> None:
        """Start a new session: an empty table."""
        self._table = NgramTable(self.n)

    def propose(self, context: Sequence[int], k: int) -> list[int]:
        """Up to k tokens: the most frequent continuation chain of the running context."""
        if k <= 0:
            return []
        if self.unit == "word":
            return self._propose_words(context, k)
        self._absorb(context)
        return [int(t) for t in self._table.chain(context, k)]

    def _absorb(self, units: Sequence[Hashable]) -> None:
        """Add the units of `units` not yet counted (rebuild if it does not extend the counted text)."""
        seen = self._table.units
        if len(units) < len(seen) or (seen and units[len(seen) - 1] != seen[-1]):
            self.reset()
            seen = self._table.units
        for unit in units[len(seen) :]:
            self._table.add(unit)

    def _propose_words(self, context: Sequence[int], k: int) -> list[int]:
        """Word-level: count complete words of the decoded text, chain k words, re-encode the continuation."""
        text = self.tokenizer.decode(list(context), skip_special_tokens=True)
        words = text.split()
        complete = words if text[-1:].isspace() else words[:-1]  # the last word may still grow
        self._absorb(complete)
        guesses = self._table.chain(words, k)
        if not guesses:
            return []
        sep = "" if text[-1:].isspace() or not text else " "
        return continuation_ids(self.tokenizer, text, sep + " ".join(guesses))[:k]


class NgramOptions(DraftOptions):
    """`n`: the order (contexts of up to n-1 units); `unit`: "token" or the paper's weaker "word"."""

    n: Annotated[int, Field(ge=2)] = 4
    unit: Literal["token", "word"] = "token"


def build(opts: NgramOptions, ctx: BuildContext) -> NgramDraft:
    return NgramDraft(n=opts.n, unit=opts.unit, tokenizer=ctx.tokenizer)


ENTRY = DraftEntry("ngram", NgramDraft, NgramOptions, build, summary="in-session n-gram over the running text")

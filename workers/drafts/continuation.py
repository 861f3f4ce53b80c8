"""Text continuations as token ids (`continuation_ids`), for the drafts that propose text (ngram, the paper's n-gram,
the neural draft). The draft protocol itself (`Draft`) is in `workers.interfaces`, shared with decoding."""

from __future__ import annotations

from workers.interfaces import common_prefix_len


def continuation_ids(tokenizer, text: str, continuation: str) -> list[int]:
    """The ids `continuation` adds after `text` when the two are encoded together (empty if they merge back).

    Encoding the joint text keeps the tokenizer's own word-boundary handling; if the joint encoding does not
    start with `text`'s encoding (the continuation fused with the last token), there is no safe proposal.
    """
    base = tokenizer.encode(text, add_special_tokens=False)
    full = tokenizer.encode(text + continuation, add_special_tokens=False)
    if common_prefix_len(base, full) < len(base):
        return []
    return list(full[len(base) :])

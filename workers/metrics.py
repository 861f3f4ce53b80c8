"""Per-generation figures (acceptance, MAL, speed, quality) and the redundancy of generated texts.

Energy figures (J/100 tokens, tokens/J) live with the power sources, in `workers.power`.

Example:
    >>> rouge_l([1, 2, 3, 4], [1, 3, 4, 5])        # LCS 1 3 4: P = R = 3/4
    0.75
    >>> mal(accepted=12, rounds=5), mean_accepted_tokens(n_tokens=17, steps=5)
    (2.4, 3.4)
"""

from __future__ import annotations

import gzip
import math
import statistics
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass


def _ratio(num: float, den: float) -> float:
    """num / den, NaN when den is 0 (undefined, stored as NULL)."""
    return num / den if den else math.nan


def acceptance_rate(accepted: int, drafted: int) -> float:
    """Accepted draft tokens over drafted ones (NaN when nothing was drafted, e.g. plain)."""
    return _ratio(accepted, drafted)


def mal(accepted: int, rounds: int) -> float:
    """Mean accepted length, the paper's MAL: accepted draft tokens per round (one draft-and-verify step). The cached
    regime's prefill is a verifier pass but not a round; a cached fast-path reject is a round with 0 accepted."""
    return _ratio(accepted, rounds)


def mean_accepted_tokens(n_tokens: int, steps: int) -> float:
    """Spec-Bench's mean accepted tokens: new tokens per verifier step, the verifier's own token included."""
    return _ratio(n_tokens, steps)


def tokens_per_s(n_tokens: int, wall_s: float) -> float:
    """New tokens per wall-clock second."""
    return _ratio(n_tokens, wall_s)


def lcs_length(a: Sequence, b: Sequence) -> int:
    """Length of the longest common subsequence (O(len(a) * len(b)) time, O(len(b)) memory). A common prefix and
    suffix are in every longest common subsequence, so they are counted first and only the middles are compared:
    O(n) for equal sequences (every exactly greedy generation against its reference)."""
    a, b = list(a), list(b)
    head = 0
    while head < len(a) and head < len(b) and a[head] == b[head]:
        head += 1
    tail = 0
    while tail < len(a) - head and tail < len(b) - head and a[-1 - tail] == b[-1 - tail]:
        tail += 1
    return head + tail + _lcs_table(a[head : len(a) - tail], b[head : len(b) - tail])


def _lcs_table(a: Sequence, b: Sequence) -> int:
    prev = [0] * (len(b) + 1)
    for x in a:
        cur = [0]
        for j, y in enumerate(b):
            cur.append(prev[j] + 1 if x == y else max(prev[j + 1], cur[j]))
        prev = cur
    return prev[-1]


def rouge_l(candidate: Sequence, reference: Sequence) -> float:
    """ROUGE-L F-measure (beta = 1) over token sequences: 1.0 if both are empty, 0.0 if one is."""
    if not candidate and not reference:
        return 1.0
    lcs = lcs_length(candidate, reference)
    if lcs == 0:
        return 0.0
    precision, recall = lcs / len(candidate), lcs / len(reference)
    return 2 * precision * recall / (precision + recall)


def exact_match(candidate: Sequence, reference: Sequence) -> bool:
    """True when the two token sequences are identical."""
    return list(candidate) == list(reference)


@dataclass(frozen=True)
class DraftLatency:
    """Seconds per single-token proposal over `n` queries."""

    mean_s: float
    median_s: float
    n: int


def draft_latency(draft, context: Sequence[int], n: int = 50) -> DraftLatency:
    """Time n single-token proposals of `draft` for `context` (the paper's 50-query measurement)."""
    draft.reset()
    times = []
    for _ in range(n):
        t0 = time.perf_counter()
        draft.propose(context, 1)
        times.append(time.perf_counter() - t0)
    return DraftLatency(mean_s=statistics.fmean(times), median_s=statistics.median(times), n=n)


def word_ngrams(text: str, n: int = 4) -> list[tuple[str, ...]]:
    """Lower-cased whitespace-word n-grams of a text, in order."""
    words = text.lower().split()
    return [tuple(words[i : i + n]) for i in range(len(words) - n + 1)]


def within_text_repetition(text: str, n: int = 4) -> float:
    """Share of a text's word n-grams that repeat an earlier one (0.0 for a text without n-grams)."""
    grams = word_ngrams(text, n)
    return 1.0 - len(set(grams)) / len(grams) if grams else 0.0


def cross_document_overlap(texts: Sequence[str], n: int = 4) -> float:
    """Mean over texts of the share of a text's distinct n-grams found in some other text of the set."""
    sets = [set(word_ngrams(t, n)) for t in texts]
    doc_freq = Counter(g for s in sets for g in s)
    shares = [sum(doc_freq[g] > 1 for g in s) / len(s) for s in sets if s]
    return statistics.fmean(shares) if shares else 0.0


def gzip_ratio(text: str) -> float:
    """Compressed over raw UTF-8 bytes (lower = more redundant; NaN for an empty text)."""
    raw = text.encode("utf-8")
    return _ratio(len(gzip.compress(raw, mtime=0)), len(raw))


def redundancy(texts: Sequence[str], n: int = 4) -> dict[str, float]:
    """Table 5 over a set of texts: mean within-text n-gram repetition, cross-document overlap, mean gzip ratio.

    Overlap needs two texts (NaN for fewer); empty texts are left out.
    """
    docs = [t for t in texts if t]
    if not docs:
        return {"texts": 0, "repetition": math.nan, "overlap": math.nan, "gzip_ratio": math.nan}
    return {
        "texts": len(docs),
        "repetition": statistics.fmean(within_text_repetition(t, n) for t in docs),
        "overlap": cross_document_overlap(docs, n) if len(docs) > 1 else math.nan,
        "gzip_ratio": statistics.fmean(gzip_ratio(t) for t in docs),
    }


# The paper's Table 5 (its §5.5), on the verifier's token ids ("computed on Mistral tokens to match the draft
# models' context window"). `redundancy` above is greenspec's earlier word-level summary, kept for its callers.


def token_ngrams(tokens: Sequence[int], n: int = 4) -> list[tuple[int, ...]]:
    """The token n-grams of a sequence, in order (none when it is shorter than n)."""
    return [tuple(tokens[i : i + n]) for i in range(len(tokens) - n + 1)]


def repeated_ngram_share(tokens: Sequence[int], n: int = 4) -> float:
    """Within-text repetition: the share of a text's token n-grams that already occurred earlier in it.

    An n-gram occurring c times counts c - 1 times as repeated; NaN for a text without n-grams.
    """
    grams = token_ngrams(tokens, n)
    return _ratio(len(grams) - len(set(grams)), len(grams))


def cross_document_shares(texts: Sequence[Sequence[int]], n: int = 4) -> list[float]:
    """Per text: the share of its distinct token n-grams that also occur in at least one other text of the set.

    A text without n-grams gets NaN (undefined), and its absence counts for no other text.
    """
    sets = [set(token_ngrams(t, n)) for t in texts]
    doc_freq = Counter(g for s in sets for g in s)
    return [_ratio(sum(doc_freq[g] > 1 for g in s), len(s)) for s in sets]


def concatenated_gzip_ratio(texts: Sequence[str], sep: str = "\n") -> float:
    """gzip ratio of a task's texts joined into one (`sep` between them): the paper's model-free summary."""
    return gzip_ratio(sep.join(texts))


@dataclass(frozen=True)
class TaskRedundancy:
    """The paper's Table 5 row for one task: means over its texts (fractions, not %), and the gzip ratio."""

    texts: int
    within_text: float  # mean share of a text's token 4-grams seen earlier in the same text
    cross_doc: float  # mean share of a text's distinct 4-grams found in another text of the task
    gzip_ratio: float  # compressed / raw bytes of the task's concatenated texts (lower = more redundant)


def paper_redundancy(token_texts: Sequence[Sequence[int]], texts: Sequence[str], n: int = 4) -> TaskRedundancy:
    """Table 5 as the paper defines it: token n-gram repetition and overlap, gzip of the concatenated text.

    `token_texts` are the generations' verifier token ids and `texts` their decoded strings, in any order.
    Means skip texts without n-grams (NaN when none has one; cross-doc needs two texts).
    """
    within = [r for r in (repeated_ngram_share(t, n) for t in token_texts) if not math.isnan(r)]
    cross = [r for r in cross_document_shares(token_texts, n) if not math.isnan(r)] if len(token_texts) > 1 else []
    return TaskRedundancy(
        texts=len(token_texts),
        within_text=statistics.fmean(within) if within else math.nan,
        cross_doc=statistics.fmean(cross) if cross else math.nan,
        gzip_ratio=concatenated_gzip_ratio(texts) if any(texts) else math.nan,
    )

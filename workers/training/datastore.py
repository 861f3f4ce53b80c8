"""REST's datastore: a corpus's tokens and their suffix array in one file, searched memory-mapped.

Build: tokenise a corpus (every document starts with BOS, as `workers.igtree.instances` does), concatenate the documents
as REST does, sort all suffixes with `pydivsufsort` (libdivsufsort; integer alphabets of 32k are fine) and save
one `.npy` of shape (2, n): row 0 the tokens, row 1 the suffix array. Query: `np.load(..., mmap_mode="r")`, so a
datastore costs page cache, not process memory, and several workers share it.

Retrieval (REST, He et al. 2024): the longest suffix of the context (at most `max_match`, at least `min_match`
tokens) that occurs in the corpus followed by at least one token; the continuations of its first
`max_occurrences` occurrences (suffix-array order) are counted into a trie; the draft is the trie's most
frequent path, k tokens deep (ties to the smaller token id).

Example:
    >>> info = build_datastore(TextSource(name="plays", path="plays.txt"), "mistral", "runs/artifacts")
    >>> store = Datastore.open(info.path)
    >>> store.draft(context_ids, k=3)
    [1014, 272, 907]
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import shutil
import tempfile
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from workers.contracts import ArtifactInfo, ArtifactJob
from workers.corpora import TextSource
from workers.errors import GreenspecError
from workers.files import file_sha256
from workers.igtree.instances import tokenize_source
from workers.models.tokenizer import load_tokenizer, tokenizer_id

logger = logging.getLogger(__name__)

FORMAT_VERSION = 1
SUFFIX = ".rest.npy"


class DatastoreError(GreenspecError):
    """A datastore that cannot be built or opened."""


def suffix_array(tokens: np.ndarray) -> np.ndarray:
    """Start positions of all suffixes of `tokens` in lexicographic order; (n,) int64."""
    from pydivsufsort import divsufsort  # deferred: its import takes ~1 s, and only building needs it

    if tokens.shape[0] == 0:
        return np.zeros(0, dtype=np.int64)
    return divsufsort(np.ascontiguousarray(tokens, dtype=np.int32)).astype(np.int64)


def compare_prefix(tokens: np.ndarray, start: int, query: list[int]) -> int:
    """-1, 0 or 1: the suffix at `start`, cut to len(query), against `query` (a shorter suffix sorts first).

    Python's list order is exactly this lexicographic order, and for 16 tokens it is faster than numpy's.
    """
    seg = tokens[start : start + len(query)].tolist()
    return 0 if seg == query else (-1 if seg < query else 1)


def match_range(tokens: np.ndarray, sa: np.ndarray, query: Sequence[int]) -> tuple[int, int]:
    """[lo, hi): the suffix-array rows whose suffixes start with `query` (binary searches, O(|query| log n))."""
    query = [int(t) for t in query]
    lo, hi = 0, sa.shape[0]
    while lo < hi:  # first row >= query
        mid = (lo + hi) // 2
        if compare_prefix(tokens, int(sa[mid]), query) < 0:
            lo = mid + 1
        else:
            hi = mid
    first, hi = lo, sa.shape[0]
    while lo < hi:  # first row > query
        mid = (lo + hi) // 2
        if compare_prefix(tokens, int(sa[mid]), query) <= 0:
            lo = mid + 1
        else:
            hi = mid
    return first, lo


def continued_range(tokens: np.ndarray, sa: np.ndarray, query: Sequence[int]) -> tuple[int, int] | None:
    """The rows starting with `query` if one of them has a token after the match, else None."""
    lo, hi = match_range(tokens, sa, query)
    if hi - lo > 1 or (hi > lo and int(sa[lo]) + len(query) < tokens.shape[0]):
        return lo, hi
    return None


def frequent_path(conts: np.ndarray, k: int) -> list[int]:
    """The trie's most frequent path over continuations (m, k) padded with -1: at each depth the commonest token."""
    path: list[int] = []
    for depth in range(k):
        col = conts[:, depth]
        col = col[col >= 0]
        if col.size == 0:
            break
        values, counts = np.unique(col, return_counts=True)
        token = int(values[np.argmax(counts)])  # argmax takes the first maximum: the smaller id on ties
        path.append(token)
        conts = conts[conts[:, depth] == token]
    return path


@dataclass(frozen=True)
class Datastore:
    """An opened datastore: tokens (n,) and suffix array (n,), memory-mapped rows of one file."""

    path: str
    tokens: np.ndarray
    sa: np.ndarray

    @classmethod
    def open(cls, path: str | os.PathLike) -> Datastore:
        """Memory-map a datastore file written by `build_datastore` (or `save_datastore`)."""
        try:
            both = np.load(path, mmap_mode="r")
        except (OSError, ValueError) as err:
            raise DatastoreError(f"datastore {str(path)!r} cannot be opened: {err}") from err
        if both.ndim != 2 or both.shape[0] != 2:
            raise DatastoreError(f"datastore {str(path)!r} is not a (2, n) token/suffix-array file")
        rows = both.view(np.ndarray)  # still mapped; a plain ndarray view slices without memmap's per-call overhead
        return cls(str(path), rows[0], rows[1])

    @property
    def n_tokens(self) -> int:
        return int(self.tokens.shape[0])

    def longest_match(self, context: Sequence[int], max_match: int, min_match: int) -> tuple[int, int, int] | None:
        """(match length, lo, hi) of the longest context suffix with a continuation; None if none >= min_match.

        Occurring with a continuation is monotone in the length (a suffix of an occurring suffix occurs, one token
        later, with the same continuation), so a binary search over the length finds what trying longest first does.
        """
        ctx = [int(t) for t in context[-max_match:]]
        lo_len, hi_len, best = min_match, len(ctx), None
        while lo_len <= hi_len:
            length = (lo_len + hi_len) // 2
            found = continued_range(self.tokens, self.sa, ctx[len(ctx) - length :])
            if found is None:
                hi_len = length - 1
            else:
                best, lo_len = (length, *found), length + 1
        return best

    def continuations(self, lo: int, hi: int, length: int, k: int, max_occurrences: int) -> np.ndarray:
        """The k tokens after each of the first `max_occurrences` matches in rows [lo, hi); (m, k), -1 past the end."""
        starts = np.asarray(self.sa[lo : min(hi, lo + max_occurrences)], dtype=np.int64) + length
        index = starts[:, None] + np.arange(k)[None, :]  # (m, k)
        inside = index < self.n_tokens
        conts = np.full(index.shape, -1, dtype=np.int64)
        conts[inside] = self.tokens[index[inside]]
        return conts

    def draft(
        self, context: Sequence[int], k: int, max_match: int = 16, min_match: int = 2, max_occurrences: int = 5000
    ) -> list[int]:
        """REST's draft: the most frequent k-token continuation of the longest matched context suffix."""
        if k <= 0 or len(context) < min_match or self.n_tokens == 0:
            return []
        found = self.longest_match(context, max_match, min_match)
        if found is None:
            return []
        length, lo, hi = found
        return frequent_path(self.continuations(lo, hi, length, k, max_occurrences), k)


def save_datastore(tokens: np.ndarray, path: str | os.PathLike) -> int:
    """Sort the suffixes of `tokens` and write the (2, n) int32 datastore file atomically; returns its bytes."""
    tokens = np.ascontiguousarray(tokens, dtype=np.int32)
    both = np.stack([tokens, suffix_array(tokens).astype(np.int32)])  # (2, n); int32 holds n < 2**31
    path = Path(path)
    tmp = path.with_name(f".{path.name}.tmp.npy")
    np.save(tmp, both)
    os.replace(tmp, path)
    return path.stat().st_size


def datastore_name(source: TextSource, tok_id: str, max_tokens: int | None) -> str:
    """`<name>-<hash>.rest.npy`: the same inputs always give the same file name."""
    key = json.dumps(
        {
            "source": source.identity(),
            "tokenizer": tok_id,
            "max_tokens": max_tokens,
            "format": FORMAT_VERSION,
            "kind": "datastore",
        },
        sort_keys=True,
    )
    return f"{source.name}-{hashlib.sha256(key.encode()).hexdigest()[:12]}{SUFFIX}"


def build_datastore(source: TextSource, tokenizer_name: str, out_dir, *, max_tokens: int | None = None) -> ArtifactInfo:
    """Tokenise `source` with the verifier's tokenizer and write its datastore under `out_dir`; timed."""
    t0 = time.perf_counter()
    tok = load_tokenizer(tokenizer_name)
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    path = out / datastore_name(source, tokenizer_id(tok), max_tokens)
    work = Path(tempfile.mkdtemp(prefix=".work-", dir=out))
    try:
        tf = tokenize_source(source, tok, work, max_tokens=max_tokens)
        t_sort = time.perf_counter()
        n_bytes = save_datastore(tf.tokens(), path)
        sort_s = time.perf_counter() - t_sort
    finally:
        shutil.rmtree(work, ignore_errors=True)
    build_s = time.perf_counter() - t0
    meta = {
        "name": source.name,
        "tokens": tf.n_tokens,
        "docs": tf.n_docs,
        "tokenizer_id": tokenizer_id(tok),
        "datastore_bytes": n_bytes,
        "suffix_sort_s": round(sort_s, 4),
        "build_s": round(build_s, 4),
    }
    logger.info("datastore %s: %d tokens -> %s (%d bytes, %.2f s)", source.name, tf.n_tokens, path, n_bytes, build_s)
    return ArtifactInfo(
        kind="datastore", path=str(path), sha256=file_sha256(path), bytes=n_bytes, build_s=build_s, meta=meta
    )


def build(job: ArtifactJob) -> ArtifactInfo:
    """The `workers.training.builders` entry for cell kind "datastore": the corpus entry's `max_tokens` bounds it."""
    options: Mapping[str, Any] = job.options or {}
    return build_datastore(job.corpus, job.tokenizer, job.out_dir, max_tokens=options.get("max_tokens"))

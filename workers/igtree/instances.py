"""Corpus -> token file -> IGTree instances (w context tokens -> the next token), in bounded memory.

Documents are tokenised in batches and appended to a flat token file (uint16 when the vocabulary fits, else
uint32) with an int64 document-offsets file beside it; nothing ever holds the corpus as a Python list.
Every document starts with the tokenizer's BOS, exactly as a prompt does at decoding time. Instances:
each token after BOS is a target; its context is the w tokens before it inside the same document,
left-padded with `PAD` (TiMBL-style windowing; `PAD` is -1, never a token id), so BOS is a context value but
never a target and no window crosses a document boundary. Both backends get the same instances.

Example:
    >>> tf = tokenize_source(TextSource(name="plays", path="plays.txt"), load_tokenizer("mistral"), "runs/tok")
    >>> contexts, targets = make_instances(tf.tokens(), tf.offsets(), window=4)
    >>> contexts[0], targets[0]                      # first instance of the first document
    (array([-1, -1, -1,  1], dtype=int32), 422)
"""

from __future__ import annotations

import hashlib
import itertools
import json
import logging
import os
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from workers.corpora import TextSource, iter_documents
from workers.errors import CorpusError
from workers.igtree.counting import PAD, InstanceCounts, count_instances, merge_counts
from workers.models.tokenizer import load_tokenizer

logger = logging.getLogger(__name__)

BATCH_DOCS = 256  # documents per tokenizer call: bounded memory, few Python round trips
CHUNK_TOKENS = 1 << 22  # target positions per counting step: bounds the (n, w) instance arrays to ~100 MB

# counts shards of (tokens, offsets, window) by target position ranges, in order
CountMap = Callable[[np.ndarray, np.ndarray, int, Sequence[tuple[int, int]]], list[InstanceCounts | None]]


@dataclass(frozen=True)
class TokenFile:
    """A tokenised corpus on disk: flat `tokens_path` (dtype) and `offsets_path` (n_docs + 1 int64 starts)."""

    tokens_path: str
    offsets_path: str
    dtype: str
    n_tokens: int
    n_docs: int

    def tokens(self) -> np.ndarray:
        """All tokens, memory-mapped; (n_tokens,)."""
        return np.memmap(self.tokens_path, dtype=self.dtype, mode="r", shape=(self.n_tokens,))

    def offsets(self) -> np.ndarray:
        """Document start offsets plus the end; (n_docs + 1,) int64."""
        return np.fromfile(self.offsets_path, dtype=np.int64)

    @property
    def n_instances(self) -> int:
        """Instances these tokens give: one per token that is not a document's first."""
        return self.n_tokens - self.n_docs


def token_dtype(tokenizer) -> np.dtype:
    """uint16 when every id fits (vocab <= 65535), else uint32."""
    return np.dtype(np.uint16) if len(tokenizer) <= 65535 else np.dtype(np.uint32)


def tokenize_source(
    source: TextSource,
    tokenizer,
    out_dir,
    *,
    max_tokens: int | None = None,
    batch_docs: int = BATCH_DOCS,
    on_tokens: Callable[[int], None] | None = None,
) -> TokenFile:
    """Tokenise a source's documents into `out_dir`/<name>.tokens/.offsets; stop after `max_tokens` tokens.

    `on_tokens(n)` is called with the running token count after each batch (a progress bar's hook).
    """
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    dtype = token_dtype(tokenizer)
    tok_path, off_path = out / f"{source.name}.tokens", out / f"{source.name}.offsets"
    n_tokens, n_docs = 0, 0
    with open(f"{tok_path}.tmp", "wb") as tok_fh, open(f"{off_path}.tmp", "wb") as off_fh:
        for ids in _token_batches(source, tokenizer, batch_docs):
            ids = _within_budget(ids, None if max_tokens is None else max_tokens - n_tokens)
            if not ids:
                break
            lengths = np.fromiter((len(d) for d in ids), dtype=np.int64, count=len(ids))
            off_fh.write((n_tokens + np.concatenate([[0], np.cumsum(lengths)[:-1]])).astype(np.int64).tobytes())
            tok_fh.write(np.concatenate([np.asarray(d, dtype=dtype) for d in ids]).tobytes())
            n_tokens += int(lengths.sum())
            n_docs += len(ids)
            if on_tokens is not None:
                on_tokens(n_tokens)
            if max_tokens is not None and n_tokens >= max_tokens:
                break
        off_fh.write(np.array([n_tokens], dtype=np.int64).tobytes())
    tf = _publish(source, tok_path, off_path, dtype, n_tokens, n_docs)
    logger.info("tokenised %s: %d documents, %d tokens (%s)", source.describe(), n_docs, n_tokens, dtype)
    return tf


def _token_batches(source: TextSource, tokenizer, batch_docs: int) -> Iterator[list[list[int]]]:
    """Lists of token-id lists (BOS first, as the tokenizer adds it), `batch_docs` documents at a time."""
    batch: list[str] = []
    for doc in iter_documents(source):
        batch.append(doc)
        if len(batch) == batch_docs:
            yield tokenizer(batch).input_ids
            batch = []
    if batch:
        yield tokenizer(batch).input_ids


def _within_budget(ids: list[list[int]], budget: int | None) -> list[list[int]]:
    """The leading documents holding at most `budget` tokens in all (the last one cut short); no empty ones."""
    if budget is None:
        return [doc for doc in ids if doc]
    kept = []
    for doc in ids:
        if budget <= 0:
            break
        if doc:
            kept.append(doc[:budget])
            budget -= len(kept[-1])
    return kept


def tokenize_docs(
    source: TextSource,
    tokenizer_name: str,
    out_dir,
    part: int,
    doc_lo: int,
    doc_hi: int,
    batch_docs: int = BATCH_DOCS,
    max_tokens: int | None = None,
) -> dict:
    """Tokenise documents [doc_lo, doc_hi) of a source into `part-<part>.tokens` and `.lengths` (int64 per doc),
    stopping after the batch that reaches `max_tokens` (a capped corpus never needs more from one part: the parts
    before it hold zero tokens or more).

    Returns the part's paths, documents and tokens; files are written under .tmp names and renamed when done.
    """
    tokenizer = load_tokenizer(tokenizer_name)
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    dtype = token_dtype(tokenizer)
    tok_path, len_path = out / f"part-{part:06d}.tokens", out / f"part-{part:06d}.lengths"
    n_docs = n_tokens = 0
    docs = itertools.islice(iter_documents(source), doc_lo, doc_hi)
    with open(f"{tok_path}.tmp", "wb") as tok_fh, open(f"{len_path}.tmp", "wb") as len_fh:
        for batch in _batched(docs, batch_docs):
            ids = [d for d in tokenizer(batch).input_ids if d]
            tok_fh.write(np.concatenate([np.asarray(d, dtype=dtype) for d in ids]).tobytes() if ids else b"")
            len_fh.write(np.array([len(d) for d in ids], dtype=np.int64).tobytes())
            n_docs, n_tokens = n_docs + len(batch), n_tokens + sum(len(d) for d in ids)
            if max_tokens is not None and n_tokens >= max_tokens:
                break
    os.replace(f"{tok_path}.tmp", tok_path)
    os.replace(f"{len_path}.tmp", len_path)
    return {
        "part": part,
        "tokens_path": str(tok_path),
        "lengths_path": str(len_path),
        "dtype": dtype.str,
        "n_docs": n_docs,
        "n_tokens": n_tokens,
    }


def _batched(items, n: int):
    """Lists of up to n items."""
    it = iter(items)
    while batch := list(itertools.islice(it, n)):
        yield batch


def tokenize_parallel(
    source: TextSource,
    tokenizer_name: str,
    out_dir,
    run_map,
    *,
    workers: int,
    docs_per_task: int = 2_000,
    max_tokens: int | None = None,
    on_tokens: Callable[[int], None] | None = None,
) -> TokenFile:
    """`tokenize_source` spread over tasks by document ranges (waves of `workers` tasks); the identical file.

    A task holds `docs_per_task` documents (about 30 MB of the code corpus's files, a few MB of paragraphs), so a
    corpus of large documents still spreads over the workers; under `max_tokens` each task stops at the cap and no
    wave starts past it (a 10^6-token prefix of the 88M-token code corpus is one short task, not the whole file)."""
    out = Path(out_dir)
    parts: list[dict] = []
    while True:
        lo = len(parts) * docs_per_task
        calls = [
            dict(
                source=source,
                tokenizer_name=tokenizer_name,
                out_dir=str(out / "parts"),
                part=len(parts) + i,
                doc_lo=lo + i * docs_per_task,
                doc_hi=lo + (i + 1) * docs_per_task,
                max_tokens=max_tokens,
            )
            for i in range(workers)
        ]
        parts += run_map(tokenize_docs, calls, BATCH_DOCS * 50_000 + (64 << 20))  # a batch of docs, ~50 kB each
        n_tokens = sum(p["n_tokens"] for p in parts)
        if on_tokens is not None:
            on_tokens(n_tokens)
        if (max_tokens is not None and n_tokens >= max_tokens) or parts[-1]["n_docs"] < docs_per_task:
            break  # capped (a part stopped short at the cap counts its tokens), or the source ran out
    return join_token_parts(parts, source, out, max_tokens)


def join_token_parts(parts: list[dict], source: TextSource, out_dir, max_tokens: int | None) -> TokenFile:
    """Concatenate token parts in order into `<name>.tokens/.offsets`, cut at `max_tokens` as tokenize_source does."""
    out = Path(out_dir)
    tok_path, off_path = out / f"{source.name}.tokens", out / f"{source.name}.offsets"
    n_tokens = n_docs = 0
    dtype = parts[0]["dtype"]
    with open(f"{tok_path}.tmp", "wb") as tok_fh, open(f"{off_path}.tmp", "wb") as off_fh:
        for p in parts:
            lengths = np.fromfile(p["lengths_path"], dtype=np.int64)
            if max_tokens is not None:
                room = max_tokens - n_tokens
                keep = int(np.searchsorted(np.cumsum(lengths), room, side="left")) + 1  # the last one cut short
                lengths = lengths[:keep].copy()
                lengths[-1:] = np.minimum(lengths[-1:], room - (lengths[:-1].sum() if keep > 1 else 0))
                lengths = lengths[lengths > 0]
            if not len(lengths):
                continue
            tokens = np.fromfile(p["tokens_path"], dtype=dtype, count=int(lengths.sum()))
            off_fh.write((n_tokens + np.concatenate([[0], np.cumsum(lengths)[:-1]])).astype(np.int64).tobytes())
            tok_fh.write(tokens.tobytes())
            n_tokens, n_docs = n_tokens + int(lengths.sum()), n_docs + len(lengths)
            if max_tokens is not None and n_tokens >= max_tokens:
                break
        off_fh.write(np.array([n_tokens], dtype=np.int64).tobytes())
    tf = _publish(source, tok_path, off_path, dtype, n_tokens, n_docs)
    logger.info("tokenised %s in %d parts: %d documents, %d tokens", source.describe(), len(parts), n_docs, n_tokens)
    return tf


def _publish(source: TextSource, tok_path, off_path, dtype, n_tokens: int, n_docs: int) -> TokenFile:
    """Move the finished `.tmp` token and offset files into place; a corpus without one instance is refused (and
    its partial files removed)."""
    if n_tokens - n_docs <= 0:
        os.unlink(f"{tok_path}.tmp")
        os.unlink(f"{off_path}.tmp")
        raise CorpusError(
            f"{source.name}: {source.describe()} gave no instances ({n_docs} documents, {n_tokens} "
            "tokens); give a corpus with text"
        )
    os.replace(f"{tok_path}.tmp", tok_path)
    os.replace(f"{off_path}.tmp", off_path)
    return TokenFile(str(tok_path), str(off_path), np.dtype(dtype).str, n_tokens, n_docs)


def make_instances(
    tokens: np.ndarray, offsets: np.ndarray, window: int = 4, lo: int = 0, hi: int | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """Instances whose target position is in [lo, hi): contexts (n, window) int32 (PAD-padded), targets (n,) int32."""
    hi = len(tokens) if hi is None else min(hi, len(tokens))
    pos = np.arange(lo, hi, dtype=np.int64)
    start = offsets[np.searchsorted(offsets, pos, side="right") - 1]  # the start of each position's document
    keep = pos > start  # a document's first token (BOS) is never a target
    pos, start = pos[keep], start[keep]
    idx = pos[:, None] + np.arange(-window, 0)  # (n, window) positions of the context
    contexts = np.asarray(tokens[np.maximum(idx, 0)], dtype=np.int32)
    contexts[idx < start[:, None]] = PAD
    return contexts, np.asarray(tokens[pos], dtype=np.int32)


def shard_bounds(n_tokens: int, shards: int) -> list[tuple[int, int]]:
    """Split target positions [0, n_tokens) into `shards` contiguous ranges, in training order."""
    edges = np.linspace(0, n_tokens, max(1, shards) + 1).astype(np.int64)
    return [(int(a), int(b)) for a, b in zip(edges[:-1], edges[1:])]


def instance_offset(offsets: np.ndarray, position: int) -> int:
    """Index (in training order) of the first instance whose target position is >= `position`."""
    bos_before = int(np.searchsorted(offsets[:-1], position, side="left"))  # document starts < position
    return position - bos_before


def count_shard(
    tokens: np.ndarray, offsets: np.ndarray, window: int, lo: int, hi: int, chunk_tokens: int = CHUNK_TOKENS
) -> InstanceCounts | None:
    """Counts of the instances whose target lies in [lo, hi), chunk by chunk; None if there are none."""
    parts = []
    for a in range(lo, hi, chunk_tokens):
        b = min(hi, a + chunk_tokens)
        contexts, targets = make_instances(tokens, offsets, window, a, b)
        if len(targets):
            parts.append(count_instances(contexts, targets, offset=instance_offset(offsets, a)))
    return merge_counts(parts) if parts else None


def local_count_map(
    tokens: np.ndarray, offsets: np.ndarray, window: int, bounds: Sequence[tuple[int, int]]
) -> list[InstanceCounts | None]:
    """Count every shard here, one after the other."""
    return [count_shard(tokens, offsets, window, lo, hi) for lo, hi in bounds]


def source_fingerprint(source: TextSource) -> str:
    """Sizes and modification times of a local source's files (a dataset: its name), to notice a changed corpus."""
    if source.path is None:
        return source.describe()
    path = Path(source.path)
    files = sorted(p for p in path.rglob("*") if p.is_file()) if path.is_dir() else [path]
    items = [(str(p), p.stat().st_size, p.stat().st_mtime_ns) for p in files if p.exists()]
    return hashlib.sha256(json.dumps(items).encode()).hexdigest()[:16]


def local_bytes(source: TextSource) -> int:
    """Bytes of a local source's files; -1 for a dataset (never tokenised in parallel: see `workers.training.ibase`)."""
    if source.path is None:
        return -1
    path = Path(source.path)
    files = [p for p in path.rglob("*") if p.is_file()] if path.is_dir() else [path]
    return sum(p.stat().st_size for p in files if p.exists())

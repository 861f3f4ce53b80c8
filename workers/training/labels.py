"""Verifier labels: the verifier's greedy next token at every position of a tokenised corpus (teacher forcing).

A distilled instance base (`[[corpora]] labels = "verifier"`) keeps the corpus's contexts but takes each
instance's target from the verifier: at target position p, the argmax of the verifier's logits after reading
the document's tokens before p. The verifier reads fixed-length windows of `chunk_tokens` tokens, several per
forward pass (`batch_chunks`); windows never cross a document boundary, and consecutive windows of a document
overlap by `overlap_tokens`, so every labelled position sees at least `overlap_tokens` tokens of context (or
its whole document prefix when that is shorter), and at most `chunk_tokens - 1`:

    document  |BOS ............................................................|
    window 1  |<------------ chunk ------------>|           labels positions 1 .. chunk-1
    window 2                         |<-overlap->|<-- new -->...|  labels only the positions after the overlap

A window shorter than `chunk_tokens` (a document's end) is right-padded; causal attention keeps padding from
changing any real position's logits. Labels are written as a flat int32 array aligned with the token file,
`-1` at document starts (never a target).

Example:
    >>> labels = label_positions(verifier, tokens, offsets, chunk_tokens=512, overlap_tokens=128)
    >>> labels[1] == verifier.logits(tokens[:1]).argmax()
    True
"""

from __future__ import annotations

import hashlib
import json
import logging
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from workers.contracts import LabelJob, LabelRecord
from workers.igtree.instances import tokenize_source
from workers.training.label_progress import progress_file

logger = logging.getLogger(__name__)

NO_LABEL = -1


@dataclass(frozen=True)
class Window:
    """Tokens [start, end) of the corpus read in one row; it labels target positions [first, end)."""

    start: int
    end: int
    first: int


def windows(offsets: np.ndarray, chunk_tokens: int, overlap_tokens: int) -> Iterator[Window]:
    """The windows that label every non-first position of every document exactly once."""
    if not 0 <= overlap_tokens < chunk_tokens - 1:
        raise ValueError(f"overlap_tokens={overlap_tokens} must be in [0, chunk_tokens - 1) (chunk {chunk_tokens})")
    stride = chunk_tokens - overlap_tokens
    for doc_start, doc_end in zip(offsets[:-1].tolist(), offsets[1:].tolist()):
        start = doc_start
        while True:
            end = min(start + chunk_tokens, doc_end)
            first = start + 1 if start == doc_start else start + overlap_tokens
            if first < end:
                yield Window(start, end, first)
            if end >= doc_end:
                break
            start += stride


@torch.inference_mode()
def _argmax_rows(model, rows: list[np.ndarray], device) -> list[np.ndarray]:
    """Per row, the argmax after each of its tokens: rows right-padded into one (B, T) forward pass."""
    width = max(len(r) for r in rows)
    x = np.zeros((len(rows), width), dtype=np.int64)  # pad id 0: after every real token, so never attended to
    for i, r in enumerate(rows):
        x[i, : len(r)] = r
    logits = model(input_ids=torch.from_numpy(x).to(device), use_cache=False).logits  # (B, T, V)
    best = logits.argmax(dim=-1).cpu().numpy()  # (B, T)
    return [best[i, : len(r)] for i, r in enumerate(rows)]


def label_positions(
    verifier,
    tokens: np.ndarray,
    offsets: np.ndarray,
    *,
    chunk_tokens: int = 512,
    overlap_tokens: int = 128,
    batch_chunks: int = 8,
    on_progress=None,
) -> np.ndarray:
    """The verifier's greedy next token for every target position; (n_tokens,) int32, -1 at document starts.

    Windows are read longest first, as many per forward pass as fit `batch_chunks * chunk_tokens` padded tokens:
    a corpus of short documents (code files, paragraphs) then pads a pass to about its own rows' length, not to the
    longest window of a batch taken in corpus order. `on_progress(done, total)` hears the labelled positions."""
    labels = np.full(len(tokens), NO_LABEL, dtype=np.int32)
    todo = sorted(windows(offsets, chunk_tokens, overlap_tokens), key=lambda w: w.end - w.start, reverse=True)
    total, done = sum(w.end - w.first for w in todo), 0
    budget = batch_chunks * chunk_tokens
    i = 0
    while i < len(todo):
        width = todo[i].end - todo[i].start - 1  # the longest row of this pass (rows drop their last token)
        batch = todo[i : i + max(1, budget // max(width, 1))]
        i += len(batch)
        rows = [np.asarray(tokens[w.start : w.end - 1], dtype=np.int64) for w in batch]  # the token before each target
        for w, best in zip(batch, _argmax_rows(verifier.model, rows, verifier.device)):
            labels[w.first : w.end] = best[w.first - 1 - w.start :]
            done += w.end - w.first
        if on_progress is not None:
            on_progress(done, total)
    return labels


def _progress_reporter(name: str, path: Path | None = None, every_s: float = 5.0, log_every_s: float = 60.0):
    """`on_progress` for `label_positions`: the counts, rate and ETA written to `path` at most every `every_s`
    (atomically) and logged at most every `log_every_s`."""
    t0 = time.perf_counter()
    wrote = logged = t0

    def report(done: int, total: int) -> None:
        nonlocal wrote, logged
        now = time.perf_counter()
        rate = done / max(now - t0, 1e-9)
        eta = (total - done) / rate if rate else None
        if path is not None and (now - wrote >= every_s or done >= total or done == 0):
            wrote = now
            tmp = path.with_name(path.name + ".tmp")
            tmp.write_text(json.dumps({"name": name, "done": done, "total": total, "rate": rate, "eta_s": eta}))
            tmp.replace(path)
        if now - logged >= log_every_s or done >= total:
            logged = now
            logger.info("labelling %s: %d/%d positions, %.0f/s, ETA %s s", name, done, total, rate, eta)

    return report


def agreement(tokens: np.ndarray, labels: np.ndarray) -> float:
    """Share of labelled positions where the verifier's token equals the corpus's (how much distilling changes)."""
    mask = labels != NO_LABEL
    return float((np.asarray(tokens)[mask] == labels[mask]).mean()) if mask.any() else 0.0


def label_corpus(verifier, tokenizer, job: LabelJob) -> LabelRecord:
    """Tokenise `job.corpus`, label it with the verifier, write token file, labels and manifest; timed."""
    out = Path(job.out_dir) / f"{job.corpus.name}-labels-{job.key[:12]}"
    out.mkdir(parents=True, exist_ok=True)
    verifier.sync()
    started_at, t0 = time.time(), time.perf_counter()
    tf = tokenize_source(job.corpus, tokenizer, out, max_tokens=job.max_tokens)
    tokens = tf.tokens()
    labels = label_positions(
        verifier,
        tokens,
        tf.offsets(),
        chunk_tokens=job.chunk_tokens,
        overlap_tokens=job.overlap_tokens,
        batch_chunks=job.batch_chunks,
        on_progress=_progress_reporter(job.corpus.name, progress_file(job.out_dir, job.key)),
    )
    labels_path = out / f"{job.corpus.name}.labels"
    labels.tofile(labels_path)
    verifier.sync()
    wall_s, ended_at = time.perf_counter() - t0, time.time()
    manifest = {
        "tokens": tf.tokens_path,
        "offsets": tf.offsets_path,
        "labels": str(labels_path),
        "dtype": tf.dtype,
        "n_tokens": tf.n_tokens,
        "n_docs": tf.n_docs,
        "chunk_tokens": job.chunk_tokens,
        "overlap_tokens": job.overlap_tokens,
    }
    path = out / "manifest.json"
    path.write_text(json.dumps(manifest, indent=1))
    n_bytes = sum(Path(p).stat().st_size for p in (tf.tokens_path, tf.offsets_path, labels_path))
    logger.info("labelled %s: %d tokens in %.1f s", job.corpus.name, tf.n_tokens, wall_s)
    return LabelRecord(
        path=str(path),
        sha256=hashlib.sha256(labels.tobytes()).hexdigest(),
        bytes=n_bytes,
        n_tokens=tf.n_tokens,
        n_docs=tf.n_docs,
        n_labelled=int((labels != NO_LABEL).sum()),
        agreement=agreement(tokens, labels),
        chunk_tokens=job.chunk_tokens,
        overlap_tokens=job.overlap_tokens,
        wall_s=wall_s,
        started_at=started_at,
        ended_at=ended_at,
        device=str(verifier.device),
    )


def load_labelled(manifest_path: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(tokens, offsets, labels) of a label manifest written by `label_corpus`."""
    with open(manifest_path, encoding="utf-8") as fh:
        m = json.load(fh)
    tokens = np.memmap(m["tokens"], dtype=m["dtype"], mode="r", shape=(m["n_tokens"],))
    return tokens, np.fromfile(m["offsets"], dtype=np.int64), np.fromfile(m["labels"], dtype=np.int32)

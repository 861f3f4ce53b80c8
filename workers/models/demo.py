"""Small local models for offline runs: a demo verifier and a smaller neural draft, trained here on CPU.

Both are Mistral-architecture causal LMs (`MistralForCausalLM`) over the real Mistral-7B tokenizer
(vocab 32000, so they plug into every draft and the verifier exactly like the real models), trained for a
few minutes on the demo corpora's train files. They are *stand-ins* for Mistral-7B and TinyLlama so the
demo runs offline; their numbers say nothing about those models.

The trained models are cached under `cache_dir()/demo-models/<key>/{verifier,draft}`, where `<key>` hashes
the model/training specs, the tokenizer and the bytes of the training files: the same inputs reuse the same
models; any change trains new ones. A model set is trained in a temporary directory and renamed into place,
so a cache entry is either complete or absent.

Example:
    >>> corpora = write_demo_corpora("demo-data")
    >>> models = ensure_demo_models([c.train_path for c in corpora.values()])
    >>> AutoModelForCausalLM.from_pretrained(models.verifier_dir)   # a MistralForCausalLM
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import json
import logging
import math
import os
import shutil
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from workers.corpora import TextSource, iter_documents
from workers.errors import CorpusError, ModelError
from workers.files import cache_dir
from workers.models.tokenizer import load_tokenizer, tokenizer_id

logger = logging.getLogger(__name__)

CACHE_FORMAT = 2  # bump when the training recipe changes in a way the specs do not capture
REPORT_FILE = "training.json"


@dataclass(frozen=True)
class TinyLMSpec:
    """Architecture and training recipe of one demo model (all of it goes into the cache key)."""

    hidden_size: int
    n_layers: int
    n_heads: int
    n_kv_heads: int
    intermediate_size: int
    steps: int
    batch_size: int = 2
    seq_len: int = 256  # covers a 50-word prompt (~80 tokens) plus 100+ new tokens: RoPE is not asked to extrapolate
    lr: float = 3e-3
    warmup_steps: int = 20
    weight_decay: float = 0.01
    seed: int = 0
    max_positions: int = 2048
    tie_embeddings: bool = False  # untied learnt faster per step in a measured probe; the forward cost is the same
    # The softmax over all 32000 tokens is most of the cost. Most steps score only a candidate set; the last
    # `full_softmax_steps` score all 32000. The model keeps its 32000-way output. With `frequent` = 0 the
    # candidates are every token seen in training (~14k) plus `negatives` random unseen ones; with
    # `frequent` > 0 they are the `frequent` most common training tokens, the batch's own tokens and
    # `negatives` random others, and each logit is corrected by -log(inclusion probability) (sampled
    # softmax), so that rarely scored tokens are not left too high.
    negatives: int = 2048
    full_softmax_steps: int = 20
    frequent: int = 0


# Sized so that the verifier costs clearly more per forward than the draft (2x the layers, 2x the width)
# while both train in a few minutes on 2 cores; the 32000 x hidden embeddings dominate the parameters.
# Batches of 8 x 256 tokens amortise the optimizer step over the 20M parameters, and the sampled softmax
# over the 4096 commonest tokens (~95% of training tokens) costs ~0.7x the CPU of scoring all ~14k seen ones
# for a lower full-vocab loss (measured at 200 steps: 5.44 vs 5.49 nats). With the old recipe (2 x 256, 540
# steps, 5.58 nats) the verifier's greedy text looped on ", and thee, / I / I" and the olifant drafts were
# accepted 3-9% of the time; 450 steps reached ~4.6 nats and accepted 10-16% on its own domain, but took 8.5 min
# on a 2-core machine whose hypervisor stole a quarter of its time, over half of `make demo`'s 15 minutes from a
# fresh clone. 300 steps (~4.8 nats at step 300 of that run, the schedule now decaying earlier) take about 2/3.
DEMO_VERIFIER = TinyLMSpec(
    hidden_size=256,
    n_layers=4,
    n_heads=4,
    n_kv_heads=2,
    intermediate_size=768,
    steps=300,
    batch_size=8,
    negatives=1024,
    frequent=4096,
)
DEMO_DRAFT = TinyLMSpec(
    hidden_size=128,
    n_layers=2,
    n_heads=4,
    n_kv_heads=2,
    intermediate_size=384,
    steps=100,
    batch_size=8,
    negatives=1024,
    frequent=4096,
)


@dataclass(frozen=True)
class TrainReport:
    """How one model was trained: size, steps, losses (nats/token) and wall time."""

    n_params: int
    steps: int
    tokens_seen: int
    first_loss: float  # the first step's (untrained) loss over all 32000 tokens, about ln(32000) = 10.4
    final_loss: float  # mean over the last min(10, full_softmax_steps) steps, also over all 32000 tokens
    train_s: float
    cpu_s: float  # process CPU time: about train_s x threads on an idle machine, a fairer figure on a busy one


@dataclass(frozen=True)
class DemoModels:
    """The demo verifier and draft directories (each loads with `from_pretrained`) and how they were made."""

    verifier_dir: Path
    draft_dir: Path
    verifier_report: TrainReport
    draft_report: TrainReport
    reused: bool


def ensure_demo_models(
    corpus_paths: Sequence[str | Path],
    retrain: bool = False,
    verifier: TinyLMSpec = DEMO_VERIFIER,
    draft: TinyLMSpec = DEMO_DRAFT,
    root: str | Path | None = None,
    threads: int | None = None,
) -> DemoModels:
    """Return cached demo models trained on `corpus_paths` (text files), training them first if needed.

    `retrain` rebuilds even when a cached set exists. `root` defaults to `cache_dir()/demo-models`;
    `threads` (torch intra-op threads while training) defaults to min(2, CPUs).
    """
    paths = [Path(p) for p in corpus_paths]
    tok = load_tokenizer("mistral")
    root_dir = Path(root) if root is not None else cache_dir() / "demo-models"
    final = root_dir / cache_key(paths, verifier, draft, tokenizer_id(tok))
    if final.is_dir() and not retrain:
        logger.info("demo models: reusing %s", final)
        return _load_entry(final, reused=True)
    tmp = root_dir / f".{final.name}.tmp-{os.getpid()}"
    shutil.rmtree(tmp, ignore_errors=True)
    try:
        streams = token_streams(paths, tok)
        with _torch_threads(threads or min(2, os.cpu_count() or 1)):
            for name, spec in (("verifier", verifier), ("draft", draft)):
                logger.info("demo models: training the %s (%s)", name, spec)
                train_lm(spec, streams, tmp / name, tok)
        _install(tmp, final)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return _load_entry(final, reused=False)


def ensure_demo_draft(
    corpus_paths: Sequence[str | Path],
    tokenizer: str,
    retrain: bool = False,
    spec: TinyLMSpec = DEMO_DRAFT,
    root: str | Path | None = None,
    threads: int | None = None,
) -> Path:
    """A cached small draft LM over `tokenizer`'s vocabulary (e.g. "smollm2-135m"), trained on `corpus_paths` first
    if needed: the neural draft beside a real verifier, which needs no demo verifier trained."""
    paths = [Path(p) for p in corpus_paths]
    tok = load_tokenizer(tokenizer)
    root_dir = Path(root) if root is not None else cache_dir() / "demo-models"
    final = root_dir / f"draft-{cache_key(paths, spec, spec, tokenizer_id(tok))}"
    if (final / REPORT_FILE).is_file() and not retrain:
        logger.info("demo draft: reusing %s", final)
        return final
    tmp = root_dir / f".{final.name}.tmp-{os.getpid()}"
    shutil.rmtree(tmp, ignore_errors=True)
    try:
        with _torch_threads(threads or min(2, os.cpu_count() or 1)):
            logger.info("demo models: training the neural draft over %s's vocabulary (%s)", tokenizer, spec)
            train_lm(spec, token_streams(paths, tok), tmp, tok)
        _install(tmp, final)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return final


def cache_key(paths: Sequence[Path], verifier: TinyLMSpec, draft: TinyLMSpec, tok_id: str) -> str:
    """A hex key over the specs, the tokenizer and the training files' bytes (in the given order)."""
    h = hashlib.sha256()
    h.update(json.dumps([CACHE_FORMAT, tok_id, dataclasses.asdict(verifier), dataclasses.asdict(draft)]).encode())
    for path in paths:
        if not path.is_file():
            raise CorpusError(f"demo models: training file not found: {path}")
        h.update(hashlib.sha256(path.read_bytes()).digest())
    return h.hexdigest()[:16]


def token_streams(paths: Sequence[Path], tok) -> list[np.ndarray]:
    """One int64 token stream per file: each document as BOS + its tokens, documents back to back."""
    streams = []
    for path in paths:
        docs = list(iter_documents(TextSource(name=path.stem, path=str(path))))
        ids = tok(docs, add_special_tokens=False)["input_ids"]
        stream = np.fromiter((t for doc in ids for t in (tok.bos_token_id, *doc)), dtype=np.int64)
        logger.info("demo models: %s -> %d documents, %d tokens", path.name, len(docs), len(stream))
        streams.append(stream)
    return streams


def train_lm(spec: TinyLMSpec, streams: Sequence[np.ndarray], out_dir: Path, tok) -> TrainReport:
    """Train one Mistral-architecture LM from scratch (AdamW, fp32) and save it with its tokenizer."""
    from transformers import MistralForCausalLM

    torch.manual_seed(spec.seed)
    model = MistralForCausalLM(mistral_config(spec, tok))
    n_params = sum(p.numel() for p in model.parameters())
    opt = torch.optim.AdamW(model.parameters(), lr=spec.lr, betas=(0.9, 0.95), weight_decay=spec.weight_decay)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda step: lr_factor(step, spec.warmup_steps, spec.steps))
    losses: list[float] = []
    t0, cpu0 = time.perf_counter(), time.process_time()
    model.train()
    sampler = CandidateSampler(streams, len(tok), spec)
    for step, batch in enumerate(batches(streams, spec), 1):
        full = step == 1 or step > spec.steps - spec.full_softmax_steps  # first and last losses comparable
        loss = lm_loss(model, batch, *((None, None) if full else sampler(batch)))
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        sched.step()
        opt.zero_grad(set_to_none=True)
        losses.append(loss.item())
        if step % 20 == 0 or step == spec.steps:
            elapsed_s, cpu_s = time.perf_counter() - t0, time.process_time() - cpu0
            logger.info(
                "  step %d/%d loss %.3f (%.0f s, %.0f s CPU)", step, spec.steps, np.mean(losses[-20:]), elapsed_s, cpu_s
            )
    train_s, cpu_s = time.perf_counter() - t0, time.process_time() - cpu0
    n_avg = max(1, min(10, spec.full_softmax_steps))
    report = TrainReport(
        n_params=n_params,
        steps=spec.steps,
        tokens_seen=spec.steps * spec.batch_size * spec.seq_len,
        first_loss=losses[0],
        final_loss=float(np.mean(losses[-n_avg:])),
        train_s=round(train_s, 2),
        cpu_s=round(cpu_s, 2),
    )
    _save(model, tok, out_dir, report)
    return report


class CandidateSampler:
    """Per-step candidate token ids (sorted) and their log inclusion probabilities (None: no correction)."""

    def __init__(self, streams: Sequence[np.ndarray], vocab_size: int, spec: TinyLMSpec):
        self.spec = spec
        # p[t]: the chance that one batch position holds token t (rows are taken from the streams in turn)
        shares = np.bincount(np.arange(spec.batch_size) % len(streams), minlength=len(streams)) / spec.batch_size
        p = sum(share * np.bincount(s, minlength=vocab_size) / len(s) for share, s in zip(shares, streams))
        if spec.frequent > 0:
            always = np.sort(np.argsort(-p, kind="stable")[: spec.frequent])
        else:
            always = np.flatnonzero(p > 0)  # every token seen in training
        rest = np.setdiff1d(np.arange(vocab_size), always)
        self.always, self.rest = torch.from_numpy(always), torch.from_numpy(rest)
        # inclusion probability of a `rest` token: in the batch (B*T draws) or among the random negatives
        miss_negative = 1.0 - min(1.0, spec.negatives / max(1, len(rest)))
        q = np.ones(vocab_size)
        q[rest] = 1.0 - miss_negative * (1.0 - p[rest]) ** (spec.batch_size * spec.seq_len)
        self.log_q = torch.from_numpy(np.log(q)).float()
        self.gen = torch.Generator().manual_seed(spec.seed)

    def __call__(self, batch: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor | None]:
        """The (vocab, log_q) to score `batch` (B, T) with; the targets are always among the candidates."""
        picked = self.rest[torch.randperm(len(self.rest), generator=self.gen)[: self.spec.negatives]]
        if self.spec.frequent <= 0:
            return torch.sort(torch.cat([self.always, picked])).values, None
        vocab = torch.unique(torch.cat([self.always, picked, batch.reshape(-1)]))  # sorted
        return vocab, self.log_q[vocab]


def lm_loss(model, batch: torch.Tensor, vocab: torch.Tensor | None, log_q: torch.Tensor | None = None) -> torch.Tensor:
    """Next-token cross-entropy (nats) of a (B, T) batch; over the `vocab` ids only when given (cheaper).

    `log_q` (len(vocab)), when given, is subtracted from the logits: the sampled-softmax correction.
    """
    if vocab is None:
        return model(input_ids=batch, labels=batch).loss  # labels are shifted inside the model
    hidden = model.model(input_ids=batch).last_hidden_state[:, :-1]  # (B, T-1, C)
    logits = torch.nn.functional.linear(hidden, model.lm_head.weight[vocab])  # (B, T-1, len(vocab))
    if log_q is not None:
        logits = logits - log_q
    targets = torch.searchsorted(vocab, batch[:, 1:].contiguous())  # position of each target id in the sorted vocab
    return torch.nn.functional.cross_entropy(logits.reshape(-1, len(vocab)), targets.reshape(-1))


def mistral_config(spec: TinyLMSpec, tok):
    """The MistralConfig for a spec: the full 32000-token vocab, no sliding window."""
    from transformers import MistralConfig

    return MistralConfig(
        vocab_size=len(tok),  # the whole Mistral vocab: drafts and verifier must share token ids
        hidden_size=spec.hidden_size,
        intermediate_size=spec.intermediate_size,
        num_hidden_layers=spec.n_layers,
        num_attention_heads=spec.n_heads,
        num_key_value_heads=spec.n_kv_heads,
        max_position_embeddings=spec.max_positions,
        tie_word_embeddings=spec.tie_embeddings,
        sliding_window=None,
        bos_token_id=tok.bos_token_id,
        eos_token_id=tok.eos_token_id,
    )


def batches(streams: Sequence[np.ndarray], spec: TinyLMSpec) -> Iterator[torch.Tensor]:
    """`spec.steps` batches (B, T) of random windows, rows taken from the streams in turn (domains balanced)."""
    rng = np.random.default_rng(spec.seed)
    for stream in streams:
        if len(stream) <= spec.seq_len:
            raise CorpusError(f"demo models: a training file has {len(stream)} tokens, need > seq_len {spec.seq_len}")
    for _ in range(spec.steps):
        rows = []
        for j in range(spec.batch_size):
            stream = streams[j % len(streams)]
            start = int(rng.integers(0, len(stream) - spec.seq_len))
            rows.append(stream[start : start + spec.seq_len])
        yield torch.from_numpy(np.stack(rows))  # (B, T) int64


def lr_factor(step: int, warmup_steps: int, total_steps: int) -> float:
    """Linear warm-up, then cosine decay to 10% of the peak learning rate."""
    if step < warmup_steps:
        return (step + 1) / warmup_steps
    progress = (step - warmup_steps) / max(1, total_steps - warmup_steps)
    return 0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * min(1.0, progress)))


def _save(model, tok, out_dir: Path, report: TrainReport) -> None:
    """Write model weights/config, the tokenizer and the training report into `out_dir`."""
    out_dir.mkdir(parents=True, exist_ok=True)
    model.eval()
    model.save_pretrained(out_dir)
    tok.save_pretrained(out_dir)
    (out_dir / REPORT_FILE).write_text(json.dumps(dataclasses.asdict(report), indent=2) + "\n")


def _install(tmp: Path, final: Path) -> None:
    """Move a freshly trained set into place; an older set at `final` is replaced, never half-overwritten."""
    if not final.exists():
        try:
            os.rename(tmp, final)
            return
        except OSError:
            if not final.exists():
                raise
    old = final.with_name(f".{final.name}.old-{os.getpid()}")
    os.rename(final, old)
    os.rename(tmp, final)
    shutil.rmtree(old, ignore_errors=True)


def _load_entry(entry: Path, reused: bool) -> DemoModels:
    """The DemoModels of a cache entry, with the training reports read back from disk."""
    reports = {}
    for name in ("verifier", "draft"):
        report_path = entry / name / REPORT_FILE
        try:
            reports[name] = TrainReport(**json.loads(report_path.read_text()))
        except (OSError, ValueError, TypeError) as err:
            raise ModelError(
                f"demo models: {report_path} is missing or unreadable; rebuild with `greenspec demo --retrain`"
            ) from err
    return DemoModels(entry / "verifier", entry / "draft", reports["verifier"], reports["draft"], reused)


@contextlib.contextmanager
def _torch_threads(n: int):
    """Run with `n` torch intra-op threads, restoring the previous count afterwards."""
    before = torch.get_num_threads()
    torch.set_num_threads(n)
    try:
        yield
    finally:
        torch.set_num_threads(before)

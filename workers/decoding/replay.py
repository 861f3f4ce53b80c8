"""Replay: a greedy generation's rounds computed exactly from its prompt's greedy reference, without the verifier.

At temperature 0 a speculative generation emits exactly the verifier's greedy continuation, which the prompt's
reference cell stores. Every round is therefore fixed by the draft (given prompt + reference so far) and the
reference: the same decoding code (`workers.decoding.speculative_generate`, every regime, chains and token trees,
adaptive length, `k = "auto"`) runs for real against `ReferenceVerifier`, a stand-in whose greedy token after any
prefix of prompt + reference is the reference's next token. Off that path it answers `vocab_size`, an id no draft
can propose (drafts are cut at the vocabulary), so nothing off the path is ever accepted. The passes, drafted,
accepted and per-round lists come out as a timed generation's; only time and energy need the real verifier, and the
pass-cost model (`workers.costmodel`) predicts them from the recorded pass shapes.

What replay refuses, in one line each: temperature > 0 (a sampled generation is not fixed by the reference), a draft
whose state outlives a generation (`suffix` with `remember_outputs`: its rounds depend on which generations ran
before it), and a reference that the replayed generation does not reproduce (`ReplayMismatch`, naming the round).

Example:
    >>> res = replay_generate(draft, prompt_ids, reference, vocab_size=49152, eos_id=2, max_new_tokens=100,
    ...                       k=5, regime="cached")      # any workers.drafts draft
    >>> res.tokens == tuple(reference)
    True
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from workers.decoding import GenerationResult, regime_flags, speculative_generate
from workers.drafts.base import Draft
from workers.errors import GreenspecError


class ReplayError(GreenspecError):
    """A generation that cannot be replayed (sampled, or a draft with state across generations)."""


class ReplayMismatch(GreenspecError):
    """A replayed generation that does not reproduce its reference, or a timed one whose passes differ from replay's."""


def outlives_generation(draft: Draft) -> bool:
    """Whether a draft keeps state from one generation to the next (its rounds then depend on the run's order)."""
    inner = getattr(draft, "draft", None)  # wrappers (adaptive length, k = "auto") keep their draft here
    return bool(getattr(draft, "remember_outputs", False)) or (inner is not None and outlives_generation(inner))


class ReferenceVerifier:
    """A stand-in for `workers.verifier.Verifier` whose greedy token after a prefix of `path` is the next one of it.

    It takes the same calls (uncached `logits`, `prefill`/`extend`/`crop` over a cache, token-tree `masked` passes
    and `keep_rows`) and records each pass's shape in `last_shape` as the real one does; its "cache" is the list of
    token ids fed. Logits are one-hot rows over vocab_size + 1 ids, the last one being the off-path answer.
    """

    def __init__(self, path: Sequence[int], vocab_size: int):
        self.path = [int(t) for t in path]
        self.vocab_size = int(vocab_size)
        self.off_path = self.vocab_size  # no draft proposes it: off the reference path nothing is accepted
        self.device = torch.device("cpu")
        self.dtype = torch.float32
        self.cache: list[int] | None = None
        self.last_shape: tuple[int, int, int] = (0, 0, 0)

    def sync(self) -> None:
        """Nothing queued: the stand-in computes on the CPU at once."""

    @property
    def cached_len(self) -> int:
        """Tokens the cache holds (0 before prefill)."""
        return 0 if self.cache is None else len(self.cache)

    def _target(self, seq_len: int, on_path: bool) -> int:
        """The greedy token after a sequence of `seq_len` tokens that is (or is not) a prefix of the path."""
        return self.path[seq_len] if on_path and seq_len < len(self.path) else self.off_path

    def _one_hot(self, targets: Sequence[int]) -> torch.Tensor:
        logits = torch.zeros(len(targets), self.vocab_size + 1)
        logits[torch.arange(len(targets)), torch.tensor(list(targets), dtype=torch.long)] = 1.0
        return logits

    def _linear(self, full: Sequence[int], n_new: int, keep: int) -> torch.Tensor:
        """Rows for the last `keep` (all `n_new` when 0) of the new tokens at the end of the causal sequence `full`."""
        n = len(full)
        match = 0
        while match < n and match < len(self.path) and full[match] == self.path[match]:
            match += 1
        rows = keep if 0 < keep < n_new else n_new
        return self._one_hot([self._target(j + 1, j + 1 <= match) for j in range(n - rows, n)])

    def _shape(self, fed: int, cached: int, keep: int) -> None:
        self.last_shape = (fed, cached, keep if 0 < keep < fed else fed)

    def logits(self, ids: Sequence[int], keep: int = 0) -> torch.Tensor:
        """Uncached: the rows of the last `keep` positions of `ids` (all when 0)."""
        ids = [int(t) for t in ids]
        self._shape(len(ids), 0, keep)
        return self._linear(ids, len(ids), keep)

    def prefill(self, ids: Sequence[int], keep: int = 0) -> torch.Tensor:
        """A fresh cache holding `ids`."""
        self.cache = []
        return self.extend(ids, keep)

    def extend(self, new_ids: Sequence[int], keep: int = 0) -> torch.Tensor:
        """`new_ids` after the cached tokens."""
        if self.cache is None:
            raise RuntimeError("ReferenceVerifier.extend before prefill")
        new_ids = [int(t) for t in new_ids]
        self._shape(len(new_ids), len(self.cache), keep)
        self.cache = self.cache + new_ids
        return self._linear(self.cache, len(new_ids), keep)

    def masked(
        self, ids: Sequence[int], positions: Sequence[int], mask: torch.Tensor, cache: str, keep: int = 0
    ) -> torch.Tensor:
        """A token-tree pass: each kept query's sequence is the keys its mask row lets it see, in order."""
        ids = [int(t) for t in ids]
        if cache == "extend" and self.cache is None:
            raise RuntimeError("ReferenceVerifier.masked(cache='extend') before prefill")
        prefix = self.cache if cache == "extend" else []
        self._shape(len(ids), len(prefix), keep)
        keys = prefix + ids
        rows = keep if 0 < keep < len(ids) else len(ids)
        seen = (mask[0, 0, -rows:] == 0).tolist()
        targets = []
        for row in seen:
            seq = [keys[c] for c, visible in enumerate(row) if visible]
            targets.append(self._target(len(seq), seq == self.path[: len(seq)]))
        if cache != "none":
            self.cache = keys
        return self._one_hot(targets)

    def keep_rows(self, n_prefix: int, rows: Sequence[int]) -> None:
        """Keep the cache's first `n_prefix` tokens, then only those at `rows`."""
        self.cache = self.cache[:n_prefix] + [self.cache[r] for r in rows]

    def crop(self, n_tokens: int) -> None:
        """Cut the cache back to its first `n_tokens` tokens."""
        if self.cache is not None:
            self.cache = self.cache[:n_tokens]


def first_divergence(a: Sequence[int], b: Sequence[int]) -> int | None:
    """The first index where two per-round lists differ (their common length when one is a prefix), None if equal."""
    for i, (x, y) in enumerate(zip(a, b)):
        if x != y:
            return i
    return None if len(a) == len(b) else min(len(a), len(b))


def replay_generate(
    draft: Draft,
    prompt_ids: Sequence[int],
    reference: Sequence[int],
    *,
    vocab_size: int,
    eos_id: int | None,
    max_new_tokens: int,
    k: int,
    regime: str,
    temperature: float = 0.0,
    trees: bool = False,
) -> GenerationResult:
    """The greedy generation of `draft` at (k, regime) after `prompt_ids`, replayed against `reference` (the verifier's
    greedy new tokens for that prompt, as the reference cell stored them); see the module doc."""
    if temperature:
        raise ReplayError(f"replay is greedy only: temperature {temperature} > 0 is sampled; time it instead")
    if outlives_generation(draft):
        raise ReplayError(
            f"draft {draft.name!r} keeps state across generations (remember_outputs), so its rounds depend on the "
            "order generations run in; time it instead"
        )
    prompt, reference = [int(t) for t in prompt_ids], [int(t) for t in reference]
    cached, fastpath = regime_flags(regime)
    stand_in = ReferenceVerifier(prompt + reference, vocab_size)
    res = speculative_generate(
        stand_in, draft, prompt, max_new_tokens, k, cached, eos_id=eos_id, fastpath=fastpath, trees=trees
    )
    expected = reference[:max_new_tokens]
    if list(res.tokens) != expected:
        at = first_divergence(res.tokens, expected)
        round_at = next((i for i, n in enumerate(_cumsum(res.tokens_per_step)) if n > (at or 0)), None)
        raise ReplayMismatch(
            f"replay of {draft.name!r} at k={k} {regime} left its reference at token {at} (round {round_at}): "
            f"the reference has {len(reference)} tokens for max_new_tokens={max_new_tokens}"
        )
    return res


def _cumsum(xs: Sequence[int]) -> list[int]:
    out, total = [], 0
    for x in xs:
        total += x
        out.append(total)
    return out


ROUND_LISTS = ("tokens_per_step", "accepted_per_step", "drafted_per_step")


def rounds_differ(timed, replayed) -> str | None:
    """None when a timed and a replayed generation (records or dicts of their per-round lists) made identical
    rounds; else one line naming the first round that differs (the reference and the verifier disagree there: fp16 on
    a GPU, a non-deterministic kernel). A list either side lacks is not compared."""

    def rounds(g, name):
        return list((g.get(name) if isinstance(g, dict) else getattr(g, name, None)) or [])

    for name in ROUND_LISTS:
        a, b = rounds(timed, name), rounds(replayed, name)
        if not a or not b:
            continue
        at = first_divergence(a, b)
        if at is not None:
            return (
                f"timed and replayed generations diverge at round {at} ({name}: timed {a[at : at + 1]}, replayed "
                f"{b[at : at + 1]}): the verifier's greedy tokens differ from its stored reference"
            )
    return None


_TOKENIZERS: dict[str, object] = {}
_DRAFTS: dict[tuple, Draft] = {}
MAX_DRAFTS = 4  # drafts kept loaded per worker process (a batch is one strategy; batches of a few alternate)


def _tokenizer(name: str):
    """The verifier's tokenizer, loaded once per worker process (some drafts build on it)."""
    if name not in _TOKENIZERS:
        from workers.tokenizer import load_tokenizer

        _TOKENIZERS[name] = load_tokenizer(name)
    return _TOKENIZERS[name]


def _draft(job, tokenizer: str) -> Draft:
    """The job's draft, built once per worker process and strategy (its artifacts and options in the key)."""
    from workers.drafts import BuildContext, build_draft

    key = (job.strategy, job.draft, tuple(sorted(job.artifacts.items())), repr(sorted(job.options.items())))
    if key not in _DRAFTS:
        while len(_DRAFTS) >= MAX_DRAFTS:
            _DRAFTS.pop(next(iter(_DRAFTS)))
        ctx = BuildContext(tokenizer=_tokenizer(tokenizer), device="cpu", artifacts=dict(job.artifacts))
        _DRAFTS[key] = build_draft(job.draft, dict(job.options), ctx)
    return _DRAFTS[key]


def replay_job(job, tokenizer: str):
    """One `workers.contracts.ReplayJob` replayed: its GenerationRecord (measure "replay"; times are the CPU's own:
    the driver puts the cost model's prediction in)."""
    from workers.autok import decoding_plan
    from workers.contracts import generation_record

    draft = _draft(job, tokenizer)
    draft, plan = decoding_plan(None, draft, dict(job.options), job.regime, job.prompt_tokens, job.k, job.costs)
    res = replay_generate(
        draft,
        job.prompt_tokens,
        job.reference,
        vocab_size=job.vocab_size,
        eos_id=job.eos_id,
        max_new_tokens=job.max_new_tokens,
        k=job.k,
        regime=job.regime,
        trees=plan.get("trees", False),
    )
    return generation_record(res, len(job.prompt_tokens), job.text, "replay", measure="replay")


def run_replay_batch(jobs, tokenizer: str, worker: str) -> list:
    """Replay a batch of jobs (one strategy: its draft loads once); each outcome carries its record or its error's
    first line, so one bad cell does not fail the batch."""
    from workers.contracts import JobOutcome
    from workers.verifier import first_line

    out = []
    for job in jobs:
        try:
            out.append(JobOutcome(key=job.key, worker=worker, generation=replay_job(job, tokenizer)))
        except Exception as err:  # noqa: BLE001 (recorded per cell, as the accelerator worker does)
            out.append(JobOutcome(key=job.key, worker=worker, error=f"{type(err).__name__}: {first_line(err)}"))
    return out

"""Replay on a CPU worker: a batch of `workers.contracts.ReplayJob`s replayed from their prompts' references
(`workers.replay.verifier`, the decoding's own rounds against a stand-in verifier); whether a timed generation made
the rounds its replay made is `workers.replay.rounds.rounds_differ`.

Example:
    >>> outcomes = run_replay_batch(jobs, "smollm2-135m", worker="node-1")   # one strategy's jobs
    >>> from workers.replay.rounds import rounds_differ
    >>> rounds_differ(timed_record, outcomes[0].generation) is None
    True
"""

from __future__ import annotations

from workers.contracts import GenerationRecord, JobOutcome
from workers.decoding.autok import decoding_plan
from workers.decoding.options import DecodeOptions
from workers.drafts import BuildContext, Draft, build_draft
from workers.errors import first_line
from workers.models.tokenizer import load_tokenizer
from workers.replay.verifier import replay_generate

_TOKENIZERS: dict[str, object] = {}
_DRAFTS: dict[tuple, Draft] = {}
MAX_DRAFTS = 4  # drafts kept loaded per worker process (a batch is one strategy; batches of a few alternate)


def clear_caches() -> None:
    """Forget the tokenizers and drafts this process loaded (a Ray worker keeps them between batches of a run)."""
    _TOKENIZERS.clear()
    _DRAFTS.clear()


def _tokenizer(name: str):
    """The verifier's tokenizer, loaded once per worker process (some drafts build on it)."""
    if name not in _TOKENIZERS:
        _TOKENIZERS[name] = load_tokenizer(name)
    return _TOKENIZERS[name]


def _draft(job, tokenizer: str) -> Draft:
    """The job's draft, built once per worker process and strategy (its artifacts and options in the key)."""
    cell = job.cell
    key = (cell.strategy, cell.draft, tuple(sorted(cell.artifacts.items())), repr(sorted(cell.options.items())))
    if key not in _DRAFTS:
        while len(_DRAFTS) >= MAX_DRAFTS:
            _DRAFTS.pop(next(iter(_DRAFTS)))
        ctx = BuildContext(tokenizer=_tokenizer(tokenizer), device="cpu", artifacts=dict(cell.artifacts))
        _DRAFTS[key] = build_draft(cell.draft, dict(cell.options), ctx)
    return _DRAFTS[key]


def replay_job(job, tokenizer: str):
    """One `workers.contracts.ReplayJob` replayed: its GenerationRecord (measure "replay"; times are the CPU's own:
    the driver puts the cost model's prediction in)."""
    draft = _draft(job, tokenizer)
    cell = job.cell
    draft, plan = decoding_plan(None, draft, dict(cell.options), cell.regime, job.prompt_tokens, cell.k, job.costs)
    options = DecodeOptions(cell.regime, cell.k, job.max_new_tokens, eos_id=job.eos_id, trees=plan.get("trees", False))
    res = replay_generate(draft, job.prompt_tokens, job.reference, job.vocab_size, options)
    return GenerationRecord(res.decoded, len(job.prompt_tokens), job.text, "replay", measure="replay")


def run_replay_batch(jobs, tokenizer: str, worker: str) -> list:
    """Replay a batch of jobs (one strategy: its draft loads once); each outcome carries its record or its error's
    first line, so one bad cell does not fail the batch."""
    out = []
    for job in jobs:
        try:
            out.append(JobOutcome(key=job.key, worker=worker, generation=replay_job(job, tokenizer)))
        except Exception as err:  # noqa: BLE001 (recorded per cell, as the accelerator worker does)
            out.append(JobOutcome(key=job.key, worker=worker, error=f"{type(err).__name__}: {first_line(err)}"))
    return out

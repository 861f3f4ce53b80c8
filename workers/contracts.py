"""What crosses the Ray boundary, typed: jobs sent to the workers and what comes back.

The driver builds a `SweepJob` per reference or sweep cell (a `LabelJob` per label cell, a `CostModelJob` per cost
model cell) and sends a batch to the accelerator worker, which answers with a `BatchOutcome`: one `JobOutcome` per
job (a `GenerationRecord`, a `ReferenceRecord`, a `LabelRecord` or a `CostModelRecord`, or an error) and the power
samples taken meanwhile; a replayed cell is a `ReplayJob` for a CPU worker. A sweep job and a replay job hold the
cell's `Coordinates` (key, strategy, draft, options, artifacts, k, regime), built once from the cell; a generation's
record holds its result's `workers.decoding.records.Decoded` (tokens, rounds, times), declared there once.
`storage.store` writes the outcomes as they are; nothing is a dict.

Example:
    >>> cell = Coordinates(key="ab12", strategy="plain", draft="plain", k=0, regime="uncached")
    >>> job = SweepJob(cell=cell, kind="sweep", prompt="The cat")
    >>> outcome = JobOutcome(key=job.key, worker="host:1:cpu", error="RuntimeError: boom")
    >>> outcome.ok
    False
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from workers.decoding.records import Decoded, HoldsDecoded
from workers.power.base import EnergyWindow, PowerSample
from workers.power.energy import j_per_100_tokens, tokens_per_j
from workers.power.sampler import PowerSampler

KINDS = ("reference", "sweep")


@dataclass(frozen=True)
class Coordinates:
    """A cell's coordinates as a worker needs them, built once from the cell by the driver's loop: which cell (its
    key), which strategy and draft with the draft's options, the files of the artifacts it reads, k and the regime.
    A reference cell has its key alone."""

    key: str
    strategy: str | None = None
    draft: str | None = None  # a registered draft name (workers.drafts.registry)
    options: Mapping[str, Any] = field(default_factory=dict)  # the draft's validated options, as stored
    artifacts: Mapping[str, str] = field(default_factory=dict)  # role -> path of each artifact the draft needs
    k: int = 0
    regime: str | None = None  # "uncached" | "cached" | "cached-standard"


@dataclass(frozen=True)
class SweepJob:
    """One reference or sweep cell as the accelerator worker runs it: the cell's coordinates, its prompt and
    sampling."""

    cell: Coordinates
    kind: str  # "reference" | "sweep"
    prompt: str
    temperature: float = 0.0  # 0: greedy; > 0: speculative sampling with top_k, top_p, seed
    top_k: int = 0
    top_p: float = 1.0
    seed: int | None = None
    costs: str | None = None  # k = "auto": the experiment's round-cost table (workers.decoding.costmodel JSON)
    repeats: int | None = None  # timed runs of this generation (None: the worker's [sweep] repeats)
    pace: bool = False  # time the machine's pace before it (`workers.decoding.roundtimer.pace_seconds`)

    def __post_init__(self):
        if self.kind not in KINDS:
            raise ValueError(f"SweepJob.kind={self.kind!r}; expected one of {KINDS}")

    @property
    def key(self) -> str:
        """The cell's key: every job answers `key` (the actor and its outcomes name jobs by it)."""
        return self.cell.key


@dataclass(frozen=True)
class ReplayJob:
    """One greedy sweep cell replayed on a CPU worker from its prompt's reference (`workers.replay`): the cell's
    coordinates and the reference it replays."""

    cell: Coordinates
    prompt_tokens: tuple[int, ...]
    reference: tuple[int, ...]  # the verifier's greedy new tokens for the prompt
    text: str  # the reference's text (the replayed tokens are the reference's)
    vocab_size: int
    eos_id: int | None
    max_new_tokens: int
    costs: str | None = None  # k = "auto": the experiment's round-cost table (workers.decoding.costmodel JSON)

    @property
    def key(self) -> str:
        """The cell's key (as `SweepJob.key`)."""
        return self.cell.key


@dataclass(frozen=True)
class EnergyRecord:
    """A generation's energy: the power trace integrated over its [started_at, ended_at] window."""

    energy_j: float | None
    mean_power_w: float | None
    power_source: str | None
    power_measured: bool | None
    j_per_100_tokens: float | None
    tokens_per_j: float | None


@dataclass(frozen=True)
class GenerationRecord(HoldsDecoded):
    """One timed (or replayed) speculative generation as the worker measured it: its result's `Decoded`
    (`GenerationRecord(result.decoded, n_prompt_tokens, text, device)`; its fields read as the record's own:
    `record.tokens`, `record.wall_s`) and what the runner, replay or the driver adds. A result's sampler seed (the
    cell's) and token-tree depths are not kept."""

    decoded: Decoded
    n_prompt_tokens: int
    text: str
    device: str
    energy: EnergyRecord | None = None  # set by `workers.power.attribution` (`attach_energy`)
    wall_s_runs: tuple[float, ...] = ()  # every timed run's wall time ([sweep] repeats); wall_s is the least
    measure: str = "timed"  # "replay": computed from the reference without the verifier (`workers.replay`)
    predicted_wall_s: float | None = None  # the driver's: the round-cost table's time for these passes (+ draft s)
    pace_s: float | None = None  # the machine's pace just before the timed runs (`roundtimer.pace_seconds`)


@dataclass(frozen=True)
class ReferenceRecord:
    """An independent plain-greedy reference for one prompt."""

    prompt_text: str
    prompt_tokens: tuple[int, ...]
    tokens: tuple[int, ...]
    text: str
    wall_s: float
    vocab_size: int | None = None  # the verifier's, and its tokenizer's EOS: what a replay's stand-in needs
    eos_id: int | None = None


@dataclass(frozen=True)
class LabelJob:
    """Label a corpus with the verifier's greedy next tokens on the accelerator worker (`workers.training.labels`).

    The worker tokenises `corpus` (at most `max_tokens` tokens), reads it in windows of `chunk_tokens` that
    overlap by `overlap_tokens`, `batch_chunks` windows per forward pass, and writes the token file, the labels
    and a manifest under `out_dir`.
    """

    key: str
    corpus: Any  # workers.corpora.TextSource
    out_dir: str
    max_tokens: int | None = None
    chunk_tokens: int = 512
    overlap_tokens: int = 128
    batch_chunks: int = 4
    kind: str = "label"


@dataclass(frozen=True)
class LabelRecord:
    """What labelling produced: the manifest (token file, offsets, labels) and what it cost."""

    path: str  # the manifest (JSON) naming the three files
    sha256: str  # of the labels file
    bytes: int  # of the three files together
    n_tokens: int
    n_docs: int
    n_labelled: int
    agreement: float  # share of labelled positions where the verifier's token = the corpus's
    chunk_tokens: int
    overlap_tokens: int
    wall_s: float
    started_at: float  # epoch s
    ended_at: float
    device: str
    energy: EnergyRecord | None = None


@dataclass(frozen=True)
class CostModelJob:
    """Measure the verifier's round-cost table on the accelerator worker (`workers.decoding.roundtimer`).

    The worker tokenises `prompt` (a sweep prompt: real text, though a round's cost does not depend on which tokens)
    and times real rounds of every regime in `regimes`, drafting 0..`max_n` tokens and trees of `tree_sizes` nodes,
    at contexts from `min_context` to `max_context` tokens (the shortest prompt to the longest plus the new tokens),
    in `repeats` interleaved repeats, starting none past `budget_s` seconds.
    """

    key: str
    prompt: str
    max_context: int
    min_context: int | None = None
    max_n: int = 8
    tree_sizes: tuple[int, ...] = ()
    regimes: tuple[str, ...] = ("uncached", "cached", "cached-standard")
    repeats: int = 2  # x 4-6 contexts: 8-12 timed rounds per row, spread over the span (a demo's table in ~1 min)
    budget_s: float | None = 120.0
    kind: str = "cost_model"


@dataclass(frozen=True)
class CostModelRecord:
    """A measured round-cost table, the timed rounds it was built from, and what measuring it cost."""

    verifier: str
    device: str
    costs: str  # `workers.decoding.costmodel.RoundCosts` as JSON
    samples: tuple[tuple[str, str, int, int, float], ...]  # (regime, kind, n, context, seconds) per timed round
    measure_s: float
    started_at: float  # epoch s
    ended_at: float
    energy: EnergyRecord | None = None


@dataclass(frozen=True)
class JobOutcome:
    """What one job gave: a record when it worked, else the error."""

    key: str
    worker: str
    generation: GenerationRecord | None = None
    reference: ReferenceRecord | None = None
    label: LabelRecord | None = None
    cost_model: CostModelRecord | None = None
    error: str | None = None

    @property
    def ok(self) -> bool:
        return self.error is None


@dataclass(frozen=True)
class BatchOutcome:
    """A batch's outcomes in job order, and the raw power samples taken since the previous batch."""

    outcomes: tuple[JobOutcome, ...]
    samples: tuple[PowerSample, ...] = ()


@dataclass(frozen=True)
class ArtifactJob:
    """Build one artifact (other than an instance base) from a corpus on a CPU worker.

    `kind` is the cell kind (e.g. "datastore"); `workers.training.builders` maps it to its pure builder.
    """

    kind: str
    corpus: Any  # workers.corpora.TextSource
    tokenizer: str  # the verifier's tokenizer name or path
    out_dir: str
    options: Mapping[str, Any] = field(default_factory=dict)  # the [[corpora]] entry's build options
    inputs: Mapping[str, str] = field(default_factory=dict)  # role -> path of each artifact this build reads
    power_sources: tuple[str, ...] = ("auto",)
    power_hz: float = 10.0


@dataclass(frozen=True)
class ArtifactInfo:
    """What an artifact build produced: the file, its identity and size, and what it cost."""

    kind: str
    path: str
    sha256: str
    bytes: int
    build_s: float
    energy_j: float | None = None
    power_source: str | None = None
    power_measured: bool | None = None
    meta: Mapping[str, Any] = field(default_factory=dict)
    node_id: str | None = None  # the Ray node whose disk holds the file


def energy_record(window: EnergyWindow, n_tokens: int) -> EnergyRecord:
    """A window's joules as stored with a generation: mean watts, J per 100 tokens, tokens per joule."""
    return EnergyRecord(
        energy_j=window.energy_j,
        mean_power_w=window.mean_power_w,
        power_source=window.source_label,
        power_measured=window.measured,
        j_per_100_tokens=j_per_100_tokens(window.energy_j, n_tokens),
        tokens_per_j=tokens_per_j(window.energy_j, n_tokens),
    )


def attach_energy(outcomes: list[JobOutcome], sampler: PowerSampler) -> list[JobOutcome]:
    """Each outcome with its generation's (label pass's, cost measurement's) energy over its [started_at, ended_at]
    window."""
    out = []
    for o in outcomes:
        if o.label is not None:
            w = sampler.window(o.label.started_at, o.label.ended_at)
            o = replace(o, label=replace(o.label, energy=energy_record(w, o.label.n_tokens)))
        if o.cost_model is not None:
            w = sampler.window(o.cost_model.started_at, o.cost_model.ended_at)
            o = replace(o, cost_model=replace(o.cost_model, energy=energy_record(w, 0)))
        g = o.generation
        if g is not None:
            w = sampler.window(g.started_at, g.ended_at)
            o = replace(o, generation=replace(g, energy=energy_record(w, len(g.tokens))))
        out.append(o)
    return out

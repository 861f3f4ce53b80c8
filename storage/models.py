"""SQLAlchemy 2.0 typed tables: experiments, cells, instance bases, references, generations, power samples.

Only the driver writes; the dashboard and `greenspec status/export` read. Times of generations and power
samples are epoch seconds (float, `time.time()`), so energy windows join samples by plain comparison.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

from sqlalchemy import (
    JSON,
    BigInteger,
    Boolean,
    DateTime,
    Float,
    ForeignKey,
    Index,
    Integer,
    LargeBinary,
    String,
    Text,
    UniqueConstraint,
)
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column, relationship

from workers.training.artifacts import BY_CELL_KIND

# the artifact kinds (workers.training.artifacts), the round-cost table, references, timed and replayed sweep cells
CELL_KINDS = (*BY_CELL_KIND, "costmodel", "reference", "sweep", "replay")
CELL_STATES = ("pending", "running", "done", "failed")


def utcnow() -> dt.datetime:
    """Timezone-aware now, for created/updated columns."""
    return dt.datetime.now(dt.timezone.utc)


class Base(DeclarativeBase):
    type_annotation_map = {dict[str, Any]: JSON, list[int]: JSON, list[Any]: JSON}


class Experiment(Base):
    """One spec, by name; re-running a spec with the same name adds only its new cells."""

    __tablename__ = "experiments"

    id: Mapped[int] = mapped_column(primary_key=True)
    name: Mapped[str] = mapped_column(String(200), unique=True)
    spec_path: Mapped[str | None] = mapped_column(Text)
    spec_toml: Mapped[str] = mapped_column(Text)
    spec_hash: Mapped[str] = mapped_column(String(64))
    # the digest of the grid whose cells were registered last (`orchestrator.run.cells.Grid.digest`), in the same
    # transaction as the cells: a resume whose grid has it skips registering every cell again
    grid_digest: Mapped[str | None] = mapped_column(String(64))
    device: Mapped[str | None] = mapped_column(String(100))
    idle_power_w: Mapped[float | None] = mapped_column(Float)
    created_at: Mapped[dt.datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
    updated_at: Mapped[dt.datetime] = mapped_column(DateTime(timezone=True), default=utcnow, onupdate=utcnow)

    cells: Mapped[list[Cell]] = relationship(back_populates="experiment")


class Cell(Base):
    """One unit of work: train an instance base, a greedy reference, or one timed sweep generation."""

    __tablename__ = "cells"
    __table_args__ = (
        UniqueConstraint("experiment_id", "key", name="uq_cells_experiment_key"),
        Index("ix_cells_experiment_state", "experiment_id", "state"),
        Index("ix_cells_experiment_kind_state", "experiment_id", "kind", "state"),  # the queue's counts, index-only
    )

    id: Mapped[int] = mapped_column(primary_key=True)
    experiment_id: Mapped[int] = mapped_column(ForeignKey("experiments.id"))
    key: Mapped[str] = mapped_column(String(64))
    kind: Mapped[str] = mapped_column(String(16))  # one of CELL_KINDS
    state: Mapped[str] = mapped_column(String(16), default="pending")
    strategy: Mapped[str | None] = mapped_column(String(100))
    draft: Mapped[str | None] = mapped_column(String(32))
    task: Mapped[str | None] = mapped_column(String(100))
    corpus: Mapped[str | None] = mapped_column(String(100))
    prompt_index: Mapped[int | None] = mapped_column(Integer)
    k: Mapped[int | None] = mapped_column(Integer)
    regime: Mapped[str | None] = mapped_column(String(16))
    temperature: Mapped[float | None] = mapped_column(Float, default=0.0)  # sweep cells: 0 = greedy
    params: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    attempts: Mapped[int] = mapped_column(Integer, default=0)
    error: Mapped[str | None] = mapped_column(Text)
    worker: Mapped[str | None] = mapped_column(String(200))
    created_at: Mapped[dt.datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
    started_at: Mapped[dt.datetime | None] = mapped_column(DateTime(timezone=True))
    finished_at: Mapped[dt.datetime | None] = mapped_column(DateTime(timezone=True))

    experiment: Mapped[Experiment] = relationship(back_populates="cells")


class InstanceBase(Base):
    """An IGTree trained from one corpus (the result of a train cell)."""

    __tablename__ = "instance_bases"

    id: Mapped[int] = mapped_column(primary_key=True)
    cell_id: Mapped[int] = mapped_column(ForeignKey("cells.id"), unique=True)
    experiment_id: Mapped[int] = mapped_column(ForeignKey("experiments.id"), index=True)
    corpus: Mapped[str] = mapped_column(String(100))
    path: Mapped[str] = mapped_column(Text)
    sha256: Mapped[str] = mapped_column(String(64))
    backend: Mapped[str] = mapped_column(String(16))
    window: Mapped[int] = mapped_column(Integer)
    order: Mapped[str] = mapped_column(String(16))
    tokenizer_id: Mapped[str] = mapped_column(String(100))
    tokens: Mapped[int] = mapped_column(Integer)
    instances: Mapped[int] = mapped_column(Integer)
    nodes_before_prune: Mapped[int] = mapped_column(Integer)
    nodes_after_prune: Mapped[int] = mapped_column(Integer)
    bytes: Mapped[int] = mapped_column(Integer)
    train_s: Mapped[float] = mapped_column(Float)
    energy_j: Mapped[float | None] = mapped_column(Float)
    power_source: Mapped[str | None] = mapped_column(String(100))
    power_measured: Mapped[bool | None] = mapped_column(Boolean)
    partitions: Mapped[int | None] = mapped_column(Integer)  # 0: built in memory
    memory_budget_bytes: Mapped[int | None] = mapped_column(BigInteger)
    peak_rss_bytes: Mapped[int | None] = mapped_column(BigInteger)  # the training's process tree
    cpu_s: Mapped[float | None] = mapped_column(Float)  # its processes' CPU seconds (Ray tasks included)
    energy_attribution: Mapped[str | None] = mapped_column(String(100))  # how energy_j was assigned
    manifest_path: Mapped[str | None] = mapped_column(Text)  # `<path>.manifest.json`: the corpus's files it holds
    manifest_sha256: Mapped[str | None] = mapped_column(String(64))
    created_at: Mapped[dt.datetime] = mapped_column(DateTime(timezone=True), default=utcnow)


class Artifact(Base):
    """Any other built artifact a draft needs (a REST datastore, verifier labels...): the result of its cell."""

    __tablename__ = "artifacts"

    id: Mapped[int] = mapped_column(primary_key=True)
    cell_id: Mapped[int] = mapped_column(ForeignKey("cells.id"), unique=True)
    experiment_id: Mapped[int] = mapped_column(ForeignKey("experiments.id"), index=True)
    kind: Mapped[str] = mapped_column(String(32))
    corpus: Mapped[str | None] = mapped_column(String(100))
    path: Mapped[str] = mapped_column(Text)
    sha256: Mapped[str] = mapped_column(String(64))
    bytes: Mapped[int] = mapped_column(Integer)
    build_s: Mapped[float] = mapped_column(Float)
    energy_j: Mapped[float | None] = mapped_column(Float)
    power_source: Mapped[str | None] = mapped_column(String(100))
    power_measured: Mapped[bool | None] = mapped_column(Boolean)
    meta: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    created_at: Mapped[dt.datetime] = mapped_column(DateTime(timezone=True), default=utcnow)


class Reference(Base):
    """The independent plain-greedy continuation of one prompt (for ROUGE-L and exact match)."""

    __tablename__ = "references"
    __table_args__ = (
        Index("ix_references_task_prompt", "experiment_id", "task", "prompt_index"),
        Index("ix_references_prompt_key", "experiment_id", "prompt_key"),
    )

    id: Mapped[int] = mapped_column(primary_key=True)
    cell_id: Mapped[int] = mapped_column(ForeignKey("cells.id"), unique=True)
    experiment_id: Mapped[int] = mapped_column(ForeignKey("experiments.id"))
    task: Mapped[str] = mapped_column(String(100))
    prompt_index: Mapped[int] = mapped_column(Integer)
    prompt_key: Mapped[str | None] = mapped_column(String(64))  # its cell's key: what generations match it by
    prompt_text: Mapped[str] = mapped_column(Text)
    prompt_tokens: Mapped[list[int]] = mapped_column(JSON)
    tokens: Mapped[list[int]] = mapped_column(JSON)
    text: Mapped[str] = mapped_column(Text)
    wall_s: Mapped[float] = mapped_column(Float)
    vocab_size: Mapped[int | None] = mapped_column(Integer)  # the verifier's (a replay's stand-in needs it)
    eos_id: Mapped[int | None] = mapped_column(Integer)  # the verifier tokenizer's EOS (None: none)


def _rounds(context) -> int:
    """Verification rounds of a generation being inserted (its per-round record's length)."""
    return len(context.get_current_parameters().get("accepted_per_step") or [])


def _first_accepted(context) -> int:
    """Rounds whose first draft token was accepted: every round but the accept_hist[0] that accepted none."""
    params = context.get_current_parameters()
    hist = params.get("accept_hist") or [0]
    return len(params.get("accepted_per_step") or []) - int(hist[0])


# Everything the summary aggregates, in its grouping order: the summary's keys (strategy, draft, task, k, regime,
# temperature, measure), then prompt_index and prompt_key, then the figures (plus accept_hist, see the table). The
# GROUP BY reads the index alone, several times faster than scanning rows that carry the tokens and texts (measured at
# 10^5 on SQLite), and in the keys' order: the newest generation of each coordinate and prompt and the per-cell sums
# stream through it with no temporary B-tree over every generation (measured at 10^6, migration 0017).
SUMMARY_INDEX_COLUMNS = (
    "experiment_id",
    "strategy",
    "draft",
    "task",
    "k",
    "regime",
    "temperature",
    "measure",  # the summary's rows are per measure ...
    "prompt_index",
    "prompt_key",  # ... and its ratios pair each generation with plain's of the same prompt key
    "n_tokens",
    "wall_s",
    "draft_s",
    "drafted",
    "accepted",
    "rounds",
    "first_accepted",
    "fastpath_rejects",
    "tokens_per_s",
    "energy_j",
    "j_per_100_tokens",
    "mean_power_w",
    "rouge_l",
    "exact_match",
    "power_source",
    "power_measured",
    "first_checked",
)


class Generation(Base):
    """One timed, power-logged speculative generation (the result of a sweep cell)."""

    __tablename__ = "generations"
    __table_args__ = (
        Index("ix_generations_group", "experiment_id", "strategy", "task", "k", "regime"),
        Index("ix_generations_experiment_id", "experiment_id", "id"),
        Index("ix_generations_prompt_key", "experiment_id", "prompt_key"),  # the data version: max(id) in one probe
        # the summary's GROUP BY and the histogram read an index, never the wide rows; PostgreSQL cannot put a json
        # column in a btree key, so there it rides along as an INCLUDE column
        Index("ix_generations_summary", *SUMMARY_INDEX_COLUMNS, "accept_hist").ddl_if(dialect="sqlite"),
        Index("ix_generations_summary_inc", *SUMMARY_INDEX_COLUMNS, postgresql_include=["accept_hist"]).ddl_if(
            callable_=lambda ddl, target, bind, dialect=None, **kw: dialect is not None and dialect.name != "sqlite"
        ),
    )

    id: Mapped[int] = mapped_column(primary_key=True)
    cell_id: Mapped[int] = mapped_column(ForeignKey("cells.id"), unique=True)
    experiment_id: Mapped[int] = mapped_column(ForeignKey("experiments.id"))
    strategy: Mapped[str] = mapped_column(String(100))
    draft: Mapped[str] = mapped_column(String(32))
    task: Mapped[str] = mapped_column(String(100))
    prompt_index: Mapped[int] = mapped_column(Integer)
    prompt_key: Mapped[str | None] = mapped_column(String(64))  # the key of the reference cell of its prompt
    k: Mapped[int] = mapped_column(Integer)
    regime: Mapped[str] = mapped_column(String(16))
    temperature: Mapped[float] = mapped_column(Float, default=0.0)  # 0 = greedy; > 0: speculative sampling
    top_k: Mapped[int] = mapped_column(Integer, default=0)
    top_p: Mapped[float] = mapped_column(Float, default=1.0)
    first_checked: Mapped[int | None] = mapped_column(Integer)  # rounds whose first draft token was checked
    n_prompt_tokens: Mapped[int] = mapped_column(Integer)
    n_tokens: Mapped[int] = mapped_column(Integer)
    steps: Mapped[int] = mapped_column(Integer)
    drafted: Mapped[int] = mapped_column(Integer)
    accepted: Mapped[int] = mapped_column(Integer)
    acceptance: Mapped[float | None] = mapped_column(Float)
    mal: Mapped[float | None] = mapped_column(Float, nullable=True)  # none without a round
    accept_hist: Mapped[list[int]] = mapped_column(JSON)
    accepted_per_step: Mapped[list[int]] = mapped_column(JSON)
    tokens_per_step: Mapped[list[int] | None] = mapped_column(JSON)  # new tokens per round (draft ones first)
    fastpath_rejects: Mapped[int] = mapped_column(Integer, default=0)
    rounds: Mapped[int | None] = mapped_column(Integer, default=_rounds)  # len(accepted_per_step)
    first_accepted: Mapped[int | None] = mapped_column(Integer, default=_first_accepted)  # rounds - accept_hist[0]
    wall_s: Mapped[float] = mapped_column(Float)  # the fastest timed run's (see wall_s_runs)
    wall_s_runs: Mapped[list[float] | None] = mapped_column(JSON)  # every timed run's wall time ([sweep] repeats)
    draft_s: Mapped[float] = mapped_column(Float)
    verify_s: Mapped[float] = mapped_column(Float)
    tokens_per_s: Mapped[float] = mapped_column(Float)
    started_at: Mapped[float] = mapped_column(Float)
    ended_at: Mapped[float] = mapped_column(Float)
    energy_j: Mapped[float | None] = mapped_column(Float)
    mean_power_w: Mapped[float | None] = mapped_column(Float)
    j_per_100_tokens: Mapped[float | None] = mapped_column(Float)
    tokens_per_j: Mapped[float | None] = mapped_column(Float)
    power_source: Mapped[str | None] = mapped_column(String(100))
    power_measured: Mapped[bool | None] = mapped_column(Boolean)
    rouge_l: Mapped[float | None] = mapped_column(Float)
    exact_match: Mapped[bool | None] = mapped_column(Boolean)
    bridged: Mapped[bool] = mapped_column(Boolean, default=False)
    stopped: Mapped[str] = mapped_column(String(32))
    device: Mapped[str] = mapped_column(String(100))
    tokens: Mapped[list[int]] = mapped_column(JSON)
    text: Mapped[str] = mapped_column(Text)
    # "timed": run by the verifier on the accelerator; "replay": its passes computed exactly from the prompt's greedy
    # reference without the verifier (`workers.replay`), its wall time, tokens/s and energy predicted by the
    # experiment's round-cost table
    measure: Mapped[str] = mapped_column(String(16), default="timed", server_default="timed")
    passes: Mapped[list[Any] | None] = mapped_column(JSON)  # per verifier pass: [tokens fed, tokens cached, rows kept]
    drafted_per_step: Mapped[list[int] | None] = mapped_column(JSON)  # per round: tokens the draft proposed
    predicted_wall_s: Mapped[float | None] = mapped_column(Float)  # the cost model's wall time for its passes
    pace_s: Mapped[float | None] = mapped_column(Float)  # a timed one: the machine's pace before it (validation)


class CostModel(Base):
    """The verifier's measured round-cost table on one device (`workers.decoding.costmodel.RoundCosts`), measured on the
    accelerator worker for an experiment: predicts replayed generations and k = "auto"'s lengths."""

    __tablename__ = "cost_models"

    id: Mapped[int] = mapped_column(primary_key=True)
    cell_id: Mapped[int | None] = mapped_column(ForeignKey("cells.id"), unique=True)
    experiment_id: Mapped[int] = mapped_column(ForeignKey("experiments.id"), index=True)
    verifier: Mapped[str] = mapped_column(String(300))
    device: Mapped[str] = mapped_column(String(100))
    costs: Mapped[dict[str, Any] | None] = mapped_column(JSON)  # RoundCosts as JSON; None: an older linear model
    samples: Mapped[list[Any]] = mapped_column(JSON)  # [regime, kind, n, context, seconds] per timed round
    measure_s: Mapped[float] = mapped_column(Float)  # seconds the measurement took
    energy_j: Mapped[float | None] = mapped_column(Float)
    mean_power_w: Mapped[float | None] = mapped_column(Float)
    power_source: Mapped[str | None] = mapped_column(String(100))
    created_at: Mapped[dt.datetime] = mapped_column(DateTime(timezone=True), default=utcnow)


class CostTable(Base):
    """A round-cost table measured alone (`greenspec costs measure`) or imported from another machine: a portable
    artifact, keyed by verifier, device description, dtype and threads, that re-predicts replayed generations."""

    __tablename__ = "cost_tables"
    __table_args__ = (Index("ix_cost_tables_key", "verifier", "device", "dtype", "threads"),)

    id: Mapped[int] = mapped_column(primary_key=True)
    name: Mapped[str] = mapped_column(String(200), unique=True)
    verifier: Mapped[str] = mapped_column(String(300))  # the model as given (`--verifier`), else the table's own
    device: Mapped[str] = mapped_column(String(300))  # the device's description: "cpu: Intel(R) Xeon(R) Processor"
    dtype: Mapped[str | None] = mapped_column(String(32))
    threads: Mapped[int | None] = mapped_column(Integer)
    costs: Mapped[dict[str, Any]] = mapped_column(JSON)  # RoundCosts as JSON (its meta: the machine, the noise)
    samples: Mapped[list[Any] | None] = mapped_column(JSON)  # [regime, kind, n, context, seconds] per timed round
    meta: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    agreement: Mapped[float | None] = mapped_column(Float)  # share of reference positions whose argmax agrees
    created_at: Mapped[dt.datetime] = mapped_column(DateTime(timezone=True), default=utcnow)


class Reprediction(Base):
    """An experiment derived from another's replayed generations, re-predicted with a stored cost table."""

    __tablename__ = "repredictions"

    id: Mapped[int] = mapped_column(primary_key=True)
    experiment_id: Mapped[int] = mapped_column(ForeignKey("experiments.id"), unique=True)  # the derived one
    source_id: Mapped[int] = mapped_column(ForeignKey("experiments.id"), index=True)
    cost_table_id: Mapped[int] = mapped_column(ForeignKey("cost_tables.id"), index=True)
    label: Mapped[str] = mapped_column(String(300))  # "predicted for <device>", shown with its results
    generations: Mapped[int] = mapped_column(Integer)  # the source's replayed generations it copied ...
    source_last_id: Mapped[int] = mapped_column(Integer)  # ... and the newest one's id: reused while both hold
    created_at: Mapped[dt.datetime] = mapped_column(DateTime(timezone=True), default=utcnow)


class PowerSample(Base):
    """One raw reading of one power source (the dashboard's power trace)."""

    __tablename__ = "power_samples"
    __table_args__ = (Index("ix_power_samples_experiment_t", "experiment_id", "t_s"),)

    id: Mapped[int] = mapped_column(primary_key=True)
    experiment_id: Mapped[int] = mapped_column(ForeignKey("experiments.id"))
    t_s: Mapped[float] = mapped_column(Float)
    source: Mapped[str] = mapped_column(String(32))
    power_w: Mapped[float | None] = mapped_column(Float)
    energy_j: Mapped[float | None] = mapped_column(Float)
    measured: Mapped[bool] = mapped_column(Boolean)


class Lease(Base):
    """Which driver holds an experiment (by name), until when: a second driver refuses or waits."""

    __tablename__ = "leases"

    experiment: Mapped[str] = mapped_column(String(200), primary_key=True)
    holder: Mapped[str] = mapped_column(String(300))  # host:pid:start of the driver
    expires_at: Mapped[float] = mapped_column(Float)  # epoch s; renewed every few seconds
    acquired_at: Mapped[float] = mapped_column(Float)


class StoredFrame(Base):
    """A frame computed from an experiment's rows (its summary), kept with the data version it was computed at."""

    __tablename__ = "stored_frames"
    __table_args__ = (UniqueConstraint("experiment_id", "name"),)

    id: Mapped[int] = mapped_column(primary_key=True)
    experiment_id: Mapped[int] = mapped_column(ForeignKey("experiments.id"))
    name: Mapped[str] = mapped_column(String(100))  # which frame: "summary", "summary-pooled", ...
    version: Mapped[str] = mapped_column(String(300))  # the data version it was computed at (`storage.stored_frames`)
    frame: Mapped[bytes] = mapped_column(LargeBinary)  # Parquet
    created_at: Mapped[dt.datetime] = mapped_column(DateTime(timezone=True), default=utcnow)

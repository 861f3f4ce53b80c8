"""Orchestrator overheads: enqueueing 10,000 cells, and per-cell scheduling + storage with a no-op verifier."""

from __future__ import annotations

import tempfile
import time
from pathlib import Path

import ray

from orchestrator.run import driver
from orchestrator.run.driver import RunOptions
from orchestrator.run.prepare import prepare
from orchestrator.run.spec_paths import load_spec
from storage import store
from storage.db import open_db
from workers.contracts import BatchOutcome, GenerationRecord, JobOutcome, ReferenceRecord, SweepJob
from workers.decoding.records import Decoded

WORDS = "the quick brown fox jumps over the lazy dog while a small cat sleeps on the warm mat near an open door"


@ray.remote(resources={"accelerator": 1}, num_cpus=0)
class NoopWorker:
    """Same interface as AcceleratorWorker; returns a fixed 10-token result at once (no model, no power)."""

    def __init__(self, cfg):
        self.cfg = cfg

    def info(self) -> dict:
        return {"device": "noop", "worker": "noop", "power_sources": []}

    def run_batch(self, jobs: list[SweepJob]) -> BatchOutcome:
        now = time.time()
        ref = ReferenceRecord(prompt_text="", prompt_tokens=(1,), tokens=tuple(range(10)), text="x", wall_s=0.01)
        gen = GenerationRecord(
            Decoded(
                tokens=tuple(range(10)),
                steps=4,
                drafted=9,
                accepted=6,
                accept_hist=(1, 1, 2, 0),
                accepted_per_step=(3, 2, 1, 0),
                tokens_per_step=(4, 3, 2, 1),
                fastpath_rejects=0,
                wall_s=0.01,
                draft_s=0.001,
                verify_s=0.009,
                started_at=now,
                ended_at=now + 0.01,
                bridged=False,
                stopped="max_new_tokens",
            ),
            n_prompt_tokens=5,
            text="x",
            device="noop",
        )
        return BatchOutcome(
            outcomes=tuple(
                JobOutcome(key=j.key, worker="noop", reference=ref)
                if j.kind == "reference"
                else JobOutcome(key=j.key, worker="noop", generation=gen)
                for j in jobs
            )
        )

    def close(self) -> None:
        pass


def _spec(tmp: Path, prompts: int, batch: int) -> Path:
    docs = "\n\n".join(f"{i} " + " ".join([WORDS] * 4) for i in range(prompts))
    (tmp / "task.txt").write_text(docs)
    spec = tmp / "bench.toml"
    spec.write_text(f"""
[experiment]
name = "bench"
batch_size = {batch}
[verifier]
model = "noop/verifier"
tokenizer = "mistral"
[[tasks]]
name = "t"
path = "task.txt"
prompts = {prompts}
[[strategies]]
name = "plain"
draft = "plain"
[[strategies]]
name = "ngram"
draft = "ngram"
[sweep]
k = [1, 2, 3, 4, 5, 6, 7, 8]
regimes = ["uncached", "cached"]
max_new_tokens = 10
warmup = false
""")
    return spec


def bench_enqueue(tmp: Path) -> tuple[int, float, float]:
    """Expand and insert ~10,000 cells into a fresh SQLite file; (cells, expand_s, insert_s)."""
    spec = load_spec(_spec(tmp, prompts=550, batch=32))
    t0 = time.perf_counter()
    spec, _, cells = prepare(spec)
    t1 = time.perf_counter()
    _, Session = open_db(f"sqlite:///{tmp / 'enqueue.db'}")
    with Session() as s:
        exp = store.upsert_experiment(s, "bench", "", "", None)
        store.add_cells(s, exp.id, cells)
        s.commit()
    return len(cells), t1 - t0, time.perf_counter() - t1


def bench_overhead(tmp: Path, prompts: int) -> tuple[int, float]:
    """Run a spec end to end through Ray with the no-op worker; (cells, seconds per cell)."""
    spec_path = _spec(tmp, prompts=prompts, batch=32)
    opts = RunOptions(db_url=f"sqlite:///{tmp / 'overhead.db'}", worker_cls=NoopWorker)
    spec = load_spec(spec_path)
    report = driver.run(spec, spec_path.read_text(), str(spec_path), opts)
    n = sum(report.counts.values())
    return n, report.elapsed_s / n


def run(quick: bool = False) -> str:
    """The Markdown section for BENCHMARKS.md."""
    import os

    os.environ.setdefault("RAY_AUTH_MODE", "disabled")
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        n_enq, expand_s, insert_s = bench_enqueue(tmp)
        ray.init(num_cpus=2, resources={"accelerator": 1}, include_dashboard=False, log_to_driver=False)
        try:
            n_run, per_cell_s = bench_overhead(tmp, prompts=20 if quick else 120)
        finally:
            ray.shutdown()
    return render(n_enq, expand_s, insert_s, n_run, per_cell_s)


def render(n_enq: int, expand_s: float, insert_s: float, n_run: int, per_cell_s: float) -> str:
    """The section from the two measurements: a paragraph of setup, then the table."""
    enq = expand_s + insert_s
    return "\n".join(
        [
            "## Orchestrator",
            "",
            "Enqueue: expand a spec into cells (prompts read, keys hashed) and insert them into a fresh SQLite file. "
            "Overhead: a whole run through real local Ray and SQLite with a no-op accelerator worker (batches of 32), "
            "so every second is scheduling, result transfer, state changes and storage; it includes Ray start-up of "
            "the worker and the run's fixed costs, spread over the cells.",
            "",
            "| measure | cells | result | goal |",
            "|---|---:|---:|---|",
            f"| enqueue (expand {expand_s:.2f} s + insert {insert_s:.2f} s) | {n_enq} | {enq:.2f} s | < 5 s for 10,000 |",
            f"| per-cell scheduling + storage overhead | {n_run} | {per_cell_s * 1000:.2f} ms | < 5 ms |",
        ]
    )

"""The driver's ceiling: how many replayed cells a second the driver and its database absorb, on a local Ray cluster
of several `ray start` nodes, and what bounds it.

The real driver (`orchestrator.run.driver.run`) runs a grid of cells that cost almost nothing to compute: a no-op
accelerator worker answers the references (ten tokens each) and the round-cost table at once, and the replays are
real (`workers.replay.task.replay_task`: the ngram draft against a reference of 8 tokens) on the cluster's CPU
nodes. So nearly every second the driver spends is its own: scheduling, building jobs, Ray calls, predicting each
replay's time, and writing the rows. Reported: cells stored per second of the run (bounded here by the machine's 2
cores, which the replays share with the driver); the driver's CPU seconds per cell, its share of the run, and the
ceiling they imply (cells per second of the driver's CPU: what the driver absorbs when replays run elsewhere and
never wait on it); the database's write rate; and the driver's profile, by where its CPU went.

The cluster: a head (`--num-cpus=1`, the `accelerator` resource, the driver beside it) and `NODES` - 1 further
nodes of one CPU each, each started with `ray start --block` by this process and stopped by pid at the end.
"""

from __future__ import annotations

import cProfile
import os
import pstats
import resource
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections import defaultdict
from pathlib import Path

import ray

ROOT = Path(__file__).resolve().parents[1]
NODES = 3  # the head and two more
PROMPTS, QUICK_PROMPTS = 1200, 40  # 27 replayed cells per prompt (plain and ngram at k = 1..8, three regimes)
TARGET = 2000  # cells a second the driver and the database absorb (the goal)
WORDS = "alpha beta gamma delta epsilon zeta eta theta iota kappa lambda mu nu xi omicron pi rho sigma tau".split()


@ray.remote(resources={"accelerator": 1}, num_cpus=0)
class InstantWorker:
    """The accelerator worker's interface, answering at once: a reference of ten tokens per prompt (vocabulary
    32,000, EOS 2) and a flat round-cost table; no model, no power."""

    def __init__(self, cfg):
        self.cfg = cfg

    def info(self) -> dict:
        return {"device": "instant", "worker": "instant", "power_sources": []}

    def run_batch(self, jobs: list):
        from workers.contracts import BatchOutcome, JobOutcome, ReferenceRecord

        outcomes = []
        for j in jobs:
            if j.kind == "cost_model":
                outcomes.append(JobOutcome(key=j.key, worker="instant", cost_model=_table(j)))
                continue
            seed = sum(map(ord, j.prompt))
            tokens = tuple(3 + (seed * 7 + i * 13) % 997 for i in range(10))
            ref = ReferenceRecord(
                prompt_text=j.prompt,
                prompt_tokens=tuple(3 + (seed + i) % 997 for i in range(8)),
                tokens=tokens,
                text=" ".join(map(str, tokens)),
                wall_s=0.001,
                vocab_size=32000,
                eos_id=2,
            )
            outcomes.append(JobOutcome(key=j.key, worker="instant", reference=ref))
        return BatchOutcome(outcomes=tuple(outcomes))

    def close(self) -> None:
        pass


def _table(job):
    """A flat round-cost table over the job's regimes and widths (10 ms a round, 1 ms more per token)."""
    from workers.contracts import CostModelRecord
    from workers.decoding.costmodel import build_table

    samples = [
        (regime, kind, n, context, 0.010 + 0.001 * n)
        for regime in job.regimes
        for kind in ("chain", "first")
        for n in range(job.max_n + 2)
        for context in (2, 4 * job.max_context)
    ]
    table = build_table("instant/verifier", "instant", samples)
    now = time.time()
    return CostModelRecord("instant/verifier", "instant", table.to_json(), tuple(samples), 0.01, now, now)


def _spec(folder: Path, prompts: int) -> Path:
    docs = "\n\n".join(f"{i} " + " ".join(WORDS[(i + j) % len(WORDS)] for j in range(40)) for i in range(prompts))
    (folder / "task.txt").write_text(docs)
    spec = folder / "driver.toml"
    spec.write_text(
        f"""[experiment]
name = "driver"
batch_size = 64
[verifier]
model = "instant/verifier"
tokenizer = "mistral"
[[tasks]]
name = "t"
path = "task.txt"
prompts = {prompts}
prompt_words = 8
[[strategies]]
name = "plain"
draft = "plain"
[[strategies]]
name = "ngram"
draft = "ngram"
[sweep]
k = [1, 2, 3, 4, 5, 6, 7, 8]
regimes = ["uncached", "cached", "cached-standard"]
max_new_tokens = 8
warmup = false
replay = true
"""
    )
    return spec


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _start(args: list[str]) -> subprocess.Popen:
    """`ray start ... --block` in a session of its own; returns once the node is up."""
    env = {**os.environ, "RAY_AUTH_MODE": "disabled", "PYTHONPATH": str(ROOT)}
    ray_bin = str(Path(sys.executable).with_name("ray"))
    small = ["--disable-usage-stats", "--object-store-memory=200000000", "--block"]
    proc = subprocess.Popen(
        [ray_bin, "start", *args, *small], env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )
    seen = []
    for line in proc.stdout:
        seen.append(line)
        if "Ray runtime started" in line:
            threading.Thread(target=proc.stdout.read, daemon=True).start()  # a full pipe would block it
            return proc
    raise RuntimeError("ray start failed: " + "".join(seen[-20:]))


def _stop(procs: list[subprocess.Popen], port: int) -> None:
    """Kill the started nodes by pid, and forget the head `ray start` recorded as this machine's current cluster
    (else a later `ray.init()` here would try to join the dead head)."""
    import psutil

    for proc in reversed(procs):
        try:
            family = [*psutil.Process(proc.pid).children(recursive=True), psutil.Process(proc.pid)]
        except psutil.NoSuchProcess:
            continue
        for p in family:
            try:
                p.kill()
            except psutil.NoSuchProcess:
                pass
        proc.wait(timeout=30)
    current = Path(tempfile.gettempdir()) / "ray" / "ray_current_cluster"
    if current.exists() and current.read_text().strip().endswith(f":{port}"):
        current.unlink()


CATEGORIES = (  # where the driver's CPU goes, by the file a function is in (the first that matches)
    ("SQL (SQLAlchemy, sqlite3)", ("sqlalchemy", "sqlite3", "storage/")),
    ("Ray calls and (de)serialisation", ("/ray/", "pickle", "cloudpickle", "msgpack")),
    ("predicting replays (the table)", ("workers/decoding",)),
    ("scheduling, jobs, progress", ("orchestrator/",)),
)


def _profile_shares(prof: cProfile.Profile) -> list[tuple[str, float]]:
    """The driver's own seconds (tottime) per category, largest first, beside the rest."""
    by: dict[str, float] = defaultdict(float)
    for (file, _, _), (_, _, tottime, _, _) in pstats.Stats(prof).stats.items():
        name = next((c for c, marks in CATEGORIES if any(m in file for m in marks)), "other Python")
        if file == "~":  # built-ins: C calls (sqlite3's, pickle's, ...) outside any Python file
            name = "built-in C calls"
        by[name] += tottime
    return sorted(by.items(), key=lambda kv: -kv[1])


def _top(prof: cProfile.Profile, n: int = 6) -> list[tuple[str, float]]:
    stats = pstats.Stats(prof).stats
    rows = [(f"{Path(f).name}:{line} {fn}", tt) for (f, line, fn), (_, _, tt, _, _) in stats.items() if f != "~"]
    return sorted(rows, key=lambda r: -r[1])[:n]


class Progress(threading.Thread):
    """Samples, every `every_s`, the driver process's CPU seconds (less this thread's own) beside the replayed rows
    stored so far (read from the database file, read-only): the driver's CPU per cell while replays stream in."""

    def __init__(self, db: Path, every_s: float = 0.2):
        super().__init__(daemon=True)
        self.db, self.every_s, self.samples = db, every_s, []
        self.done = threading.Event()

    def run(self) -> None:
        import sqlite3

        con = None
        while not self.done.wait(self.every_s):
            try:
                con = con or sqlite3.connect(f"file:{self.db}?mode=ro", uri=True, timeout=1)
                n = con.execute("SELECT count(*) FROM generations WHERE measure = 'replay'").fetchone()[0]
            except sqlite3.Error:
                continue  # not made yet, or the table not there yet
            use = resource.getrusage(resource.RUSAGE_SELF)
            self.samples.append((use.ru_utime + use.ru_stime - time.thread_time(), n))
        if con is not None:
            con.close()

    def per_cell(self, lo: float = 0.1, hi: float = 0.9) -> tuple[float, int] | None:
        """CPU seconds per replayed cell between `lo` and `hi` of the replays stored, and the cells in between."""
        total = max((n for _, n in self.samples), default=0)
        inside = [(cpu, n) for cpu, n in self.samples if lo * total <= n <= hi * total]
        if len(inside) < 2 or inside[-1][1] == inside[0][1]:
            return None
        (c0, n0), (c1, n1) = inside[0], inside[-1]
        return (c1 - c0) / (n1 - n0), n1 - n0


def measure(prompts: int, profile: bool = False) -> dict:
    """Run the grid once on a fresh cluster and database (under cProfile if `profile`); the figures."""
    from orchestrator.run.driver import RunOptions, run
    from orchestrator.run.spec_paths import load_spec

    folder = Path(tempfile.mkdtemp(prefix="bench-driver-"))
    port = _free_port()
    procs = [_start(["--head", f"--port={port}", "--num-cpus=1", '--resources={"accelerator": 1}'])]
    try:
        procs += [_start([f"--address=127.0.0.1:{port}", "--num-cpus=1"]) for _ in range(NODES - 1)]
        spec_path = _spec(folder, prompts)
        db = folder / "driver.db"
        opts = RunOptions(db_url=f"sqlite:///{db}", address=f"127.0.0.1:{port}", worker_cls=InstantWorker)
        prof = cProfile.Profile(time.process_time)  # CPU seconds: a wait in ray.wait is not work
        progress = Progress(db)
        progress.start()
        cpu0, t0 = resource.getrusage(resource.RUSAGE_SELF), time.perf_counter()
        if profile:
            prof.enable()
        report = run(load_spec(spec_path), spec_path.read_text(), str(spec_path), opts)
        prof.disable()
        wall, cpu1 = time.perf_counter() - t0, resource.getrusage(resource.RUSAGE_SELF)
        progress.done.set()
        progress.join()
        if profile and (out := os.environ.get("BENCH_DRIVER_PROFILE")):  # the whole profile, for pstats or snakeviz
            prof.dump_stats(out)
        size = db.stat().st_size
    finally:
        if ray.is_initialized():
            ray.shutdown()
        _stop(procs, port)
    from sqlalchemy import func, select

    from storage.db import open_db
    from storage.models import Generation

    with open_db(f"sqlite:///{db}", migrate=False)[1]() as s:
        replays = s.scalar(select(func.count()).where(Generation.measure == "replay"))
    shutil.rmtree(folder, ignore_errors=True)
    cpu = (cpu1.ru_utime - cpu0.ru_utime) + (cpu1.ru_stime - cpu0.ru_stime)
    return {
        "cells": sum(report.counts.values()),
        "failed": report.counts.get("failed", 0),
        "replays": replays,
        "wall": wall,
        "cpu": cpu,
        "steady": progress.per_cell(),
        "mib": size / 2**20,
        "shares": _profile_shares(prof) if profile else [],
        "top": _top(prof) if profile else [],
    }


def run(quick: bool = False) -> str:
    """The Markdown section for BENCHMARKS.md."""
    os.environ.setdefault("RAY_AUTH_MODE", "disabled")
    prompts = QUICK_PROMPTS if quick else PROMPTS
    m = measure(prompts)
    if m["failed"]:
        raise RuntimeError(f"{m['failed']} cells failed in the driver benchmark")
    if m["steady"] is None:
        raise RuntimeError("the driver benchmark saw too few replays stored to measure its steady rate")
    p = measure(prompts, profile=True)  # where the CPU goes: a second run, under cProfile (which slows it)
    per_cell, (steady, between) = m["cpu"] / m["replays"], m["steady"]
    prof_total = sum(s for _, s in p["shares"]) or 1.0
    shares = "; ".join(f"{name} {s / prof_total:.0%}" for name, s in p["shares"])
    top = "; ".join(f"`{name}` {s:.1f} s" for name, s in p["top"])
    verdict = "meets" if 1 / steady >= TARGET else "misses"
    return "\n".join(
        [
            "## The driver's ceiling",
            "",
            f"[bench/driver.py](bench/driver.py): the real driver over {m['cells']:,} cells ({m['replays']:,} replayed:"
            f" plain and ngram at k = 1..8 in the three regimes, 8 new tokens each) on a local Ray cluster of {NODES}"
            " `ray start` nodes of one CPU each on this machine, the accelerator worker answering at once (references"
            " and the round-cost table), SQLite in WAL mode. The driver's CPU is its process's (every thread). Its"
            " ceiling is replayed cells per second of that CPU while the replays stream in (from a tenth to nine"
            " tenths of them stored: what a long study's driver absorbs when replays run elsewhere and never wait on"
            " it); the whole run's CPU per cell also counts its fixed costs (Ray's start, the registration of every"
            " cell, the references, the table).",
            "",
            "| cells stored | wall | cells / s of the run | driver CPU | driver CPU share | driver CPU per cell, whole"
            " run | driver CPU per cell, replays streaming | ceiling: cells / s of driver CPU | database writes |",
            "|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
            f"| {m['cells']:,} | {m['wall']:.1f} s | {m['cells'] / m['wall']:,.0f} | {m['cpu']:.1f} s |"
            f" {m['cpu'] / m['wall']:.0%} | {per_cell * 1e3:.2f} ms | {steady * 1e3:.2f} ms ({between:,} cells) |"
            f" **{1 / steady:,.0f}** ({verdict} the goal of {TARGET:,}) |"
            f" {m['replays'] / m['wall']:,.0f} rows / s, {m['mib'] / m['wall']:.1f} MiB / s |",
            "",
            "Where the driver's CPU went (a second run under cProfile, its own time per function, grouped by file):"
            f" {shares}. The largest functions: {top}.",
        ]
    )

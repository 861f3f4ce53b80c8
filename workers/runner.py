"""The accelerator worker's core: one verifier loaded once, drafts loaded lazily, cells run and measured.

Pure Python/torch (no Ray): `workers.accelerator` wraps it in a Ray actor. A cell comes in as a dict
(`orchestrator.cells.CellSpec` fields plus `params`) and a result goes out as a `CellResult`.
"""

from __future__ import annotations

import logging
import os
import socket
import time
from dataclasses import asdict, dataclass, field
from typing import Any

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class RunnerConfig:
    """What the accelerator worker needs to build its verifier and measure power."""

    model: str
    tokenizer: str | None = None
    revision: str | None = None
    dtype: str = "auto"
    device: str = "auto"
    max_new_tokens: int = 100
    warmup: bool = True
    power_sources: tuple[str, ...] = ("auto",)
    power_hz: float = 10.0
    idle_baseline_s: float = 0.0
    threads: int | None = None


@dataclass(frozen=True)
class CellResult:
    """The outcome of one cell: `payload` holds the row to store when `ok`, else `error` says why."""

    key: str
    ok: bool
    payload: dict[str, Any] = field(default_factory=dict)
    error: str | None = None
    worker: str = ""


def _fault_hooks(cell: dict) -> None:
    """Test-only fault injection through the environment (the worker's crash and error paths)."""
    if slow := os.environ.get("GREENSPEC_FAULT_SLOW"):
        time.sleep(float(slow))  # lets a test kill the driver mid-sweep
    marker = os.environ.get("GREENSPEC_FAULT_CRASH_ONCE")
    if marker and cell["kind"] == "sweep" and not os.path.exists(marker):
        open(marker, "w").close()
        os._exit(17)  # the worker process dies mid-cell, as a segfault or OOM kill would
    if (bad := os.environ.get("GREENSPEC_FAULT_RAISE")) and cell.get("strategy") == bad:
        raise RuntimeError(f"injected failure for strategy {bad}")


class SweepRunner:
    """Holds the verifier, the current draft and the power sampler; runs cells one by one."""

    def __init__(self, cfg: RunnerConfig):
        import torch

        from workers.power import PowerSampler, find_sources
        from workers.tokenizer import load_tokenizer
        from workers.verifier import Verifier, load_verifier

        if cfg.threads:
            torch.set_num_threads(cfg.threads)
        self.cfg = cfg
        self.verifier: Verifier = load_verifier(cfg.model, dtype=cfg.dtype, device=cfg.device, revision=cfg.revision)
        self.tokenizer = load_tokenizer(cfg.tokenizer or cfg.model)
        self.eos_id = self.tokenizer.eos_token_id
        self.sampler = PowerSampler(find_sources(cfg.power_sources), hz=cfg.power_hz)
        self.sampler.start()
        self.idle = self.sampler.idle_baseline(cfg.idle_baseline_s) if cfg.idle_baseline_s > 0 else None
        self._draft_key: tuple | None = None
        self._draft = None
        self._warm: set[tuple] = set()
        self.worker = f"{socket.gethostname()}:{os.getpid()}:{self.verifier.device}"

    def info(self) -> dict[str, Any]:
        """Device and power sources, for the experiment row."""
        return {"device": str(self.verifier.device), "worker": self.worker,
                "power_sources": [s.name for s in self.sampler.sources],
                "idle_power_w": self.idle["mean_power_w"] if self.idle else None}

    def close(self) -> None:
        """Stop sampling and free the draft."""
        self.sampler.stop()
        self._draft = None

    def drain_samples(self) -> list[dict[str, Any]]:
        """Raw power samples taken since the last drain (plain dicts for the driver to store)."""
        return [asdict(s) for s in self.sampler.drain_samples()]

    def run(self, cell: dict) -> CellResult:
        """Run one cell; exceptions propagate (the actor boundary records them)."""
        _fault_hooks(cell)
        if cell["kind"] == "reference":
            payload = self._reference(cell)
        else:
            payload = self._sweep(cell)
        return CellResult(key=cell["key"], ok=True, payload=payload, worker=self.worker)

    def _prompt_ids(self, text: str) -> list[int]:
        return list(self.tokenizer(text).input_ids)

    def _reference(self, cell: dict) -> dict[str, Any]:
        from workers.decoding import greedy_reference

        prompt_ids = self._prompt_ids(cell["params"]["prompt"])
        t0 = time.perf_counter()
        tokens = greedy_reference(self.verifier, prompt_ids, self.cfg.max_new_tokens, eos_id=self.eos_id)
        wall_s = time.perf_counter() - t0
        return {"prompt_text": cell["params"]["prompt"], "prompt_tokens": prompt_ids, "tokens": list(tokens),
                "text": self.tokenizer.decode(list(tokens), skip_special_tokens=True), "wall_s": wall_s}

    def _draft_for(self, cell: dict):
        """The draft of this cell's strategy: reused while the strategy stays, released when it changes."""
        from workers.drafts import make_draft

        opts = cell["params"]["options"]
        key = (cell["strategy"], cell["draft"], cell["params"].get("ibase_path"))
        if key == self._draft_key:
            return self._draft
        self._draft, self._draft_key = None, None  # release the previous draft before loading the next
        name = cell["draft"]
        if name == "plain":
            draft = make_draft("plain")
        elif name == "ngram":
            draft = make_draft("ngram", n=opts["n"], unit=opts["unit"], tokenizer=self.tokenizer)
        elif name == "olifant":
            draft = make_draft("olifant", ibase=cell["params"]["ibase_path"])
        else:
            draft = make_draft("neural", model=opts["model"], device=self.verifier.device,
                               tokenizer=opts.get("tokenizer"), verifier_tokenizer=self.tokenizer)
        self._draft, self._draft_key = draft, key
        logger.info("loaded draft %s for strategy %s", name, cell["strategy"])
        return draft

    def _sweep(self, cell: dict) -> dict[str, Any]:
        from workers.decoding import speculative_generate, warmup

        draft = self._draft_for(cell)
        prompt_ids = self._prompt_ids(cell["params"]["prompt"])
        k, cached = cell["k"], cell["regime"] == "cached"  # plain cells carry k = 0: nothing drafted
        warm_key = (cell["strategy"], k, cached)
        if self.cfg.warmup and warm_key not in self._warm:  # first call pays allocation/JIT costs: not timed
            warmup(self.verifier, draft, prompt_ids, k, cached, min(8, self.cfg.max_new_tokens))
            self._warm.add(warm_key)
        res = speculative_generate(self.verifier, draft, prompt_ids, self.cfg.max_new_tokens, k, cached,
                                   eos_id=self.eos_id)
        return {
            "n_prompt_tokens": len(prompt_ids), "tokens": list(res.tokens),
            "text": self.tokenizer.decode(list(res.tokens), skip_special_tokens=True),
            "steps": res.steps, "drafted": res.drafted, "accepted": res.accepted,
            "accept_hist": list(res.accept_hist), "accepted_per_step": list(res.accepted_per_step),
            "tokens_per_step": list(res.tokens_per_step),
            "fastpath_rejects": res.fastpath_rejects, "wall_s": res.wall_s, "draft_s": res.draft_s,
            "verify_s": res.verify_s, "started_at": res.started_at, "ended_at": res.ended_at,
            "bridged": bool(res.bridged), "stopped": res.stopped, "device": str(self.verifier.device),
        }

    def attach_energy(self, results: list[CellResult]) -> list[CellResult]:
        """Integrate the power trace over each sweep generation's [started_at, ended_at] window."""
        from workers.power import j_per_100_tokens, tokens_per_j

        out = []
        for r in results:
            p = r.payload
            if r.ok and "started_at" in p:
                w = self.sampler.window(p["started_at"], p["ended_at"])
                n = len(p["tokens"])
                p = {**p, "energy_j": w.energy_j, "mean_power_w": w.mean_power_w, "power_source": w.source_label,
                     "power_measured": w.measured, "j_per_100_tokens": j_per_100_tokens(w.energy_j, n),
                     "tokens_per_j": tokens_per_j(w.energy_j, n)}
                r = CellResult(key=r.key, ok=True, payload=p, worker=r.worker)
            out.append(r)
        return out

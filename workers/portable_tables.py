"""A round-cost table measured alone, for one verifier on one device (`greenspec costs measure`), and read back from
a file (`greenspec costs import`): a portable artifact that re-predicts replayed generations for that device.

`measure_table` loads the verifier (`workers.verifier.load_verifier`) with the threads, dtype and device asked for,
times real rounds with `workers.decoding.roundtimer.measure_round_costs` in every regime while a power sampler
runs (NVML or RAPL where present: the energy is *measured*, joules per round recorded; else the CPU estimate:
*estimated*), and checks a few greedy references teacher-forced on that device: `agreement` is the share of their
positions whose argmax is the reference's token. Below 1.0 the device's greedy tokens differ (fp16 or bf16, other
kernels), so replay's passes would not be its passes, and every prediction made with the table says so. The
references are made by the verifier in float32 on CPU (the replay's reference device) unless given, e.g. an
experiment's stored `references` rows.

A table's `meta` carries what it was measured on: the device, dtype, threads, library versions (the roundtimer's),
the cores and memory, the model as named (`model`), its vocabulary, the energy (`energy`: measured or estimated,
`mean_power_w`, `power_source`, `joules_per_round` when measured), the seconds the measurement took, and the
reference check (`agreement`, `agreement_positions`, `references`).

Example:
    >>> table, samples = measure_table(MeasureRequest("smollm2-135m", threads=1))
    >>> table.meta["agreement"], table.noise["cached"]
    (1.0, 0.012)
    >>> text = table_file(table, "smollm2-135m-cpu-1t-float32", samples)
    >>> read_table_file(text, "t.json")[0] == table
    True
"""

from __future__ import annotations

import json
import math
import os
import time
from collections.abc import Sequence
from dataclasses import dataclass, replace

from workers.decoding.costmodel import RoundCosts
from workers.decoding.passes import REGIMES
from workers.errors import GreenspecError

REFERENCES = 3  # greedy references the check runs teacher-forced
REFERENCE_TOKENS = 32  # new tokens of each
REFERENCE_PROMPT_TOKENS = 48


class CostTableError(GreenspecError):
    """A cost table that cannot be read or used (a corrupt file, a table for another verifier)."""


@dataclass(frozen=True)
class MeasureRequest:
    """What `greenspec costs measure` measures: the verifier, where and how, the widths and contexts, the budget."""

    verifier: str
    device: str = "auto"
    dtype: str = "auto"
    threads: int | None = None  # torch threads (None: torch's default, every core)
    max_k: int = 8
    trees: tuple[int, ...] = (5,)
    contexts: tuple[int, int] = (32, 160)
    repeats: int = 3
    budget_s: float | None = 75.0  # no repeat started past it (one always runs)


Reference = tuple[list[int], list[int]]  # (prompt tokens, greedy new tokens)


def measure_table(req: MeasureRequest, references: Sequence[Reference] = ()) -> tuple[RoundCosts, list]:
    """Load the verifier as asked and measure its table (`measure_loaded`); `references`: stored ones to check,
    else made here in float32 on CPU."""
    import torch

    from workers.models.tokenizer import load_tokenizer
    from workers.verifier import load_verifier

    before = torch.get_num_threads()
    if req.threads is not None:
        torch.set_num_threads(req.threads)
    try:
        verifier = load_verifier(req.verifier, dtype=req.dtype, device=req.device)
        tokenizer = load_tokenizer(req.verifier)
        prompts = prompt_texts(tokenizer)
        refs = list(references) or make_references(req.verifier, verifier, prompts, REFERENCE_TOKENS)
        return measure_loaded(verifier, [t for p in prompts for t in p], req, refs)
    finally:
        torch.set_num_threads(before)


def prompt_texts(tokenizer, n: int = REFERENCES, tokens: int = REFERENCE_PROMPT_TOKENS) -> list[list[int]]:
    """n prompts of real English (the standard library's pydoc topics), `tokens` tokens each."""
    from pydoc_data.topics import topics

    keys = sorted(topics)
    out = []
    for key in keys[: n * 4 : 4]:
        ids = list(tokenizer(" ".join(topics[key].split())).input_ids)
        out.append(ids[:tokens])
    return out


def make_references(model: str, verifier, prompts: Sequence[Sequence[int]], n: int) -> list[Reference]:
    """Greedy references of `prompts`, made by the verifier in float32 on CPU: `verifier` itself when it is that,
    else a second load of `model` there."""
    import torch

    from workers.decoding.references import greedy_reference
    from workers.verifier import load_verifier

    maker = verifier
    if verifier.device.type != "cpu" or verifier.dtype != torch.float32:
        maker = load_verifier(model, dtype="float32", device="cpu")
    return [(list(p), greedy_reference(maker, list(p), n)) for p in prompts]


def reference_agreement(verifier, references: Sequence[Reference]) -> tuple[float | None, int]:
    """(share of reference positions whose argmax on `verifier` is the reference's token, positions checked), each
    reference teacher-forced in one uncached pass; (None, 0) without references."""
    import torch

    from workers.decoding.rounds import greedy_tokens

    agree = total = 0
    with torch.inference_mode():
        for prompt, ref in references:
            ref = [int(t) for t in ref]
            if not prompt or not ref:
                continue
            got = greedy_tokens(verifier.logits([int(t) for t in prompt] + ref[:-1], len(ref)))
            agree += sum(int(a == b) for a, b in zip(got, ref))
            total += len(ref)
    return (agree / total if total else None), total


def measure_loaded(verifier, context_ids: Sequence[int], req: MeasureRequest, references: Sequence[Reference]):
    """The table of a loaded verifier (threads as set now) over `context_ids`, its energy and reference check in
    its meta (the module doc); (table, samples)."""
    from workers.decoding.roundtimer import measure_round_costs
    from workers.power import PowerSampler, find_sources

    lo, hi = req.contexts
    t0 = time.perf_counter()
    with PowerSampler(find_sources("auto")) as sampler:
        with sampler.measure() as span:
            table, samples = measure_round_costs(
                verifier,
                context_ids,
                max_n=req.max_k,
                tree_sizes=tuple(req.trees),
                regimes=REGIMES,
                max_context=hi,
                min_context=lo,
                repeats=req.repeats,
                budget_s=req.budget_s,
            )
    measure_s = time.perf_counter() - t0
    agreement, positions = reference_agreement(verifier, references)
    w = span.window
    energy = {
        "energy": "measured" if w.measured else "estimated",
        "power_source": w.source_label,
        "mean_power_w": w.mean_power_w,
        "energy_j": w.energy_j,
        "joules_per_round": w.energy_j / len(samples) if w.measured and samples else None,
    }
    meta = dict(table.meta) | machine_meta(verifier) | energy
    meta |= {"model": req.verifier, "measure_s": measure_s, "repeats": req.repeats, "contexts": [lo, hi]}
    meta |= {"agreement": agreement, "agreement_positions": positions, "references": len(references)}
    return replace(table, meta=meta), samples


def machine_meta(verifier) -> dict:
    """The cores, memory and vocabulary beside the roundtimer's description of the device."""
    import torch

    cores = os.cpu_count()
    usable = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else cores
    try:
        memory = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        memory = None
    out = {"cores": cores, "usable_cores": usable, "memory_gb": round(memory / 2**30, 1) if memory else None}
    if verifier.device.type == "cuda":
        out["device_memory_gb"] = round(torch.cuda.get_device_properties(verifier.device).total_memory / 2**30, 1)
    return out | {"vocab_size": int(verifier.vocab_size)}


# ----------------------------------------------------------------------------- the file: what export writes


def table_file(table: RoundCosts, name: str, samples: Sequence = ()) -> str:
    """A table as the file `costs export` writes and `costs import` reads: RoundCosts' JSON with its name and rounds
    (`RoundCosts.from_json` reads it too)."""
    raw = json.loads(table.to_json())
    raw |= {"name": name, "samples": [list(s) for s in samples]}
    return json.dumps(raw, indent=1) + "\n"


def read_table_file(text: str, where: str) -> tuple[RoundCosts, str | None, list]:
    """(table, its name or None, its timed rounds) from a file's text; a corrupt, truncated or foreign file is
    refused in one line naming `where` and what is wrong."""
    try:
        raw = json.loads(text)
    except json.JSONDecodeError as err:
        raise CostTableError(
            f"{where}: not a cost table: corrupt or truncated JSON ({err.msg} at line {err.lineno})"
        ) from err
    if not isinstance(raw, dict) or not isinstance(raw.get("rows"), dict) or "verifier" not in raw:
        raise CostTableError(f"{where}: not a cost table (no verifier and rows; `greenspec costs export` writes one)")
    try:
        table = RoundCosts.from_json(raw)
        samples = [(str(g), str(k), int(n), int(c), float(s)) for g, k, n, c, s in raw.get("samples") or []]
    except (TypeError, ValueError, KeyError) as err:
        raise CostTableError(f"{where}: not a cost table: a row or round is malformed ({err})") from err
    check_table(table, where)
    name = raw.get("name")
    return table, str(name) if name else None, samples


def check_table(table: RoundCosts, where: str) -> None:
    """Refuse a table with no rows, a row of an unknown regime or kind, or a time that is not a positive number."""
    if not table.rows:
        raise CostTableError(f"{where}: the cost table has no rows")
    for name, row in table.rows.items():
        parts = name.split("/")
        if len(parts) != 3 or parts[0] not in REGIMES or not parts[2].isdigit():
            raise CostTableError(f"{where}: row {name!r} is not regime/kind/n (regimes: {', '.join(REGIMES)})")
        if not row or any(not (math.isfinite(s) and s > 0) or c < 1 for c, s in row):
            raise CostTableError(f"{where}: row {name!r} has no positive finite seconds at a context >= 1")


def device_description(table: RoundCosts) -> str:
    """The device a table was measured on, as it keys the table: "cpu: Intel(R) Xeon(R) Processor"."""
    name = table.meta.get("device_name")
    return f"{table.device}: {name}" if name else table.device


def default_name(table: RoundCosts) -> str:
    """A table's name when none is given: model, device, threads (on CPU) and dtype, "smollm2-135m-cpu-1t-float32"."""
    model = str(table.meta.get("model") or table.verifier.split(":")[0]).rstrip("/").split("/")[-1]
    device = table.device.split(":")[0]
    threads = table.meta.get("threads")
    parts = [model, device, f"{threads}t" if device == "cpu" and threads else None, table.meta.get("dtype")]
    return "-".join(str(p) for p in parts if p)


def table_label(name: str, table: RoundCosts, agreement: float | None) -> str:
    """How a prediction made with the table is labelled wherever shown: the device, and the reference check when it
    is not a full agreement."""
    m = table.meta
    how = ", ".join(
        str(p) for p in (device_description(table), m.get("threads") and f"{m['threads']} threads", m.get("dtype")) if p
    )
    check = (
        "; reference agreement not checked"
        if agreement is None
        else f"; reference agreement {agreement:.1%}, below 100%: the device's passes may differ"
        if agreement < 1.0
        else ""
    )
    return f"predicted for {name} ({how}){check}"

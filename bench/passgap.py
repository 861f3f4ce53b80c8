"""What runs before a verifier pass changes what it costs: one cached decoding step of SmolLM2 at one torch thread
(the accelerator worker's setting on this machine), timed back to back and after a gap of other work between steps:
sleeping, a Python loop, and streaming through a 200 MB array (a draft's memory traffic), for 5 and 30 ms.

The round-cost table times its rounds nearly back to back; a timed generation runs its draft between the verifier's
passes, and the run's pace probe follows the gap between two generations. A pass that is slower after a gap makes
the table predict timed generations a little fast (the bias `greenspec demo` and `python -m bench costmodel` show).
The steps of every condition are interleaved, 40 rounds; the median per condition against back to back.
"""

from __future__ import annotations

import statistics
import time

ROUNDS, QUICK_ROUNDS = 40, 5
GAPS = (
    ("sleep", 5),
    ("python loop", 5),
    ("200 MB streamed", 5),
    ("sleep", 30),
    ("200 MB streamed", 30),
)


def _gap(kind: str, ms: float, arr) -> None:
    end = time.perf_counter() + ms / 1000
    if kind == "sleep":
        time.sleep(ms / 1000)
        return
    i, chunk, x = 0, 2_000_000, 0
    while time.perf_counter() < end:
        if kind == "python loop":
            x += 1
        else:
            arr[i : i + chunk].sum()
            i = (i + chunk) % (len(arr) - chunk)


def measure(rounds: int) -> dict[str, float]:
    """Median seconds of one cached step per condition ("back to back" and each gap)."""
    import numpy as np
    import torch

    from workers.verifier import load_verifier

    torch.set_num_threads(1)
    model = load_verifier("smollm2-135m", dtype="float32", device="cpu").model
    arr = np.ones(50_000_000, dtype=np.float32)
    with torch.no_grad():
        past = model(torch.arange(100, 164).unsqueeze(0), use_cache=True).past_key_values
        token = torch.tensor([[200]])

        def step() -> float:
            t0 = time.perf_counter()
            model(token, past_key_values=past, use_cache=True)
            seconds = time.perf_counter() - t0
            past.crop(-1)  # back to the same 64 cached tokens
            return seconds

        for _ in range(10):
            step()
        times: dict[str, list[float]] = {"back to back": []} | {f"after {ms} ms of {k}": [] for k, ms in GAPS}
        for _ in range(rounds):
            times["back to back"].append(step())
            for kind, ms in GAPS:
                _gap(kind, ms, arr)
                times[f"after {ms} ms of {kind}"].append(step())
    return {name: statistics.median(ts) for name, ts in times.items()}


def run(quick: bool = False) -> str:
    """The Markdown section for BENCHMARKS.md."""
    rounds = QUICK_ROUNDS if quick else ROUNDS
    return render(measure(rounds), rounds)


def render(medians: dict[str, float], rounds: int) -> str:
    """The section: a column per condition, a row of medians (ms) and one against back to back."""
    base = medians["back to back"]
    return "\n".join(
        [
            "## A verifier pass after other work (`bench/passgap.py`)",
            "",
            "One cached decoding step of SmolLM2-135M (fp32, CPU, 1 torch thread, 64 tokens cached), timed back to back"
            f" and right after a gap of other work, every condition in turn, {rounds} rounds; the median.",
            "",
            "| step | " + " | ".join(medians) + " |",
            "|---|" + "---:|" * len(medians),
            "| ms | " + " | ".join(f"{s * 1000:.2f}" for s in medians.values()) + " |",
            "| against back to back | " + " | ".join(f"{s / base - 1:+.1%}" for s in medians.values()) + " |",
        ]
    )

"""`make bench`: run every benchmark side by side with its reference and write BENCHMARKS.md.

Usage: python -m bench [igtree|decoding|orchestrator|dashboard|drafts|training|confidence ...] [--quick]
"""

from __future__ import annotations

import datetime as dt
import importlib
import os
import platform
import sys
from pathlib import Path

SUITES = ("igtree", "decoding", "orchestrator", "dashboard", "drafts", "training", "confidence")
OUT = Path(__file__).resolve().parents[1] / "BENCHMARKS.md"
GPU_NOTE = Path(__file__).resolve().parent / "gpu.md"


def machine() -> str:
    """One paragraph naming the machine the figures came from."""
    import torch

    cpu = "unknown CPU"
    try:
        cpu = next(line.split(":", 1)[1].strip() for line in open("/proc/cpuinfo") if line.startswith("model name"))
    except (OSError, StopIteration):
        pass
    mem = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    return (f"Machine: {cpu}, {os.cpu_count()} cores, {mem:.0f} GiB RAM, {platform.system()} {platform.release()}; "
            f"Python {platform.python_version()}, torch {torch.__version__} ({'CUDA' if torch.cuda.is_available() else 'CPU'}). "
            f"Run {dt.datetime.now(dt.timezone.utc):%Y-%m-%d %H:%M} UTC.")


def main(argv: list[str]) -> int:
    quick = "--quick" in argv
    names = [a for a in argv if not a.startswith("--")] or list(SUITES)
    sections = [f"# Benchmarks\n\n`make bench` (= `python -m bench`) regenerates this file. {machine()}\n"]
    for name in names:
        print(f"== bench {name}", file=sys.stderr)
        sections.append(importlib.import_module(f"bench.{name}").run(quick=quick))
    sections.append(GPU_NOTE.read_text().strip())  # kept by hand: `bench/gpu.sh` runs only on a GPU machine
    text = "\n\n".join(sections) + "\n"
    if set(names) == set(SUITES) and not quick:
        OUT.write_text(text)
        print(f"wrote {OUT}", file=sys.stderr)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

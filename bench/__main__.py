"""`make bench`: run every benchmark side by side with its reference and write BENCHMARKS.md.

Usage: python -m bench [igtree|decoding|orchestrator|dashboard|drafts|training|confidence|costmodel|replay|million|
       million_results|repredict|driver|passgap ...]
       [--quick]
       python -m bench training --scaling [--tokens N]   (training over 1, 2, 4, ... workers: `bench.scaling`)

Each suite owns one region of BENCHMARKS.md, between `<!-- bench:NAME -->` and `<!-- /bench:NAME -->`: a full
(not --quick) run of a suite replaces its region (the suite's heading, its command, its tables, the machine) and
leaves everything else (other suites' last results, the findings written after each region, the sections kept by
hand: mutation scores, the suite's time) as it was, as the file stands when the suite ends. A suite without a region
yet is appended.
"""

from __future__ import annotations

import importlib
import os
import platform
import re
import sys
from pathlib import Path

SUITES = (
    "igtree",
    "decoding",
    "orchestrator",
    "dashboard",
    "drafts",
    "training",
    "confidence",
    "costmodel",
    "replay",
    "million",
    "million_results",
    "repredict",
    "driver",
    "passgap",
)
OUT = Path(__file__).resolve().parents[1] / "BENCHMARKS.md"


def machine() -> str:
    """One paragraph naming the machine the figures came from."""
    import torch

    cpu = "unknown CPU"
    try:
        cpu = next(line.split(":", 1)[1].strip() for line in open("/proc/cpuinfo") if line.startswith("model name"))
    except (OSError, StopIteration):
        pass
    mem = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    device = torch.cuda.get_device_name() if torch.cuda.is_available() else "CPU"
    return (
        f"Machine: {cpu}, {os.cpu_count()} cores, {mem:.0f} GiB RAM, {platform.system()}; "
        f"Python {platform.python_version()}, torch {torch.__version__} ({device})."
    )


HEADER = (
    "# Benchmarks\n\n`make bench` (= `python -m bench`) reruns every suite below and replaces its section; "
    "`python -m bench NAME` one suite. Each section names its command and the machine it ran on; sections "
    "without a `bench:` marker are kept by hand.\n"
)


def stamped(name: str, body: str, machine_line: str) -> str:
    """A suite's region text: its heading, the command that reproduces it (opening the setup's paragraph where one
    follows the heading), its body, and the machine."""
    lines = body.strip().split("\n")
    head, rest = (lines[:1], lines[1:]) if lines[0].startswith("#") else ([], lines)
    while rest and not rest[0].strip():
        rest.pop(0)
    command = f"`python -m bench {name}` (part of `make bench`)."
    if rest and rest[0][:1] not in PLAIN_START:
        rest[0] = f"{command} {rest[0]}"
    else:
        rest = [command, "", *rest]
    return "\n".join([*head, *([""] if head else []), *rest]) + f"\n\n_{machine_line}_"


PLAIN_START = ("|", "#", "<", "-", "*", "`", "_")  # a line the command does not open: a table, heading, list, code


def replace_region(doc: str, name: str, body: str) -> str:
    """`doc` with suite `name`'s region replaced by `body` (appended, with its markers, if it has none)."""
    region = f"<!-- bench:{name} -->\n{body.strip()}\n<!-- /bench:{name} -->"
    pattern = re.compile(rf"<!-- bench:{re.escape(name)} -->.*?<!-- /bench:{re.escape(name)} -->", re.S)
    if pattern.search(doc):
        return pattern.sub(lambda _: region, doc, count=1)
    return doc.rstrip("\n") + "\n\n" + region + "\n"


def main(argv: list[str]) -> int:
    if "--scaling" in argv:
        return scaling(argv)
    quick = "--quick" in argv
    names = [a for a in argv if not a.startswith("--")] or list(SUITES)
    if unknown := [n for n in names if n not in SUITES]:
        print(f"bench: unknown suite {', '.join(unknown)}; choose from {', '.join(SUITES)}", file=sys.stderr)
        return 2
    for name in names:
        print(f"== bench {name}", file=sys.stderr)
        body = importlib.import_module(f"bench.{name}").run(quick=quick).strip()
        print(body + "\n")
        if not quick:  # --quick figures are a smoke run, never recorded; the file read now: edits made meanwhile stay
            doc = replace_region(OUT.read_text() if OUT.exists() else HEADER, name, stamped(name, body, machine()))
            OUT.write_text(doc)  # after every suite: a later suite's failure keeps this one's result
            print(f"wrote {OUT} (section {name})", file=sys.stderr)
    return 0


def scaling(argv: list[str]) -> int:
    """`python -m bench training --scaling [--tokens N]`: the scaling table, recorded in its own region (the
    default 10^8 tokens only: a smaller --tokens is a quick run, printed)."""
    from bench import scaling as bench_scaling

    tokens = int(float(argv[argv.index("--tokens") + 1])) if "--tokens" in argv else bench_scaling.DEFAULT_TOKENS
    body = bench_scaling.run(tokens).strip()
    print(body + "\n")
    if tokens == bench_scaling.DEFAULT_TOKENS:
        doc = OUT.read_text() if OUT.exists() else HEADER
        OUT.write_text(replace_region(doc, "training-scaling", f"{body}\n\n_{machine()}_"))
        print(f"wrote {OUT} (section training-scaling)", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

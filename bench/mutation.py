"""`make mutation`: mutation testing (mutmut 3.x) of the modules that compute results, each against its own tests.

Not part of CI or of `make bench`: slow (minutes to hours per module on 2 cores). For each target, the
tracked and untracked-but-not-ignored files of the repository are copied to a scratch folder, a `setup.cfg`
`[mutmut]` section names the one module to mutate and the test modules that must kill its mutants, and
`mutmut run` runs there, so the working tree never sees a `mutants/` folder. The share of mutants killed per
module goes to `.mutation/summary.md` (BENCHMARKS.md's "Mutation testing" section gives the command and the targets,
not scores: `make bench` does not run it); survivors' diffs go to `.mutation/<target>/survivors.txt`.

Usage: python -m bench.mutation [metrics decoding shapes judges summary tables igtree sampler estimate attribution]
           [--jobs N] [--minutes M] [--keep]
       python -m bench.mutation igtree --survivors      # re-run only the last run's survivors against today's tests
       python -m bench.mutation decoding --sample 150   # 150 random mutants not yet checked (after a partial run)

`--keep` continues a stopped (partial) run in its scratch copy: mutants with a result keep it, the rest run.
`--survivors` re-runs, in the kept scratch copy, only the mutants the last run of that target left alive, after
copying today's tests there; the counts are then those of the whole module with the survivors' new verdicts.

mutmut 3.x has no `--paths-to-mutate` or `--runner` flags (those were 2.x): the module is chosen with
`source_paths` + `only_mutate` and the tests with `pytest_add_cli_args_test_selection` in the config file.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / ".mutation"


@dataclass(frozen=True)
class Target:
    """One module to mutate (the first of `candidates` that exists) and the test files that guard it."""

    name: str
    candidates: tuple[str, ...]
    tests: tuple[str, ...]  # globs, relative to the repository root

    def module(self) -> str | None:
        return next((c for c in self.candidates if (ROOT / c).exists()), None)

    def test_files(self) -> list[str]:
        return sorted({str(p.relative_to(ROOT)) for g in self.tests for p in ROOT.glob(g)})


TARGETS = {
    "metrics": Target("metrics", ("workers/metrics.py",), ("tests/workers/test_metrics.py",)),
    # the decoding's rounds (one per regime) and their two shapes (chains, token trees), the package's core
    "decoding": Target(
        "decoding",
        ("workers/decoding/regimes.py",),
        ("tests/workers/decoding/test_decoding*.py", "tests/workers/decoding/test_sampling.py"),
    ),
    "shapes": Target(
        "shapes",
        ("workers/decoding/shapes.py",),
        ("tests/workers/decoding/test_decoding*.py", "tests/workers/decoding/test_tree_rounds.py"),
    ),
    # the greedy and sampling judges: the same tests guard them
    "judges": Target(
        "judges",
        ("workers/decoding/judges.py",),
        ("tests/workers/decoding/test_decoding*.py", "tests/workers/decoding/test_sampling.py"),
    ),
    # the summary queries (storage/summary.py) and the intervals over them
    "summary": Target(
        "summary",
        ("storage/summary.py", "analysis/intervals.py", "storage/queries.py"),
        ("tests/analysis/test_summary*.py", "tests/dashboard/test_reads*.py"),
    ),
    "tables": Target("tables", ("analysis/tables.py",), ("tests/analysis/test_tables*.py",)),
    # the IGTree lookup
    "igtree": Target(
        "igtree",
        ("workers/igtree/tree.py",),
        ("tests/workers/igtree/test_igtree*.py",),
    ),
    # the energy figures: window integration and the labelled estimate, against the replayed-trace tests
    "sampler": Target(
        "sampler",
        ("workers/power/sampler.py",),
        (
            "tests/workers/power/test_power.py",
            "tests/workers/power/test_power_integrate.py",
            "tests/workers/power/test_power_trace.py",
            "tests/workers/power/test_power_rapl.py",
            "tests/workers/power/test_power_sampler_mutants.py",
        ),
    ),
    "estimate": Target(
        "estimate",
        ("workers/power/estimate.py",),
        ("tests/workers/power/test_power_estimate*.py", "tests/workers/power/test_power.py"),
    ),
    # whose joules: generations' and label passes' windows (the runner's energy part) and trainings' shares
    "attribution": Target(
        "attribution", ("workers/power/attribution.py",), ("tests/workers/power/test_power_attribution.py",)
    ),
}

ALIASES = {"queries": "summary"}  # the old name of the summary target


def copy_repo(dest: Path) -> None:
    """The repository's tracked and untracked-but-not-ignored files, copied to `dest`."""
    files = subprocess.run(
        ["git", "ls-files", "-co", "--exclude-standard", "-z"], cwd=ROOT, check=True, capture_output=True, text=True
    ).stdout.split("\0")
    for rel in filter(None, files):
        src = ROOT / rel
        if src.is_file():
            (dest / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dest / rel)


def config(module: str, tests: list[str]) -> str:
    """The setup.cfg [mutmut] section for one module and its tests."""
    package = module.split("/")[0]
    others = sorted(p.name for p in ROOT.iterdir() if p.is_dir() and (p / "__init__.py").exists() and p.name != package)
    lines = [
        "[mutmut]",
        f"source_paths = {package}",
        f"only_mutate = {module}",
        "also_copy =",
        *(f"    {p}" for p in [*others, "examples"]),
        "pytest_add_cli_args =",
        "    -p",
        "    no:cacheprovider",
        "    -p",
        "    bench.mutation_widen",
        "    -x",
        "    -q",
        "pytest_add_cli_args_test_selection =",
        *(f"    {t}" for t in tests),
        "process_isolation = forkserver",  # torch is not fork-safe once its thread pool started
        "timeout_multiplier = 5.0",
        "timeout_constant = 20.0",
    ]
    return "\n".join(lines) + "\n"


# long: one mutation target's whole protocol (baseline, mutants, timeouts, survivors), read top to bottom
def run_target(
    t: Target, jobs: int, minutes: float | None = None, keep: bool = False, survivors: bool = False, sample: int = 0
) -> dict:
    """Run mutmut for one target in a scratch copy; the counts by outcome and the survivors' diffs.

    `keep` continues in the last run's scratch copy; `survivors` re-runs only the last run's survivors there;
    `sample` runs that many of the kept copy's mutants not yet checked, drawn at random (seeded: the same draw on a
    rerun), so a module too large for one sitting gets an unbiased estimate instead of its first functions only.
    """
    module, tests = t.module(), t.test_files()
    if module is None or not tests:
        return {"target": t.name, "module": module, "not_run": "module or tests not found"}
    work = OUT / t.name / "repo"
    names: list[str] = []
    if survivors:
        last = OUT / t.name / "result.json"
        if not (last.is_file() and (work / "mutants").is_dir()):
            return {"target": t.name, "module": module, "not_run": "no earlier run of this target to re-run"}
        names = json.loads(last.read_text()).get("survivor_names", [])
        if not names:
            return {"target": t.name, "module": module, "not_run": "the last run left no survivors"}
    if sample:
        if not (work / "mutants").is_dir():
            return {"target": t.name, "module": module, "not_run": "no earlier run of this target to sample from"}
        names = unchecked_sample(work, sample)
        if not names:
            return {"target": t.name, "module": module, "not_run": "every mutant is already checked"}
    if not (keep or survivors or sample) or not (work / "mutants").is_dir():
        shutil.rmtree(work, ignore_errors=True)
        work.mkdir(parents=True)
    copy_repo(work)  # today's tests (and unchanged sources) over the kept copy
    (work / "mutants" / "mutmut-stats.json").unlink(missing_ok=True)  # new tests: which test calls what, again
    pyproject = work / "pyproject.toml"  # mutmut reads [tool.mutmut] first; keep the config in setup.cfg
    pyproject.write_text(re.sub(r"\n\[tool\.mutmut\][^\[]*", "\n", pyproject.read_text()))
    (work / "setup.cfg").write_text(config(module, tests))
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env.update(RAY_AUTH_MODE="disabled", TOKENIZERS_PARALLELISM="false", OMP_NUM_THREADS="1")
    mutmut = [sys.executable, "-m", "mutmut"]
    t0 = time.time()
    log = (OUT / t.name / "run.log").open("a" if names or keep else "w")
    proc = subprocess.Popen(
        [*mutmut, "run", "--max-children", str(jobs), *names],
        cwd=work,
        env=env,
        stdout=log,
        stderr=log,
        start_new_session=True,
    )
    try:
        proc.wait(timeout=minutes * 60 if minutes else None)
    except subprocess.TimeoutExpired:  # a partial run: mutants not reached are counted as not checked
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait()
    subprocess.run([*mutmut, "export-cicd-stats"], cwd=work, env=env, stdout=log, stderr=log)
    stats = json.loads((work / "mutants" / "mutmut-cicd-stats.json").read_text())
    survivors = subprocess.run([*mutmut, "results"], cwd=work, env=env, capture_output=True, text=True).stdout
    status = {
        line.split(":")[0].strip(): line.rsplit(":", 1)[1].strip() for line in survivors.splitlines() if ":" in line
    }
    drawn = {}
    if sample:  # the draw's own outcomes (`mutmut results` lists every mutant but the killed ones)
        for name in names:
            drawn[status.get(name, "killed")] = drawn.get(status.get(name, "killed"), 0) + 1
    names = [name for name, verdict in status.items() if verdict == "survived"]
    with (OUT / t.name / "survivors.txt").open("w") as fh:
        for name in names:
            fh.write(subprocess.run([*mutmut, "show", name], cwd=work, env=env, capture_output=True, text=True).stdout)
            fh.write("\n")
    return {
        "target": t.name,
        "module": module,
        "tests": tests,
        "minutes": round((time.time() - t0) / 60, 1),
        **stats,
        "checked": sum(
            stats.get(k, 0) for k in ("killed", "survived", "timeout", "segfault", "suspicious", "skipped", "no_tests")
        ),
        "survivor_names": names,
        **({"sample": drawn} if sample else {}),
    }


def unchecked_sample(work: Path, n: int, seed: int = 0) -> list[str]:
    """Up to n names of the kept copy's mutants that no run has checked yet, drawn at random with `seed`."""
    import random

    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    out = subprocess.run(
        [sys.executable, "-m", "mutmut", "results"], cwd=work, env=env, capture_output=True, text=True
    ).stdout
    names = sorted(line.split(":")[0].strip() for line in out.splitlines() if line.rstrip().endswith(": not checked"))
    return sorted(random.Random(seed).sample(names, min(n, len(names))))


def score(r: dict) -> str:
    """killed / (killed + survived + timeouts counted as killed), as a percentage."""
    killed = r.get("killed", 0) + r.get("timeout", 0) + r.get("segfault", 0)
    total = killed + r.get("survived", 0)
    return f"{100 * killed / total:.1f}%" if total else "n/a"


def table(results: list[dict]) -> str:
    """The markdown table of the results."""
    rows = [
        "| module | tests | mutants | checked | killed | survived | timeout | no tests | score | minutes |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in results:
        if "not_run" in r:
            rows.append(f"| {r['module'] or r['target']} | - | - | - | - | - | - | - | {r['not_run']} | - |")
            continue
        rows.append(
            f"| `{r['module']}` | {', '.join(f'`{t}`' for t in r['tests'])} | {r.get('total', '?')} | {r['checked']} | "
            f"{r.get('killed', 0)} | {r.get('survived', 0)} | {r.get('timeout', 0)} | "
            f"{r.get('no_tests', 0)} | {score(r)} | {r['minutes']} |"
        )
    return "\n".join(rows)


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.mutation")
    parser.add_argument("targets", nargs="*", default=list(TARGETS), choices=[*TARGETS, *ALIASES])
    parser.add_argument("--jobs", type=int, default=1, help="mutants tested at once (default 1: shared cores)")
    parser.add_argument("--minutes", type=float, default=None, help="stop each module after this long (partial)")
    parser.add_argument("--keep", action="store_true", help="continue the last (partial) run of each target")
    parser.add_argument("--survivors", action="store_true", help="re-run only the last run's survivors")
    parser.add_argument(
        "--sample",
        type=int,
        default=0,
        metavar="N",
        help="run N randomly drawn mutants not yet checked (in the kept copy)",
    )
    args = parser.parse_args(argv)
    OUT.mkdir(exist_ok=True)
    results = []
    for name in (ALIASES.get(n, n) for n in args.targets):
        print(f"== mutation {name}", file=sys.stderr)
        results.append(run_target(TARGETS[name], args.jobs, args.minutes, args.keep, args.survivors, args.sample))
        if "not_run" not in results[-1]:  # keep the last real run (its survivors) for --survivors
            (OUT / name / "result.json").write_text(json.dumps(results[-1], indent=2))
    text = table(results)
    (OUT / "summary.md").write_text(text + "\n")
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

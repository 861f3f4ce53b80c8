"""The demo kit and `greenspec demo`: the offline demo end to end, then a summary and the dashboard command.

The kit: `orchestrator.run.demo_corpora` writes the offline corpora (Shakespeare, pydoc), `workers.models.demo`
trains the small demo verifier and draft, `orchestrator.run.inputs` swaps a spec's `demo:` names for them (every
run's `prepare` does), and `examples/demo.toml` is the grid.
"""

from __future__ import annotations

import dataclasses
import logging
import shlex
from pathlib import Path
from typing import Callable

import pandas as pd

from analysis.summary import summary_frame
from orchestrator.cli.progress import BarProgress
from orchestrator.run.inputs import materialize
from orchestrator.run.spec_paths import load_spec
from storage.db import display_url, open_db, sqlite_path
from storage.queries import (
    build_costs_frame,
    experiment_id,
    identical_pass_noise,
    plain_texts,
    timing_spread,
)
from storage.validation import prediction_error, stored_cost_model
from workers.errors import GreenspecError
from workers.metrics import paper_redundancy

logger = logging.getLogger(__name__)

DEMO_SPEC = Path(__file__).resolve().parents[2] / "examples" / "demo.toml"


def _pivot(df: pd.DataFrame, value: str, fmt: str) -> str:
    """strategy x (task, k) table of `value` for each regime, as Markdown."""
    out = []
    for regime, part in df.groupby("regime"):
        table = part.pivot_table(index="strategy", columns=["task", "k"], values=value, aggfunc="first")
        table.columns = [f"{t} k={k}" if k else f"{t} (plain)" for t, k in table.columns]
        table = table.astype(object).where(table.notna(), None)  # blank, not "nan", where a strategy has no k
        out.append(f"{value} ({regime})\n" + table.to_markdown(floatfmt=fmt, missingval=""))
    return "\n\n".join(out)


def summary_text(df: pd.DataFrame, texts: pd.DataFrame | None = None) -> str:
    """The demo's printed summary: throughput, acceptance, energy, and redundancy of the texts."""
    measured = df["power_measured"].dropna()
    label = "measured" if len(measured) and measured.all() else "ESTIMATED (no energy counter here)"
    drafted = df[df["draft"] != "plain"]
    parts = [
        _pivot(df, "tokens_per_s", ".1f"),
        "speedup over plain\n" + _pivot(drafted, "speedup", ".2f"),
        _pivot(drafted, "acceptance", ".2f"),
        _pivot(drafted, "mal", ".2f"),
        f"energy: {label}\n" + _pivot(df, "j_per_100_tokens", ".2f"),
        "agreement with plain greedy (exact match share)\n" + _pivot(df, "exact_match", ".2f"),
    ]
    if texts is not None and not texts.empty:
        parts.append("redundancy of the generated texts (Table 5)\n" + texts.to_markdown(index=False, floatfmt=".3f"))
    return "\n\n".join(parts)


def redundancy_table(session, experiment: str) -> pd.DataFrame:
    """Table 5 over the plain generations of each task, on the paper's definitions (verifier token 4-grams, gzip)."""
    rows = plain_texts(session, experiment_id(session, experiment))
    out = []
    for task in sorted({t for t, _, _ in rows}):
        mine = [(tokens, text) for t, tokens, text in rows if t == task]
        red = paper_redundancy([tk for tk, _ in mine], [tx for _, tx in mine])
        out.append({"task": task, **dataclasses.asdict(red)})
    return pd.DataFrame(out)


def prediction_text(Session, exp_id: int, noise: dict | None) -> str:
    """Replay's predictions against the timed generations, per regime and width band, beside the run's own timing
    noise from generations timed twice (the goal: the table's own error, what that noise leaves of the median error,
    no larger than the noise, a bias within +-3%: `noise_verdict`)."""
    with Session() as s:
        err, stored = prediction_error(s, exp_id), stored_cost_model(s, exp_id)
    table = f"\nround-cost table: {stored.measured()}" if stored is not None else ""
    if err.empty:
        return f"{table}\npredicted vs timed: no generation was both timed and replayed"
    line = (
        f"timing noise (generations timed again after every first timing, |t2 / t1 - 1| / sqrt 2): {noise['sd']:.1%} "
        f"median over "
        f"{noise['generations']} generations"
        if noise
        else "timing noise: no generation was timed twice"
    )
    return (
        f"{table}\npredicted vs timed tokens/s (replay's round-cost table; error = |predicted / measured - 1|, bias = its"
        " median signed value, > 0 predicted too fast; paced_error with each timing set at the table's pace, drift ="
        " median |the machine's pace then / at the table - 1|; table_error = sqrt(median error^2 - noise^2), within_noise ="
        " table_error <= noise and |bias| <= 3%: yes; else no where the pairs show the miss, unresolved where"
        " too few pairs to tell)\n" + err.to_markdown(index=False, floatfmt=".3f") + f"\n{line}"
    )


def build_costs(session, experiment: str) -> pd.DataFrame:
    """Per corpus: the time and energy of its instance base, a distilled one counting its labels too."""
    df = build_costs_frame(session, experiment_id(session, experiment))
    if df.empty:
        return df
    return (
        df.groupby("corpus")
        .agg(parts=("kind", lambda k: " + ".join(sorted(k))), build_s=("build_s", "sum"), energy_j=("energy_j", "sum"))
        .reset_index()
    )


def costs_text(costs: pd.DataFrame) -> str:
    """What the instance bases cost to build, as a titled table ("" without any)."""
    if costs.empty:
        return ""
    return "instance bases: build time and energy (distilled = verifier labels + IGTree)\n" + costs.to_markdown(
        index=False, floatfmt=".1f"
    )


def findings_text(session, experiment: str, noise: dict | None = None) -> str:
    """The paper's claims and the future-work, tree and auto-k targets checked on the run (`greenspec.findings`, the
    table `greenspec findings` prints), beside the run's measured timing noise."""
    from greenspec.findings import findings_markdown, read_findings

    how = (
        f"timing noise measured in this run: {noise['sd']:.1%} per generation ({noise['generations']} generations "
        "timed twice; `greenspec findings` prints this table again)\n"
        if noise
        else ""
    )
    return how + findings_markdown(read_findings(session, experiment))


def run_demo(opts, spec_path: str | None = None, retrain: bool = False, echo: Callable[[str], None] = print) -> None:
    """Build the offline inputs (cached), run the demo spec through the orchestrator, print the summary."""
    from orchestrator.run.driver import run  # deferred: it imports ray

    path = Path(spec_path) if spec_path else DEMO_SPEC
    if not path.is_file():
        raise GreenspecError(f"demo spec not found at {path}; pass --spec examples/demo.toml")
    spec = load_spec(path)
    echo(
        "greenspec demo: preparing corpora and small demo models (trained on first use, a few minutes; then cached)..."
    )
    logging.getLogger("workers.models.demo").setLevel(logging.INFO)  # training steps are the demo's first progress
    spec = materialize(spec, retrain=retrain)
    echo(spec.summary())
    with BarProgress() as bar:
        report = run(spec, path.read_text(), str(path.resolve()), opts, bar)
    _, Session = open_db(opts.db_url, migrate=False)
    with Session() as s:
        df = summary_frame(s, report.experiment)
        texts = redundancy_table(s, report.experiment)
        costs = build_costs(s, report.experiment)
        exp_id = experiment_id(s, report.experiment)
        spread, noise = timing_spread(s, exp_id), identical_pass_noise(s, exp_id)
        found = findings_text(s, report.experiment, noise)
    echo(summary_text(df, texts))
    if spread and spec.sweep.repeats > 1:  # else the runs are the `timed_twice` sample's: the noise, below
        echo(
            f"\ntiming: each generation run {spread['runs']} times, the fastest kept; the slowest run of a generation "
            f"took {spread['median']:.0%} longer than its fastest (median of {spread['generations']}), "
            f"{spread['p90']:.0%} (90th percentile)"
        )
    echo(prediction_text(Session, exp_id, noise))
    if not costs.empty:
        echo("\n" + costs_text(costs))
    echo("\n" + found)
    c = report.counts
    echo(f"\n{c['done']} cells done, {c['failed']} failed in {report.elapsed_s:.0f} s; results in {opts.db_url}.")
    echo(f"Report (one HTML file to share): {write_demo_report(opts.db_url, report.experiment)}")
    echo(next_commands(opts.db_url, report.experiment))


def next_commands(db_url: str, experiment: str) -> str:
    """What to type next, each with the --db the run used (a password masked): the findings, the report, the
    dashboard."""
    db, name = shlex.quote(display_url(db_url)), shlex.quote(experiment)
    return (
        "Next:\n"
        f"  greenspec --db {db} findings --experiment {name}\n"
        f"  greenspec --db {db} report --experiment {name} --out {shlex.quote(experiment + '.html')}\n"
        f"  greenspec --db {db} dashboard"
    )


def write_demo_report(db_url: str, experiment: str) -> Path:
    """The run's HTML report beside its SQLite file (else in the working folder), replaced on every demo run."""
    import greenspec  # deferred: the report's plotly

    db_file = sqlite_path(db_url)
    folder = db_file.resolve().parent if db_file is not None else Path.cwd()
    return greenspec.open_results(db_url).report(experiment, folder / f"{experiment}-report.html", force=True)

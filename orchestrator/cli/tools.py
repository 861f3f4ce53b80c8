"""`greenspec power`, `latency`, `doctor` and `train`: tools beside the sweep (registered on `cli.main`).

Each command imports its library when it runs: every `greenspec` call imports this module, and the drafts, the
trainer and the power meters would triple its start-up (about 2 s here)."""

from __future__ import annotations

import math

import click

from greenspec.outputs import write_failed
from orchestrator.cli.common import FORCE, Context, check_out
from workers.errors import GreenspecError

MAX_POWER_S = 86_400  # `greenspec power --seconds`: at most a day


@click.command()
@click.option("--seconds", default=5.0, show_default=True, type=float, help="How long to sample.")
@click.option(
    "--source",
    "sources",
    multiple=True,
    default=("auto",),
    show_default=True,
    help="auto, nvml, rapl, powermetrics or estimate (repeatable).",
)
def power(seconds: float, sources: tuple[str, ...]) -> None:
    """List power sources, sample them, print mean watts (measured or estimated).

    \b
    Example:
      greenspec power --seconds 10
    """
    from workers.power import format_survey, survey

    if not (math.isfinite(seconds) and 0 < seconds <= MAX_POWER_S):
        raise GreenspecError(f"--seconds {seconds}: give a number of seconds above 0 and at most {MAX_POWER_S}")
    click.echo(format_survey(survey(seconds=seconds, names=sources)))


@click.command()
@click.argument("spec", type=click.Path(dir_okay=False))
@click.option("--prompts", default=10, show_default=True, type=int, help="Prompts (contexts), round-robin over tasks.")
@click.option("--repeats", default=5, show_default=True, type=int, help="Timed single-token queries per prompt.")
@click.option("--timbl/--no-timbl", default=True, show_default=True, help="Also time olifant with TiMBL.")
@click.option("--out", default=None, type=click.Path(dir_okay=False), help="Also write the rows as CSV.")
@FORCE
@click.pass_obj
def latency(obj: Context, spec: str, prompts: int, repeats: int, timbl: bool, out: str | None, force: bool) -> None:
    """Standalone next-token latency of each strategy's draft, no verifier (the paper's §2.3); stored in --db.

    \b
    Example:
      greenspec latency examples/demo.toml --prompts 10 --repeats 5
    """
    from orchestrator.run.latency import load_latency_spec, measure, store_rows, timbl_notes
    from workers.latency import LatencyOptions, format_table, rows_frame

    check_out(obj, out, force)
    opts = LatencyOptions(prompts=prompts, repeats=repeats, timbl=timbl)
    s = load_latency_spec(spec)
    rows = measure(s, opts)
    store_rows(obj.db, s.experiment.name, rows, prompts, repeats)
    click.echo(format_table(rows, timbl_notes(s, opts)))
    if out:
        try:
            rows_frame(rows).to_csv(out, index=False)
        except OSError as err:
            raise write_failed(out, "--out", err) from err


@click.command()
def doctor() -> None:
    """Versions, the accelerator found, and the power sources available.

    \b
    Example:
      greenspec doctor
    """
    from orchestrator.cli.doctor import report

    click.echo(report())


@click.command()
@click.argument("spec", type=click.Path(dir_okay=False))
@click.option("--corpus", required=True, help="The [[corpora]] name to train.")
@click.option(
    "--out",
    default=None,
    type=click.Path(dir_okay=False),
    help="Write the instance base here (default: the spec's artifact store, where a run finds it).",
)
@click.option(
    "--memory-gb",
    default=None,
    type=click.FloatRange(min=0, min_open=True),
    help="Bound the training's resident memory (default: the corpus's memory_gb, else half the free memory).",
)
@FORCE
@click.pass_obj
def train(obj: Context, spec: str, corpus: str, out: str | None, memory_gb: float | None, force: bool) -> None:
    """Train one corpus's instance base exactly as a run would (resumes a killed training).

    \b
    Example:
      greenspec train examples/paper.toml --corpus fineweb --memory-gb 8
    """
    from orchestrator.cli.train_corpus import TrainBar, TrainRequest, closing_line, train_corpus

    if memory_gb is not None and not math.isfinite(memory_gb):
        raise GreenspecError(f"--memory-gb {memory_gb}: give a finite number of gigabytes above 0")
    check_out(obj, out, force)
    with TrainBar() as bar:
        info = train_corpus(TrainRequest(spec, corpus, out, memory_gb, obj.address), progress=bar)
    click.echo(closing_line(info))


COMMANDS = (power, latency, doctor, train)

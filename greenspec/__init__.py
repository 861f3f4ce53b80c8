"""greenspec from Python: results as pandas frames, a run, a shareable HTML report.

The frames are the ones `greenspec export` writes (the same function makes them), so a notebook and the CLI never
disagree. The database is opened read-only: nothing here writes to it but `run`.

Example:
    >>> import greenspec
    >>> db = greenspec.open_results("sqlite:///greenspec.db")  # doctest: +SKIP
    >>> db.experiments()                                   # doctest: +SKIP
    >>> df = db.results("demo")        # one row per strategy, task, k, regime; each figure with its _lo/_hi interval
    >>> gens = db.generations("demo")  # one row per generation (timed and replayed: `measure`)
    >>> found = db.findings("demo")    # the paper's claims and targets with their verdicts
    >>> db.report("demo", "demo-report.html")
    >>> greenspec.run("examples/demo-toy.toml", db="sqlite:///greenspec.db")  # doctest: +SKIP
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from analysis.stored import prediction_error  # stored with the run's summaries, else computed
from greenspec.frames import export_frame, generations_export
from storage.db import DEFAULT_URL, open_reader
from storage.queries import experiment_id, experiment_info, experiments_frame, failures_frame, status_counts
from workers.errors import GreenspecError

if TYPE_CHECKING:
    import pandas as pd

    from orchestrator.run.driver import RunReport

__all__ = ["Results", "open_results", "run"]


class NoResults(GreenspecError):
    """The database does not exist or holds no greenspec schema yet."""


@dataclass
class Results:
    """A read-only view of one results database (`open_results`)."""

    url: str
    Session: object  # storage.db.open_reader's session factory

    def experiments(self) -> pd.DataFrame:
        """One row per experiment: name, spec hash, cells by state."""
        with self.Session() as s:
            return experiments_frame(s)

    def status(self, experiment: str | None = None) -> dict:
        """Cells by state and kind (what `greenspec status --json` prints)."""
        with self.Session() as s:
            return status_counts(s, experiment)

    def results(self, experiment: str | None = None, pooled: bool = False, all_versions: bool = False) -> pd.DataFrame:
        """The export table (newest experiment when None): per-prompt means with 95% intervals over prompts
        (`<figure>_lo`, `<figure>_hi`), rows of an earlier spec version only with `all_versions`."""
        with self.Session() as s:
            return export_frame(s, experiment, pooled, all_versions)

    def generations(self, experiment: str | None = None, all_versions: bool = False) -> pd.DataFrame:
        """One row per generation the summary counts, with what its intervals are computed from."""
        with self.Session() as s:
            return generations_export(s, experiment, all_versions)

    def compare(self, a: str | None, b: str) -> pd.DataFrame:
        """Experiments `a` (the newest when None) and `b` side by side: the cells both ran, each figure of both with
        its interval, B - A, and whether the intervals miss each other (`greenspec.compare`; `export --compare B`)."""
        from greenspec.frames import compare_experiments

        with self.Session() as s:
            return compare_experiments(s, a, b)

    def validation(self, experiment: str | None = None, timed_in: str | None = None) -> pd.DataFrame:
        """The round-cost table's validation on the experiment (newest when None): per regime (band "all") and width
        band, the generations both timed and replayed, median and p90 |predicted / measured - 1| of tokens/s, the
        bias, the error at the table's pace, the machine's drift, the run's own timing noise and Spearman of the speedups
        (`storage.validation.prediction_error`). With `timed_in`, a re-predicted experiment is checked against the
        generations timed in that one (the same prompts run on the device its table was measured on), and the noise
        is that run's."""
        with self.Session() as s:
            exp_id = self._experiment(s, experiment)
            timed = None if timed_in is None else self._experiment(s, timed_in)
            return prediction_error(s, exp_id, timed)

    def _experiment(self, session, name: str | None) -> int:
        exp_id = experiment_id(session, name)
        if exp_id is None:
            raise NoResults(f"no experiment {name!r} in {self.url}" if name else f"no experiment in {self.url}")
        return exp_id

    def findings(self, experiment: str | None = None) -> pd.DataFrame:
        """The paper's claims and the future-work, tree and auto-k targets the experiment (newest when None) can
        answer, one row per verdict with its estimate, interval, prompts and family, and one "not testable here" row
        per claim it cannot answer, with the reason (`greenspec.findings`; what `greenspec findings` prints)."""
        from greenspec.findings import read_findings

        with self.Session() as s:
            return read_findings(s, experiment)

    def report_data(self, experiment: str | None = None):
        """What the HTML report shows (`greenspec.report.ReportData`), read in one session."""
        from greenspec.report import ReportData

        with self.Session() as s:
            exp_id = experiment_id(s, experiment)
            if exp_id is None:
                raise NoResults(
                    f"no experiment {experiment!r} in {self.url}" if experiment else f"no experiment in {self.url}"
                )
            info = experiment_info(s, exp_id)
            name = info["name"]
            return ReportData(
                info=info,
                status=status_counts(s, name),
                results=export_frame(s, name, False, False),
                prediction_error=prediction_error(s, exp_id),
                failures=failures_frame(s, exp_id),
                db_url=self.url,
            )

    def report(self, experiment: str | None = None, out: str | Path = "report.html", force: bool = False) -> Path:
        """Write a self-contained HTML report of one experiment (tables with intervals, figures); its path. An
        existing file is replaced only with `force`."""
        from greenspec.report import write_report  # deferred: plotly

        return write_report(self, experiment, Path(out), force)

    def repredicted(self, experiment: str | None, table: str | int) -> pd.DataFrame:
        """The export table of `experiment`'s replayed generations re-predicted for the device of the stored cost
        table `table` (id or name), labelled `predicted_for`; the one call here that writes: the derived experiment
        `<experiment>@<table>` (`greenspec costs repredict`), reused while the replays are the same."""
        from greenspec.repredict import repredict

        done = repredict(self.url, experiment, str(table))
        with self.Session() as s:
            return export_frame(s, done.name, False, False)


def open_results(url: str = DEFAULT_URL) -> Results:
    """The results database at `url` (any SQLAlchemy URL), read-only; NoResults in one line if there is none."""
    Session = open_reader(url)
    if Session is None:
        raise NoResults(f"no greenspec results at {url} (run a spec first: `greenspec run SPEC`)")
    return Results(url, Session)


def run(spec: str | Path, db: str = DEFAULT_URL, address: str | None = None) -> RunReport:
    """Run a spec file as `greenspec run SPEC` does (resumable: finished cells are never run again)."""
    from orchestrator.run.driver import run_spec_file  # deferred: ray
    from orchestrator.run.options import RunOptions

    return run_spec_file(spec, RunOptions(db_url=db, address=address))

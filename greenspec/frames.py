"""`greenspec export`: the summary table as CSV, Parquet, Markdown or LaTeX, or one row per generation.

Numbers are the paper's per-prompt means by default (`--pooled`: ratios of sums); `storage.summary` defines them.
Every figure carries its 95% bootstrap interval over prompts (`<figure>_lo`, `<figure>_hi` columns in CSV and Parquet;
one `0.123 [0.101, 0.140]` cell in Markdown and LaTeX), every row its `measure`
(timed or replay), `n_prompts` and `version`. A row is *current* when the experiment's stored spec still makes it:
its strategy is in the spec and its prompts' reference keys are the ones the spec's verifier, prompts and
max_new_tokens give (`versions`); rows of an earlier version are left out unless asked for (`all_versions`).
"""

from __future__ import annotations

import math
import re
import sys

import pandas as pd

from analysis.columns import EXPORT_COLUMNS, INTERVAL_METRICS
from analysis.summary import summary_frame
from greenspec.outputs import write_failed
from orchestrator.run.summaries import versions
from storage.db import Session
from storage.queries import experiment_id, generations_export_frame
from workers.errors import GreenspecError


def _experiment(session: Session, experiment: str | None) -> int:
    exp_id = experiment_id(session, experiment)
    if exp_id is None:
        raise GreenspecError(f"no generations stored for experiment {experiment or '(newest)'}; run a sweep first")
    return exp_id


def _current_only(df: pd.DataFrame, all_versions: bool, experiment: str | None) -> pd.DataFrame:
    """The rows of the current version, or every row with `all_versions`; refuses an export left with none."""
    if df.empty:
        raise GreenspecError(f"no generations stored for experiment {experiment or '(newest)'}; run a sweep first")
    shown = df if all_versions else df[df["version"] == "current"].reset_index(drop=True)
    if shown.empty:
        raise GreenspecError(
            f"experiment {experiment or '(newest)'}: every stored generation is of an earlier version of its spec; "
            "pass --all-versions to export them"
        )
    return shown


def export_frame(
    session: Session, experiment: str | None, pooled: bool = False, all_versions: bool = False
) -> pd.DataFrame:
    """The summary (per-prompt means as the paper, or pooled sums) with the export's leading columns first: the
    current version's rows (`versions`), or every version's with `all_versions`."""
    exp_id = _experiment(session, experiment)
    df = summary_frame(session, experiment, pooled=pooled, versions=versions(session, exp_id))
    older, counted = int((df["version"] == "older").sum()), int(df["generations"].sum())
    df = _current_only(df, all_versions, experiment)
    rest = [c for c in df.columns if c not in EXPORT_COLUMNS]
    out = labelled(session, exp_id, df[EXPORT_COLUMNS + rest])
    out.attrs["hidden_rows"] = 0 if all_versions else older  # what `hidden_rows` counts, counted here
    out.attrs["counted"] = counted  # the generations every version's rows count (`storage.summary.superseded`)
    return out


def labelled(session: Session, exp_id: int, df: pd.DataFrame) -> pd.DataFrame:
    """An experiment re-predicted with another device's cost table (`greenspec costs repredict`) has every row say
    so: a `predicted_for` column after `measure` ("predicted for <table> (<device>, ...)"); others as they are."""
    from storage.cost_tables import prediction_label

    label = prediction_label(session, exp_id)
    if label is None:
        return df
    out = df.copy()
    out.insert(list(out.columns).index("measure") + 1 if "measure" in out else 0, "predicted_for", label)
    return out


def shown_columns(df: pd.DataFrame) -> list[str]:
    """The columns Markdown and LaTeX show: the export's, and `predicted_for` where the rows were re-predicted."""
    if "predicted_for" not in df:
        return EXPORT_COLUMNS
    at = EXPORT_COLUMNS.index("measure") + 1
    return [*EXPORT_COLUMNS[:at], "predicted_for", *EXPORT_COLUMNS[at:]]


def generations_export(session: Session, experiment: str | None, all_versions: bool = False) -> pd.DataFrame:
    """`greenspec export --generations`: one row per generation the summary counts, timed and replayed, from which
    every interval of the summary can be recomputed (`storage.queries.generations_export_frame`)."""
    exp_id = _experiment(session, experiment)
    df = generations_export_frame(session, exp_id, versions(session, exp_id))
    return labelled(session, exp_id, _current_only(df, all_versions, experiment))


def hidden_rows(session: Session, experiment: str | None) -> int:
    """How many summary rows of an earlier version of the spec a default export leaves out."""
    from storage.summary import older_cells

    exp_id = experiment_id(session, experiment)
    return 0 if exp_id is None else older_cells(session, exp_id, versions(session, exp_id))


def render(df: pd.DataFrame, fmt: str, shown: list[str] | None = None) -> str | bytes:
    """The table in `fmt`: csv and parquet (bytes) keep every column, markdown and latex the `shown` ones."""
    shown = EXPORT_COLUMNS if shown is None else shown
    if fmt == "csv":
        return df.to_csv(index=False)
    if fmt == "markdown":
        return with_intervals(df, shown).to_markdown(index=False, floatfmt=".3g")
    if fmt == "latex":
        return latex_table(with_intervals(df, shown))
    if fmt == "parquet":
        import io

        buf = io.BytesIO()
        df.to_parquet(buf, index=False)
        return buf.getvalue()
    raise GreenspecError(f"--format {fmt!r}: use csv, parquet, markdown or latex")


def _decimals(value: float) -> int:
    """Decimals that show `value` to three significant digits (none for 100 and above)."""
    if value == 0 or not math.isfinite(value):
        return 2
    return min(6, max(0, 2 - math.floor(math.log10(abs(value)))))


def interval_text(value, lo, hi) -> str | None:
    """A figure and its interval as one cell, bounds to the figure's decimals: "0.123 [0.101, 0.140]"; the figure
    alone where it has no interval, None (a blank) where it has no value."""
    if value is None or pd.isna(value):
        return None
    d = _decimals(float(value))
    text = f"{value:.{d}f}"
    if lo is None or hi is None or pd.isna(lo) or pd.isna(hi):
        return text
    return f"{text} [{lo:.{d}f}, {hi:.{d}f}]"


def with_intervals(df: pd.DataFrame, shown: list[str], figures=INTERVAL_METRICS) -> pd.DataFrame:
    """`df[shown]` with each of `figures` that has `_lo` / `_hi` columns written with its interval in one text cell."""
    out = df[shown].copy()
    for name in shown:
        lo, hi = f"{name}_lo", f"{name}_hi"
        if name in figures and lo in df and hi in df and lo not in shown:
            out[name] = [interval_text(v, a, b) for v, a, b in zip(df[name], df[lo], df[hi])]
    return out


# LaTeX's special characters in text (booktabs tables, T1 or OT1 fonts): each becomes a command that prints it.
LATEX_SPECIALS = {
    "\\": r"\textbackslash{}",
    "&": r"\&",
    "%": r"\%",
    "$": r"\$",
    "#": r"\#",
    "_": r"\_",
    "{": r"\{",
    "}": r"\}",
    "~": r"\textasciitilde{}",
    "^": r"\textasciicircum{}",
    "|": r"\textbar{}",
    "<": r"\textless{}",
    ">": r"\textgreater{}",
}
_LATEX_SPECIAL = re.compile("|".join(map(re.escape, LATEX_SPECIALS)))


def latex_escape(text: str) -> str:
    r"""`text` as LaTeX that prints it verbatim, e.g. latex_escape("tokens_per_s") == r"tokens\_per\_s"."""
    return _LATEX_SPECIAL.sub(lambda m: LATEX_SPECIALS[m.group()], text)


def latex_table(df: pd.DataFrame) -> str:
    """A booktabs tabular of `df`: every header and text cell escaped (numbers as %.3g, blanks as --), so that it
    compiles whatever the strategy and task names hold."""
    out = df.rename(columns=lambda c: latex_escape(str(c)))
    for col in out.columns:
        if not pd.api.types.is_numeric_dtype(out[col]) or pd.api.types.is_bool_dtype(out[col]):
            out[col] = out[col].map(lambda v: v if v is None or v is pd.NA or v != v else latex_escape(str(v)))
    return out.to_latex(index=False, float_format="%.3g", na_rep="--", escape=False)


def write_output(data: str | bytes, out: str) -> None:
    """Write a rendered table to `out` ("-" is stdout; parquet needs a file)."""
    if out == "-":
        if isinstance(data, bytes):
            raise GreenspecError("--format parquet needs --out FILE")
        sys.stdout.write(data if data.endswith("\n") else data + "\n")
        return
    try:
        with open(out, "wb" if isinstance(data, bytes) else "w") as fh:
            fh.write(data)
    except OSError as err:  # a full disk or device (/dev/full): one line
        raise write_failed(out, "--out", err) from err


def write_summary(
    session: Session,
    experiment: str | None,
    fmt: str,
    out: str,
    pooled: bool = False,
    all_versions: bool = False,
    generations: bool = False,
) -> dict | None:
    """Write the summary table, or with `generations` one row per generation, to `out` ("-" is stdout); for the
    summary what it counted: the rows of an earlier version it left out (`hidden_rows`) and the generations its rows
    count (`counted`); None for generations."""
    if generations and fmt == "csv":  # streamed, in bounded memory
        from greenspec.generations_out import write_generations_csv

        exp_id = _experiment(session, experiment)
        write_generations_csv(session, exp_id, out, versions(session, exp_id), all_versions, experiment)
        return None
    if generations:
        df = generations_export(session, experiment, all_versions)
        write_output(render(df, fmt, shown=list(df.columns)), out)
        return None
    df = export_frame(session, experiment, pooled, all_versions)
    write_output(render(df, fmt, shown_columns(df)), out)
    return {"hidden_rows": df.attrs["hidden_rows"], "counted": df.attrs["counted"]}


def write_validation(session: Session, experiment: str | None, fmt: str, out: str, timed_in: str | None = None) -> None:
    """Write the experiment's cost-model validation (`storage.validation.prediction_error`) to `out` ("-" is stdout); with
    `timed_in`, its replayed cells against the generations timed in that experiment."""
    from analysis.stored import prediction_error

    timed = None if timed_in is None else _experiment(session, timed_in)
    df = prediction_error(session, _experiment(session, experiment), timed)
    write_output(render(df, fmt, shown=list(df.columns)), out)


def compare_experiments(session: Session, a: str | None, b: str) -> pd.DataFrame:
    """Experiment `a` (the newest when None) and `b` side by side (`greenspec.compare`)."""
    from greenspec.compare import compare_frames

    left = export_frame(session, a)
    name_a = str(left["experiment"].iloc[0]) if len(left) else str(a)
    if name_a == b:
        raise GreenspecError(f"--compare {b}: that is the experiment itself; name another one (or --experiment)")
    return compare_frames(left, export_frame(session, b), name_a, b)


def write_comparison_of_experiments(session: Session, a: str | None, b: str, fmt: str, out: str) -> pd.DataFrame:
    """Write two experiments side by side to `out`: csv and parquet every column, markdown and latex the keys and
    each side's speedup, acceptance and tokens/s with its interval in one cell."""
    from greenspec.compare import shown_columns

    df = compare_experiments(session, a, b)
    if fmt in ("markdown", "latex"):
        shown = shown_columns(df)
        text = with_intervals(df, shown, figures=shown)
        write_output(text.to_markdown(index=False, floatfmt=".3g") if fmt == "markdown" else latex_table(text), out)
    else:
        write_output(render(df, fmt, list(df.columns)), out)
    return df

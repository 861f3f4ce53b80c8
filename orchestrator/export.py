"""`greenspec export`: the summary table as CSV, Parquet, Markdown or LaTeX.

Numbers are the paper's per-prompt means by default (`--pooled`: ratios of sums); `storage.summary` defines them.
"""

from __future__ import annotations

import re
import sys

import pandas as pd

from orchestrator.outputs import write_failed
from storage.db import Session
from storage.queries import summary_frame
from workers.errors import GreenspecError

EXPORT_COLUMNS = [
    "strategy",
    "task",
    "k",
    "regime",
    "prompts",
    "tokens_per_s",
    "speedup",
    "acceptance",
    "first_token_acceptance",
    "mal",
    "rouge_l",
    "exact_match",
    "j_per_100_tokens",
    "energy_ratio",
    "mean_power_w",
    "power_source",
]


def export_frame(session: Session, experiment: str | None, pooled: bool = False) -> pd.DataFrame:
    """The summary (per-prompt means as the paper, or pooled sums) with the export's leading columns first."""
    df = summary_frame(session, experiment, pooled=pooled)
    if df.empty:
        raise GreenspecError(f"no generations stored for experiment {experiment or '(newest)'}; run a sweep first")
    rest = [c for c in df.columns if c not in EXPORT_COLUMNS]
    return df[EXPORT_COLUMNS + rest]


def render(df: pd.DataFrame, fmt: str, shown: list[str] | None = None) -> str | bytes:
    """The table in `fmt`: csv and parquet (bytes) keep every column, markdown and latex the `shown` ones."""
    shown = EXPORT_COLUMNS if shown is None else shown
    if fmt == "csv":
        return df.to_csv(index=False)
    if fmt == "markdown":
        return df[shown].to_markdown(index=False, floatfmt=".3g")
    if fmt == "latex":
        return latex_table(df[shown])
    if fmt == "parquet":
        import io

        buf = io.BytesIO()
        df.to_parquet(buf, index=False)
        return buf.getvalue()
    raise GreenspecError(f"--format {fmt!r}: use csv, parquet, markdown or latex")


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


def write_summary(session: Session, experiment: str | None, fmt: str, out: str, pooled: bool = False) -> None:
    """Write the summary table to `out` ("-" is stdout)."""
    write_output(render(export_frame(session, experiment, pooled), fmt), out)

"""Pure table helpers: filter the summary, pivot it into the paper's tables, bold the best, export CSV/LaTeX.

No Streamlit here, so pages, the exporter and tests share one definition of every table.

Example:
    >>> spec = PAPER_TABLES["table1"]                      # tokens/s and speedup, uncached regime
    >>> table = paper_table(summary, spec.metrics, spec.regime)
    >>> latex = to_latex(table, spec.best, caption=spec.title)
"""

from __future__ import annotations

import html
import numbers
import os
from dataclasses import dataclass
from typing import Iterable, Sequence

import numpy as np
import pandas as pd

from analysis.columns import k_text
from storage.summary import PLAIN

REGIMES = ("uncached", "cached")
BOLD_CSS = "font-weight: bold"
NA = "–"  # not "-": the page renders cells as Markdown, where "-" starts a list
BOLD_LATEX = "textbf: --rwrap;"  # Styler.to_latex turns this into \textbf{...}


@dataclass(frozen=True)
class Metric:
    """One column of a paper table: the summary column, its header, its format, and which end is best."""

    column: str
    label: str
    fmt: str = "{:.2f}"
    best: str | None = "max"  # "max", "min" or None (no bold)
    scale: float = 1.0  # e.g. 100 for a percentage


@dataclass(frozen=True)
class TableSpec:
    """A paper table: which metrics, over which regime."""

    title: str
    metrics: tuple[Metric, ...]
    regime: str | None
    plain: bool = True  # whether the plain row belongs (not for acceptance: plain drafts nothing)


TOKENS_PER_S = Metric("tokens_per_s", "tok/s", "{:.1f}")
SPEEDUP = Metric("speedup", "speedup", "{:.2f}x")
J_PER_100 = Metric("j_per_100_tokens", "J/100 tok", "{:.2f}", "min")
ENERGY_RATIO = Metric("energy_ratio", "ratio vs plain", "{:.2f}x", "max")  # plain ÷ strategy, as the paper's Table 3
ACCEPTANCE = Metric("acceptance", "accept %", "{:.1f}", "max", 100.0)
FIRST_TOKEN = Metric("first_token_acceptance", "1st-token %", "{:.1f}", "max", 100.0)
MAL = Metric("mal", "MAL", "{:.2f}")
REPETITION = Metric("repetition", "repetition", "{:.3f}", None)
OVERLAP = Metric("overlap", "overlap", "{:.3f}", None)
GZIP = Metric("gzip_ratio", "gzip", "{:.3f}", None)

PAPER_TABLES = {
    "table1": TableSpec("Table 1: throughput and speedup over plain, uncached", (TOKENS_PER_S, SPEEDUP), "uncached"),
    "table2": TableSpec("Table 2: throughput and speedup over plain, cached", (TOKENS_PER_S, SPEEDUP), "cached"),
    "table3": TableSpec(
        "Table 3: energy per 100 tokens and ratio to plain, uncached", (J_PER_100, ENERGY_RATIO), "uncached"
    ),
    "table4": TableSpec(
        "Table 4: energy per 100 tokens and ratio to plain, cached", (J_PER_100, ENERGY_RATIO), "cached"
    ),
    "table5": TableSpec("Table 5: redundancy of the generated texts", (REPETITION, OVERLAP, GZIP), None),
    "table6": TableSpec(
        "Table 6: acceptance, first-token acceptance and mean accepted length, uncached",
        (ACCEPTANCE, FIRST_TOKEN, MAL),
        "uncached",
        plain=False,
    ),
    "table7": TableSpec(
        "Table 7: acceptance, first-token acceptance and mean accepted length, cached",
        (ACCEPTANCE, FIRST_TOKEN, MAL),
        "cached",
        plain=False,
    ),
}


def _kind(value) -> str:
    """What Arrow makes of a value: a flag, a number, text, or another type."""
    if isinstance(value, (bool, np.bool_)):
        return "flag"
    if isinstance(value, numbers.Number):
        return "number"
    return "text" if isinstance(value, str) else type(value).__name__


def k_column(values: pd.Series) -> pd.Series:
    """A k column of one type: integers as they are (nullable `Int64` where some rows have none, as a failed train
    cell's), else text (`analysis.columns.k_text`: "8", "" for any, "12|16|24" for a set), never a mix of the two."""
    if values.dtype.kind in "iu":
        return values
    present = values.dropna()
    if all(_kind(v) == "number" and float(v).is_integer() for v in present):
        return values.astype("Int64")
    return values.map(k_text).astype(object)


def one_type_per_column(df: pd.DataFrame) -> pd.DataFrame:
    """`df` as the dashboard shows it, one type per column so that Arrow serialises it as it is (where it did not,
    Streamlit logged "Could not convert '' with type str: tried to convert to int64"): k by `k_column`, and any other
    column that mixes kinds of values (numbers and text, say) as text, its blanks kept blank."""
    out = df.copy()
    for column in df.columns:
        values = df[column]
        if column == "k":
            out[column] = k_column(values)
        elif values.dtype == object and len({_kind(v) for v in values.dropna()}) > 1:
            out[column] = values.map(lambda v: v if v is None or v != v else str(v))
    return out


def filter_frame(
    df: pd.DataFrame,
    tasks: Iterable[str] = (),
    strategies: Iterable[str] = (),
    regimes: Iterable[str] = (),
    ks: Iterable[int] = (),
) -> pd.DataFrame:
    """Rows matching every non-empty selection; plain rows (k = 0) survive any k selection (they are the reference)."""
    mask = pd.Series(True, index=df.index)
    for column, chosen in (("task", tasks), ("strategy", strategies), ("regime", regimes)):
        chosen = list(chosen)
        if chosen and column in df:
            mask &= df[column].isin(chosen)
    ks = list(ks)
    if ks and "k" in df:
        keep_k = df["k"].isin(ks)
        if "draft" in df:
            keep_k |= df["draft"] == PLAIN
        mask &= keep_k
    return df[mask]


def one_measure(summary: pd.DataFrame) -> pd.DataFrame:
    """The current version's rows, one measure per strategy x task x k x regime: the replayed row where there is one
    (it covers every prompt; the timed one validates its prediction), else the timed one. A table cell is never a mean
    of a timed and a replayed figure."""
    df = summary[summary["version"] == "current"] if "version" in summary else summary
    if "measure" not in df or df["measure"].nunique() < 2:
        return df
    keys = [c for c in ("strategy", "task", "k", "regime", "temperature") if c in df]
    replayed = df[df["measure"] == "replay"].set_index(keys).index
    return df[(df["measure"] == "replay") | ~df.set_index(keys).index.isin(replayed)]


def paper_rows(frame: pd.DataFrame, key: str) -> pd.DataFrame:
    """The rows one of the paper's tables reads from a summary or export frame: plain greedy's (by its draft, whatever
    the strategy is named) only where the table shows it (`TableSpec.plain`)."""
    return frame if PAPER_TABLES[key].plain else frame[frame["draft"] != PLAIN]


def paper_table(summary: pd.DataFrame, metrics: Sequence[Metric], regime: str | None) -> pd.DataFrame:
    """Rows (strategy, k), columns (task, metric label); plain first, then strategies by name and k (`one_measure`)."""
    summary = one_measure(summary)
    df = summary if regime is None else summary[summary["regime"] == regime]
    if df.empty:
        return pd.DataFrame()
    parts = {
        m.label: df.pivot_table(index=["strategy", "k"], columns="task", values=m.column, aggfunc="mean", dropna=False)
        * m.scale
        for m in metrics
    }
    table = pd.concat(parts, axis=1).swaplevel(0, 1, axis=1)
    tasks = sorted(df["task"].unique())
    table = table.reindex(columns=pd.MultiIndex.from_product([tasks, [m.label for m in metrics]]))
    order = sorted(table.index, key=lambda sk: (sk[0] != PLAIN, sk[0], sk[1]))
    table = table.reindex(pd.MultiIndex.from_tuples(order, names=["strategy", "k"]))
    table.columns.names = ["task", None]
    return table.dropna(how="all")


def best_cells(table: pd.DataFrame, metrics: Sequence[Metric]) -> pd.DataFrame:
    """Boolean frame like `table`: True at the best value of each (task, metric) column that has a best."""
    by_label = {m.label: m for m in metrics}
    mask = pd.DataFrame(False, index=table.index, columns=table.columns)
    for col in table.columns:
        metric = by_label.get(col[-1] if isinstance(col, tuple) else col)
        values = pd.to_numeric(table[col], errors="coerce")
        if metric is None or metric.best is None or values.isna().all():
            continue
        target = values.max() if metric.best == "max" else values.min()
        mask[col] = values == target
    return mask


def styled(table: pd.DataFrame, metrics: Sequence[Metric], *, latex: bool = False):
    """A pandas Styler: formatted values, best per column in bold (CSS for the page, \\textbf for LaTeX).

    For the page (latex=False) the (task, metric) header is flattened to "task · metric" and the index becomes
    ordinary columns: one header row reads better than two in a narrow browser table.
    """
    by_label = {m.label: m for m in metrics}
    mask = best_cells(table, metrics)
    shown = table
    if not latex:
        flat = [" · ".join(map(str, c)) if isinstance(c, tuple) else str(c) for c in table.columns]
        shown = one_type_per_column(table.set_axis(flat, axis=1).reset_index())
        mask = mask.set_axis(flat, axis=1).reset_index(drop=True)
        mask = pd.concat(
            [pd.DataFrame(False, index=mask.index, columns=shown.columns[: table.index.nlevels]), mask], axis=1
        )
    labels = [c[-1] if isinstance(c, tuple) else c for c in table.columns]
    columns = list(shown.columns[-len(labels) :]) if labels else []
    formats = {col: by_label[label].fmt for col, label in zip(columns, labels) if label in by_label}
    props = BOLD_LATEX if latex else BOLD_CSS
    styler = shown.style.format(formats, na_rep=NA)
    if not latex:
        styler = styler.hide(axis="index")
    return styler.apply(lambda _: mask.replace({True: props, False: ""}).set_axis(shown.index), axis=None)


def to_csv(table: pd.DataFrame) -> str:
    """CSV text of a table, index included (numbers unformatted, for re-analysis)."""
    return table.to_csv()


def to_latex(table: pd.DataFrame, metrics: Sequence[Metric], caption: str = "", label: str = "") -> str:
    """A booktabs LaTeX table with the best per column in \\textbf, ready for the paper."""
    if table.empty:
        return ""
    styler = styled(table, metrics, latex=True)
    styler = styler.format_index(_latex_escape, axis=0).format_index(_latex_escape, axis=1)
    return styler.to_latex(
        caption=caption or None, label=label or None, hrules=True, multicol_align="c", position_float="centering"
    )


def _latex_escape(value) -> str:
    text = str(value)
    for char, repl in (("\\", r"\textbackslash{}"), ("&", r"\&"), ("%", r"\%"), ("_", r"\_"), ("#", r"\#")):
        text = text.replace(char, repl)
    return text


def break_even_frame(summary: pd.DataFrame) -> pd.DataFrame:
    """Per drafted strategy x task x k x regime: acceptance and first-token acceptance vs the break-even k/(k+1)."""
    df = summary[(summary["draft"] != PLAIN) & (summary["k"] > 0)]
    out = df[["strategy", "task", "k", "regime", "acceptance", "first_token_acceptance", "speedup"]].copy()
    out["break_even"] = out["k"] / (out["k"] + 1)
    out["margin"] = out["acceptance"] - out["break_even"]
    return out.reset_index(drop=True)


def segment_steps(
    tokens: Sequence[int], accepted_per_step: Sequence[int], tokens_per_step: Sequence[int] | None = None
) -> list[tuple[list[int], list[int]]]:
    """Split generated tokens into steps: (accepted draft tokens, verifier tokens) per round.

    With `tokens_per_step` (stored since schema 0002), round i holds that many tokens, the first
    `accepted_per_step[i]` from the draft: a cached round that accepts its drafts adds no verifier token.
    Without it, each round is taken as `a` draft tokens then one verifier token. The last round may be cut
    short by the token budget; tokens beyond the recorded rounds (or a plain run) become one-token steps.
    """
    steps: list[tuple[list[int], list[int]]] = []
    pos = 0
    sizes = tokens_per_step if tokens_per_step else [a + 1 for a in accepted_per_step]
    for accepted, size in zip(accepted_per_step, sizes):
        if pos >= len(tokens):
            break
        draft = list(tokens[pos : pos + accepted])
        verifier = list(tokens[pos + len(draft) : pos + size])
        pos += len(draft) + len(verifier)
        steps.append((draft, verifier))
    steps.extend(([], [t]) for t in tokens[pos:])
    return steps


def highlight_html(segments: Sequence[tuple[str, bool]]) -> str:
    """HTML of text segments, accepted draft segments highlighted (escaped; whitespace preserved)."""
    spans = []
    for text, accepted in segments:
        body = html.escape(text)
        if accepted:
            spans.append(f'<span class="gs-accepted" style="background:#c8f7c5;border-radius:3px">{body}</span>')
        else:
            spans.append(f"<span>{body}</span>")
    return '<div style="white-space:pre-wrap;line-height:1.7">' + "".join(spans) + "</div>"


def decode_segments(steps: Sequence[tuple[list[int], list[int]]], decode) -> list[tuple[str, bool]]:
    """Text per step part via prefix decoding (keeps SentencePiece word spaces right); `decode(ids) -> str`."""
    segments: list[tuple[str, bool]] = []
    ids: list[int] = []
    shown = ""
    for draft, verifier in steps:
        for part, accepted in ((draft, True), (verifier, False)):
            if not part:
                continue
            ids.extend(part)
            text = decode(ids)
            # a prefix decode can rewrite its tail (partial UTF-8); show whatever is new from the common prefix
            common = len(os.path.commonprefix([text, shown]))
            segments.append((text[common:], accepted))
            shown = text
    return segments


def ids_segments(steps: Sequence[tuple[list[int], list[int]]]) -> list[tuple[str, bool]]:
    """Token ids as text segments, for when no tokenizer can be loaded."""
    return [
        (" ".join(map(str, part)) + " ", accepted)
        for draft, verifier in steps
        for part, accepted in ((draft, True), (verifier, False))
        if part
    ]


def redundancy_by_source(texts: pd.DataFrame, references: pd.DataFrame, n: int = 4) -> pd.DataFrame:
    """Table 5's measures per text source (strategy or "reference") x task, one text per prompt.

    Texts repeat across k and regime (greedy outputs are equal), so each prompt counts once per source, else
    duplicates would inflate the cross-document overlap.
    """
    from workers.metrics import redundancy

    sources = [texts[["strategy", "task", "prompt_index", "text"]]]
    if not references.empty:
        sources.append(references[["task", "prompt_index", "text"]].assign(strategy="reference"))
    df = pd.concat(sources).drop_duplicates(["strategy", "task", "prompt_index"])
    rows = []
    for (source, task), group in df.groupby(["strategy", "task"]):
        size = group["text"].dropna().map(lambda t: len(t.encode("utf-8")))
        measures = redundancy(list(group["text"]), n=n)
        rows.append({"strategy": source, "task": task, **measures, "median_bytes": size.median()})
    columns = ["strategy", "task", "texts", "repetition", "overlap", "gzip_ratio", "median_bytes"]
    return pd.DataFrame(rows, columns=columns)


GZIP_MIN_BYTES = 200  # below this, gzip's fixed overhead outweighs what it can find to compress (see gzip_note)


def gzip_note(frame: pd.DataFrame) -> str | None:
    """A warning under Table 5 when its texts are too short for a gzip ratio to mean anything; None otherwise.

    gzip adds 18 bytes to any input (a 10-byte header, an 8-byte CRC and length trailer) plus its block header, and a
    short text gives its dictionary nothing earlier to point back to: on English text the ratio is ~1.3 at 50
    bytes, ~1.0 at 100 and ~0.75 at 200, so below ~200 bytes (about 40 tokens) it measures gzip, not the text.

    Example:
        >>> gzip_note(pd.DataFrame({"median_bytes": [75.0, 80.0]}))[:40]
        'The texts are short (median 78 bytes): g'
    """
    if frame.empty or "median_bytes" not in frame or frame["median_bytes"].isna().all():
        return None
    median = float(frame["median_bytes"].median())
    if median >= GZIP_MIN_BYTES:
        return None
    return (
        f"The texts are short (median {median:.0f} bytes): gzip ratios above or near 1 here say nothing about "
        f"redundancy. Below {GZIP_MIN_BYTES} bytes (about 40 tokens) gzip's fixed overhead (a 10-byte header, an "
        "8-byte trailer) outweighs what its dictionary can find in one text; generate longer texts "
        "(`max_new_tokens`) for a ratio that compares them."
    )


def redundancy_table(frame: pd.DataFrame, metrics: Sequence[Metric]) -> pd.DataFrame:
    """Rows text source (reference first), columns (task, metric label)."""
    if frame.empty:
        return pd.DataFrame()
    table = frame.pivot_table(
        index="strategy", columns="task", values=[m.column for m in metrics], aggfunc="mean", dropna=False
    )
    table = table.rename(columns={m.column: m.label for m in metrics}, level=0).swaplevel(0, 1, axis=1)
    tasks = sorted(frame["task"].unique())
    table = table.reindex(columns=pd.MultiIndex.from_product([tasks, [m.label for m in metrics]]))
    order = sorted(table.index, key=lambda s: (s != "reference", s != PLAIN, s))
    table = table.reindex(pd.Index(order, name="text source"))
    table.columns.names = ["task", None]
    return table

"""The findings of one experiment, as users read them: one frame (`analysis.findings`: every claim and target the
grid can answer with its verdict, those it cannot with the reason) behind every place a user looks:
`Results.findings`, `greenspec findings`, `greenspec demo`'s printout, the top of the HTML report and the dashboard's
Findings page; `read_findings` reads the one the run stored while it is current and computes it otherwise, and the
rest of this module writes it as Markdown, text and JSON.

Example:
    >>> with Session() as s:
    ...     frame = read_findings(s, "demo")
    >>> print(findings_markdown(frame))
"""

from __future__ import annotations

import json

import pandas as pd

from analysis import stats
from analysis.checks.families import DECISIVE
from analysis.checks.rules import ALPHA
from analysis.findings import (  # noqa: F401 (the frame's names, re-exported for the library's users)
    COLUMNS,
    FINDINGS,
    FUTURE,
    OUTPUT,
    PAPER,
    RULES,
    SECTIONS,
    TREES,
    computed_findings,
    model_errors,
    stored_findings,
    verdicts_frame,
)
from orchestrator.run.spec import parse_stored
from workers.errors import GreenspecError


def findings_frame(
    summary: pd.DataFrame,
    spec,
    prompts: pd.DataFrame | None = None,
    errors: pd.DataFrame | None = None,
    bounds=None,
) -> pd.DataFrame:
    """`analysis.findings.verdicts_frame` of an experiment's Spec or stored TOML (`parse_stored`)."""
    return verdicts_frame(summary, *parse_stored(spec), prompts, errors, bounds)


def _experiment(session, experiment: str | None) -> tuple[int, dict]:
    """(id, `experiment_info`) of a stored experiment (the newest when None); GreenspecError naming the known
    experiments when there is no such experiment."""
    from storage.queries import experiment_id, experiment_info, experiments_frame

    exp_id = experiment_id(session, experiment)
    if exp_id is None:
        names = ", ".join(experiments_frame(session)["name"]) or "none"
        raise GreenspecError(
            f"no experiment {experiment!r} (known: {names})" if experiment else "no experiment stored yet"
        )
    return exp_id, experiment_info(session, exp_id)


def read_findings(session, experiment: str | None = None, errors: pd.DataFrame | None = None) -> pd.DataFrame:
    """The findings frame of a stored experiment (the newest when None): the one its run stored while current
    (`analysis.findings.stored_findings`), else computed; GreenspecError naming the known experiments when there is
    no such experiment. `errors`: its `analysis.stored.prediction_error` where the caller has read it already (the
    report)."""
    exp_id, info = _experiment(session, experiment)
    toml = info.get("spec_toml") or ""
    frame = stored_findings(session, exp_id, toml)
    if frame is None:
        frame = computed_findings(session, exp_id, info["name"], *parse_stored(toml), errors)
    frame.attrs["experiment"] = info["name"]
    return frame


def tally(frame: pd.DataFrame) -> str:
    """ "14 verdicts: 6 holds, 2 does not hold, 1 tie, 5 inconclusive; 3 not testable here" (zeros left out)."""
    counts = frame["verdict"].value_counts()
    order = (stats.HOLDS, stats.FAILS, stats.TIE, stats.INCONCLUSIVE, stats.BY_CONSTRUCTION)
    judged = sum(int(counts.get(v, 0)) for v in order)
    parts = ", ".join(f"{int(counts[v])} {v}" for v in order if v in counts)
    gaps = int(counts.get(stats.NOT_TESTABLE, 0))
    return f"{judged} verdicts" + (f": {parts}" if parts else "") + (f"; {gaps} not testable here" if gaps else "")


def estimate_text(row) -> str:
    """ "0.123 [0.101, 0.140]" (the figure a verdict was read off and its 95% interval), "" without one."""
    v, lo, hi = row["estimate"], row["lo"], row["hi"]
    if v is None or v != v:
        return ""
    return f"{v:.3f} [{lo:.3f}, {hi:.3f}]" if lo == lo and hi == hi else f"{v:.3f} [no interval]"


def shown_rows(part: pd.DataFrame) -> pd.DataFrame:
    """The verdict rows as a table shows them: estimate with its interval in one cell, blanks for no value."""
    return pd.DataFrame(
        {
            "verdict": part["verdict"],
            "target": part["target"],
            "task": part["task"],
            "regime": part["regime"],
            "k": part["k"].map(lambda k: "" if pd.isna(k) else str(int(k))),
            "estimate [95%]": [estimate_text(r) for _, r in part.iterrows()],
            "prompts": part["prompts"].map(lambda n: "" if pd.isna(n) else str(int(n))),
            "family (correction)": [
                ", ".join(x for x in (f if f != t else "", c) if x)
                for f, t, c in zip(part["family"], part["target"], part["correction"])
            ],
            "why inconclusive": part["reason"],
            "numbers": part["detail"],
        }
    )


def families_lines(frame: pd.DataFrame) -> list[str]:
    """One line per family of more than one verdict: its size and what Holm's correction kept."""
    out = []
    judged = frame[frame["family_size"] > 1]
    for name, part in judged.groupby("family", sort=False):
        counts = part["verdict"].value_counts()
        kept = ", ".join(f"{int(counts[v])} {v}" for v in (*DECISIVE, stats.INCONCLUSIVE) if v in counts)
        demoted = int(part["reason"].str.contains("not after Holm").sum())
        out.append(
            f"- {name}: {int(part['family_size'].max())} verdicts, Holm at one-sided {ALPHA:.1%}; {kept}"
            + (f" ({demoted} decisive at 95% alone made inconclusive)" if demoted else "")
        )
    return out


def findings_markdown(frame: pd.DataFrame, numbers: bool = True) -> str:
    """The findings as text: a line of totals and the rules, then per section its verdicts as a Markdown table, the
    claims and targets it cannot answer with the reason, and its families (`numbers`: the detail column too)."""
    name = frame.attrs.get("experiment")
    out = [f"findings{f' of {name}' if name else ''}: {tally(frame)} ({RULES})"]
    for section in SECTIONS:
        part = frame[frame["section"] == section]
        if part.empty:
            continue
        judged, gaps = part[part["verdict"] != stats.NOT_TESTABLE], part[part["verdict"] == stats.NOT_TESTABLE]
        lines = [f"\n{section}"]
        if len(judged):
            shown = shown_rows(judged).apply(lambda col: col.astype(str).str.replace("|", "\\|", regex=False))
            lines.append((shown if numbers else shown.drop(columns="numbers")).to_markdown(index=False))
        lines += [f"- not testable here: {r.target}: {r.reason}" for r in gaps.itertuples()]
        if families := families_lines(judged):
            lines += ["families corrected for multiplicity:", *families]
        out.append("\n".join(lines))
    return "\n".join(out)


def findings_text(frame: pd.DataFrame, fmt: str) -> str:
    """The findings in `fmt`: markdown (`findings_markdown`), csv or json (one record per row, NaN as null)."""
    if fmt == "csv":
        return frame.to_csv(index=False)
    if fmt == "json":
        errors = {r: (None if e != e else e) for r, e in frame.attrs.get("model_error", {}).items()}
        records = json.loads(frame.to_json(orient="records"))
        head = {"experiment": frame.attrs.get("experiment"), "model_error": errors, "rules": RULES}
        return json.dumps({**head, "findings": records}, indent=1) + "\n"
    return findings_markdown(frame) + "\n"

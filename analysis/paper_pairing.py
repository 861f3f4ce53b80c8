"""The comparison with the seed paper for any run: the rule that pairs the run's task and strategy names with the paper's.

The rule: a task named as one of the paper's (wikitext, pubmed, eurlex) or as its domain (general, medical, legal)
is that task; a strategy named as one of the paper's (plain, olifant-wikitext, ...) is that strategy, and the
paper's baselines (4-gram, TinyLlama) are the run's strategies with their drafts (ngram, neural; the first such
strategy of the run's spec). A map file (TOML: `[tasks] shakespeare = "wikitext"`, `[strategies] olifant-legal =
"olifant-eurlex"`) pairs other names. Rows of the run whose task or strategy has no counterpart are compared with
nothing, and paper numbers no row of the run covers are left out; both are counted (`Pairing`, `Comparison`).

Example:
    >>> names = paper_names(summary, spec_toml, read_map("names.toml"))
    >>> result = compare_run(run, names)
    >>> result.matched_numbers, result.paper_numbers, result.left_out_rows
    (17, 71, 12)
"""

from __future__ import annotations

import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from analysis.columns import k_text
from workers.errors import GreenspecError


@dataclass(frozen=True)
class Names:
    """The run's names -> the paper's (as greenspec names them): strategies and tasks; the paper's table with the
    run's strategy names for its baselines."""

    strategies: dict[str, str] = field(default_factory=dict)
    tasks: dict[str, str] = field(default_factory=dict)
    paper: pd.DataFrame | None = None


@dataclass(frozen=True)
class Comparison:
    """The matched rows of a comparison, and what was left out."""

    table: pd.DataFrame  # one row per paper number x run row that covers it
    unmatched: pd.DataFrame  # the paper's numbers no row of the run covers (ours blank), same columns
    paper_numbers: int  # the paper's numbers
    matched_numbers: int  # of them, covered by some row of the run
    left_out_rows: int  # run rows whose task or strategy has no counterpart in the paper

    def describe(self) -> str:
        """One line for the CLI."""
        return (
            f"compare: {self.matched_numbers} of the paper's {self.paper_numbers} numbers matched "
            f"({len(self.table)} rows); {self.paper_numbers - self.matched_numbers} without a cell of this run and "
            f"{self.left_out_rows} rows of this run without a paper counterpart left out (pair names with --map FILE)"
        )


def read_map(path: str | Path) -> dict[str, dict[str, str]]:
    """A names file: `[tasks]` and `[strategies]` tables of run name = paper name; one-line errors."""
    try:
        raw = tomllib.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as err:
        raise GreenspecError(f"--map {path}: not a readable TOML file ({err})") from err
    for key, table in raw.items():
        if key not in ("tasks", "strategies"):
            raise GreenspecError(f"--map {path}: unknown table [{key}] (use [tasks] and [strategies])")
        if not isinstance(table, dict) or not all(isinstance(v, str) for v in table.values()):
            raise GreenspecError(f'--map {path}: [{key}] must map names to names (run name = "paper name")')
    return {"tasks": dict(raw.get("tasks", {})), "strategies": dict(raw.get("strategies", {}))}


def paper_names(run: pd.DataFrame, spec_toml: str, mapping: Mapping[str, Mapping[str, str]] | None = None) -> Names:
    """The module's rule over the run's task and strategy names, then `mapping` (a map file's tables) over it;
    a mapping to a name the paper does not have is refused in one line."""
    from analysis.paper import TASK_NAMES, load_results, strategy_names  # deferred: torch, via the draft registry

    paper = load_results(strategy_names(spec_toml) or None)
    have = {"tasks": set(TASK_NAMES.values()), "strategies": _names_in(paper["strategy"])}
    given = {"tasks": _present(run, "task"), "strategies": _present(run, "strategy")}
    out = {kind: {n: TASK_NAMES.get(n, n) for n in given[kind] if TASK_NAMES.get(n, n) in have[kind]} for kind in have}
    for kind, pairs in (mapping or {}).items():
        for mine, theirs in pairs.items():
            if theirs not in have[kind]:
                raise GreenspecError(
                    f"--map: {kind} {mine!r} = {theirs!r}: the paper has no such name ({', '.join(sorted(have[kind]))})"
                )
            out[kind][mine] = theirs
    return Names(out["strategies"], out["tasks"], paper)


def _names_in(column: pd.Series) -> set[str]:
    return {n for cell in column for n in str(cell).split("|") if n}


def _present(run: pd.DataFrame, column: str) -> set[str]:
    return set(run[column].dropna().astype(str)) if column in run else set()


def paired_rows(run: pd.DataFrame, names: Names) -> tuple[pd.DataFrame, int]:
    """The run's rows in the paper's names, those without a counterpart left out; (rows, how many left out). A row
    without a task (latency) or a strategy (redundancy) is paired on the name it has."""
    run = run.copy()
    keep = pd.Series(True, index=run.index)
    for column, table in (("strategy", names.strategies), ("task", names.tasks)):
        if column in run:
            given = run[column].notna()
            keep &= ~given | run[column].isin(list(table))
            run[column] = run[column].map(lambda v, t=table: t.get(v, v) if isinstance(v, str) else v)
    return run[keep].reset_index(drop=True), int((~keep).sum())


def compare_run(run: pd.DataFrame, names: Names) -> Comparison:
    """The paper's numbers beside the paired rows of the run: matched rows only, `k` as text (blank = any)."""
    from analysis.paper import compare  # deferred: torch, via the draft registry

    rows, left_out = paired_rows(run, names)
    table = compare(rows, paper=names.paper, keep_unmatched=True)
    table = table.assign(k=table["k"].map(k_text))
    found = table["ours"].notna()
    matched, unmatched = table[found].reset_index(drop=True), table[~found].reset_index(drop=True)
    return Comparison(matched, unmatched, len(names.paper), len(names.paper) - len(unmatched), left_out)

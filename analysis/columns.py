"""Every column of the two result tables declared once: the summary (`storage.summary`, one row per strategy x task
x k x regime x temperature x measure) and the comparison with the seed paper (`analysis.paper.compare`).

A column has its name, its header and number format on the dashboard (None: the name, the value as it is), whether
it carries a 95% interval over prompts (`<name>_lo`, `<name>_hi`), and the views that show it. Every list of
columns (the summary's, the export's, the dashboard's, the comparison's) is derived here, in the table's order.
Plain data only (no SQL), so the science's `analysis.paper` reads it too.

Views of the summary: `export` (the columns `greenspec export` puts first and its Markdown and LaTeX show) and
`overview` (the dashboard's results table; `overview_interval`: with the column's bounds beside it). Views of the
comparison: `text` (`export --compare paper` as Markdown or LaTeX) and `page` (the dashboard's Paper page).

Example:
    >>> EXPORT_COLUMNS[:4]
    ['strategy', 'task', 'k', 'regime']
    >>> INTERVAL_COLUMNS[:2]
    ['tokens_per_s_lo', 'tokens_per_s_hi']
"""

from __future__ import annotations

import math
from dataclasses import dataclass

BOUNDS = ("lo", "hi")


@dataclass(frozen=True)
class Column:
    """One column: its name, header and format on the dashboard, interval, and the views that show it."""

    name: str
    label: str | None = None  # the dashboard's header (None: the name)
    fmt: str | None = None  # the dashboard's number format, printf-style or "percent" (None: as it is)
    interval: bool = False  # a 95% bootstrap interval over prompts: <name>_lo, <name>_hi
    views: tuple[str, ...] = ()

    def bound(self, b: str) -> str:
        """The name of its interval's bound `b` ("lo" or "hi")."""
        return f"{self.name}_{b}"


EXPORT, OVERVIEW, OVERVIEW_INTERVAL = "export", "overview", "overview_interval"
TEXT, PAGE = "text", "page"
_KEY = (EXPORT, OVERVIEW)  # a summary cell's coordinates, shown everywhere

SUMMARY: tuple[Column, ...] = (
    Column("experiment"),
    Column("strategy", views=_KEY),
    Column("draft"),
    Column("task", views=_KEY),
    Column("k", views=_KEY),
    Column("regime", views=_KEY),
    Column("temperature"),
    Column("measure", views=_KEY),
    Column("version"),
    Column("prompts", views=_KEY),
    Column("n_prompts", views=(EXPORT,)),
    Column("generations"),
    Column("n_tokens"),
    Column("tokens_per_s", "tok/s", "%.1f", interval=True, views=_KEY),
    Column("speedup", "speedup", "%.2fx", interval=True, views=(*_KEY, OVERVIEW_INTERVAL)),
    Column("acceptance", "acceptance", "percent", interval=True, views=(*_KEY, OVERVIEW_INTERVAL)),
    Column("first_token_acceptance", "1st-token", "percent", interval=True, views=_KEY),
    Column("mal", "MAL", "%.2f", interval=True, views=_KEY),
    Column("mean_accepted_tokens"),
    Column("rouge_l", "ROUGE-L", "%.3f", views=_KEY),
    Column("exact_match", views=(EXPORT,)),
    Column("energy_j"),
    Column("j_per_100_tokens", "J/100 tok", "%.1f", interval=True, views=_KEY),
    Column("tokens_per_j"),
    Column("energy_ratio", "energy ratio", "%.2fx", interval=True, views=(*_KEY, OVERVIEW_INTERVAL)),
    Column("mean_power_w", views=(EXPORT,)),
    Column("power_source", "power", views=_KEY),
    Column("power_measured"),
    Column("wall_s"),
    Column("draft_share"),
    Column("aggregation"),
    Column("note", views=(OVERVIEW,)),  # last, after every interval bound
)

_NUMBER = "%.4g"
COMPARISON: tuple[Column, ...] = (
    Column("source", views=(TEXT, PAGE)),
    Column("section"),
    Column("metric", views=(TEXT, PAGE)),
    Column("strategy", views=(TEXT, PAGE)),
    Column("task", views=(TEXT, PAGE)),
    Column("k", views=(TEXT, PAGE)),
    Column("regime", views=(TEXT, PAGE)),
    Column("paper", fmt=_NUMBER, views=(TEXT, PAGE)),
    Column("paper_max", fmt=_NUMBER, views=(TEXT, PAGE)),
    Column("ours", fmt=_NUMBER, views=(TEXT, PAGE)),
    Column("diff", fmt=_NUMBER, views=(TEXT, PAGE)),
    Column("rel_diff", fmt=_NUMBER, views=(TEXT, PAGE)),
    Column("in_range", views=(TEXT, PAGE)),
    Column("unit"),
    Column("quote", views=(PAGE,)),
    Column("note", views=(PAGE,)),
)


def names(columns: tuple[Column, ...], view: str | None = None) -> list[str]:
    """The names of `columns` in `view` (every column without one), in the table's order."""
    return [c.name for c in columns if view is None or view in c.views]


def by_name(columns: tuple[Column, ...]) -> dict[str, Column]:
    """The columns by name."""
    return {c.name: c for c in columns}


INTERVAL_METRICS = tuple(c.name for c in SUMMARY if c.interval)
INTERVAL_COLUMNS = [c.bound(b) for c in SUMMARY if c.interval for b in BOUNDS]
# the summary: its columns in order, every interval bound before the closing note
SUMMARY_COLUMNS = [*names(SUMMARY)[:-1], *INTERVAL_COLUMNS, SUMMARY[-1].name]
EXPORT_COLUMNS = names(SUMMARY, EXPORT)
# the dashboard's results: each column, then its bounds where the overview shows them
OVERVIEW_COLUMNS = [
    name
    for c in SUMMARY
    if OVERVIEW in c.views
    for name in (c.name, *(c.bound(b) for b in BOUNDS if OVERVIEW_INTERVAL in c.views))
]
COMPARE_COLUMNS = names(COMPARISON)
COMPARE_TEXT_COLUMNS = names(COMPARISON, TEXT)
COMPARE_PAGE_COLUMNS = names(COMPARISON, PAGE)


def k_text(value) -> str:
    """A k cell as text, one type for the column wherever it is shown: "" (any, or none), "8", or a set such as
    "12|16|24"."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return ""
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)

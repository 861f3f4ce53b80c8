"""Paper: this run's numbers beside the seed paper's (Tables 1-7, Figures 1-2, §2.3 latency), cell by cell."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from analysis import stored
from analysis.columns import COMPARE_PAGE_COLUMNS, COMPARISON
from analysis.paper import TASK_NAMES, load_results, run_frame
from analysis.paper_pairing import compare_run, paper_names
from dashboard import reads, ui
from dashboard.app import page_filters
from storage.browse import spec_toml
from storage.latency import latency_frame

SECTIONS = [  # (title, metrics, key)
    ("Throughput and speedup (Tables 1 and 2, Figure 1)", ("tokens_per_s", "speedup"), "paper_speed"),
    ("Acceptance and mean accepted length (Tables 6 and 7)", ("acceptance", "mal"), "paper_acceptance"),
    (
        "Energy (Tables 3 and 4, Figure 2)",
        ("j_per_100_tokens", "energy_ratio", "tokens_per_j", "mean_power_w"),
        "paper_energy",
    ),
    ("Output quality (ROUGE-L against plain greedy)", ("rouge_l",), "paper_quality"),
    (
        "Redundancy of the texts (Table 5, on the verifier's tokens)",
        ("within_text", "cross_doc", "gzip_ratio"),
        "paper_redundancy",
    ),
    ("Draft latency (§2.3, `greenspec latency SPEC`)", ("latency_ms",), "paper_latency"),
]
COLUMNS = COMPARE_PAGE_COLUMNS  # analysis.columns: the comparison's columns this page shows
NONE = "(none)"


@st.cache_data(ttl=reads.LIVE_TTL_S, show_spinner=False)
def latency(url: str, experiment: str) -> pd.DataFrame:
    """Draft latencies stored by `greenspec latency` for this experiment (written outside a run: re-read often)."""
    with reads._session(url) as s:
        return latency_frame(s, experiment)


@st.cache_data(max_entries=reads.ENTRIES, show_spinner=False)
def redundancy(url: str, exp_id: int, data: tuple) -> pd.DataFrame:
    """Table 5 per task over the greedy references (the texts every strategy produced), once per data version: the
    one the run stored, else computed."""
    with reads._session(url) as s:
        return stored.frame(s, exp_id, stored.REFERENCES_TABLE5)


@st.cache_data(max_entries=reads.ENTRIES, show_spinner=False)
def spec_text(url: str, exp_id: int) -> str:
    """The experiment's stored spec (its strategies' drafts pair the paper's baselines with the run's names)."""
    with reads._session(url) as s:
        return spec_toml(s, exp_id)


def name_maps(summary: pd.DataFrame, paired: tuple[dict[str, str], dict[str, str]]) -> dict[str, dict[str, str]]:
    """Let the user pair the run's tasks and strategies that the rule (`analysis.paper_pairing`) left unpaired with the
    paper's (default: none); a map file's tables."""
    paper_tasks = list(TASK_NAMES.values())
    paper_strategies = sorted({s for s in load_results()["strategy"] if s and "|" not in s})
    tasks = sorted(t for t in summary["task"].dropna().unique() if t not in paired[1])
    strategies = sorted(s for s in summary["strategy"].dropna().unique() if s not in paired[0])
    if not tasks and not strategies:
        return {}
    with st.expander("Pair this run's names with the paper's", expanded=False):
        st.caption(
            "The paper's tasks are wikitext (general), pubmed (medical) and eurlex (legal). A task or strategy "
            "left at (none) is compared with nothing."
        )
        cols = st.columns(2)
        task_map = {t: cols[0].selectbox(f"task {t}", [NONE, *paper_tasks], key=f"paper_task_{t}") for t in tasks}
        strat_map = {
            s: cols[1].selectbox(f"strategy {s}", [NONE, *paper_strategies], key=f"paper_strategy_{s}")
            for s in strategies
        }
    return {
        "strategies": {k: v for k, v in strat_map.items() if v != NONE},
        "tasks": {k: v for k, v in task_map.items() if v != NONE},
    }


def section(table: pd.DataFrame, title: str, metrics: tuple[str, ...], key: str) -> None:
    """One block of the comparison: the paper's numbers of these metrics beside the run's, matched rows first."""
    rows = table[table["metric"].isin(metrics)]
    rows = rows.iloc[rows["ours"].isna().argsort(kind="stable")]
    numbers = ui.column_formats(COMPARISON, COLUMNS)
    ui.frame_block(
        rows[COLUMNS],
        title,
        key,
        empty="This run has no cell the paper reports here.",
        column_config={"quote": st.column_config.TextColumn(width="large"), **numbers},
    )


f = page_filters()
st.caption(
    "The seed paper's published numbers beside this run's, cell by cell: `diff` = ours - paper (for a range, to its "
    "nearest bound; `in_range` says whether ours falls inside), `rel_diff` relative to it. The paper's numbers are "
    "those its text states (Mistral-7B verifier, TinyLlama draft, Apple M1 Max, 100 prompts per cell): on a GPU run "
    "of `examples/paper.toml` this page is the reproduction report; on the demo (small models trained here, other "
    "texts, this CPU) it shows the **shape** (which draft wins where, how speedup moves with k and regime), "
    "**not the values**. Energy ratio is plain / strategy, as the paper's Tables 3 and 4."
)
summary = reads.summary(f.url, f.exp_id, f.version, f.pooled)
run = run_frame(summary, latency(f.url, f.experiment), redundancy(f.url, f.exp_id, f.version))
spec = spec_text(f.url, f.exp_id)
rule = paper_names(run, spec)
result = compare_run(run, paper_names(run, spec, name_maps(summary, (rule.strategies, rule.tasks))))
only_ours = st.toggle("Only the cells this run has", value=False, key="paper_only_ours")
shown = [result.table] + ([] if only_ours or result.unmatched.empty else [result.unmatched])
table = f.apply(pd.concat(shown, ignore_index=True))  # matched rows first, then the paper's numbers without a cell
st.metric("paper numbers matched by this run", f"{result.matched_numbers} of {result.paper_numbers}")
if result.left_out_rows:
    st.caption(
        f"{result.left_out_rows} rows of this run have a task or strategy the paper does not name: pair them above "
        "to compare them (`greenspec export --compare paper --map FILE` on the command line)."
    )
for title, metrics, key in SECTIONS:
    section(table, title, metrics, key)

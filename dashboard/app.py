"""Streamlit entry: `streamlit run dashboard/app.py` (or `greenspec dashboard`), reading `$GREENSPEC_DB`.

Pages import `page_filters` from here; this module imports `ui`, never the other way round. The pages live in
`views/`, not `pages/`: a `pages/` folder beside the entry makes Streamlit draw its own navigation from the file names
("app, acceptance, costs, ...") on a fresh server's first run, before `st.navigation` draws the titled one.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:  # `streamlit run` puts only dashboard/ on the path
    sys.path.insert(0, str(ROOT))

import streamlit as st  # noqa: E402

from dashboard import reads, ui  # noqa: E402

PAGES_DIR = Path(__file__).parent / "views"

# (file in views/, title, icon): one line adds a page; the first is the default.
PAGES = [
    ("overview.py", "Overview", ":material/dashboard:"),
    ("findings.py", "Findings", ":material/fact_check:"),
    ("throughput.py", "Throughput", ":material/speed:"),
    ("acceptance.py", "Acceptance", ":material/check_circle:"),
    ("energy.py", "Energy", ":material/bolt:"),
    ("texts.py", "Texts", ":material/article:"),
    ("paper.py", "Paper", ":material/compare:"),
    ("compare.py", "Compare", ":material/compare_arrows:"),
    ("costs.py", "Cost model", ":material/show_chart:"),
]


def main() -> None:
    """Pick the pages: the start page while the database holds nothing, the result pages otherwise."""
    st.set_page_config(page_title="greenspec", page_icon=":seedling:", layout="wide")
    url = reads.db_url()
    state = reads.db_state(url)
    if state != "ready":
        unusable = state == "no_schema" and reads.db_problem(url) is not None  # not SQLite, or another program's
        start = ui.problem_page if unusable else ui.start_page
        st.navigation([st.Page(start, title="Start", icon=":material/play_arrow:")]).run()
        return
    page = st.navigation(
        [
            st.Page(PAGES_DIR / name, title=title, icon=icon, default=i == 0)
            for i, (name, title, icon) in enumerate(PAGES)
        ]
    )
    st.title(page.title)  # the title and a note paint at once, before any read (before, an empty frame for 20 s)
    note = st.empty()
    note.caption("Reading the database…")
    f = ui.sidebar_filters(url)
    note.caption(ui.reading_note(f))
    started = time.perf_counter()
    try:
        page.run()
    finally:
        ui.forget_filters()  # a page that finds none knows the entrypoint did not run this time
    note.caption(ui.read_note(f, time.perf_counter() - started))


def page_filters() -> ui.Filters:
    """The filters the entrypoint drew in this run.

    A page always runs through the entrypoint (`st.navigation`), which draws them first. Should a page script be run
    on its own (`streamlit run dashboard/views/overview.py`), none exist: run the entrypoint, which renders the
    requested page properly, and stop this run.
    """
    found = ui.remembered_filters()
    if found is not None:
        return found
    main()
    st.stop()


if __name__ == "__main__":  # streamlit runs the entry as __main__; a page run alone calls main() itself
    main()

"""Streamlit entry: `streamlit run dashboard/app.py` (or `greenspec dashboard`), reading `$GREENSPEC_DB`.

Pages import `page_filters` from here; this module imports `ui`, never the other way round.
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:  # `streamlit run` puts only dashboard/ on the path
    sys.path.insert(0, str(ROOT))

import streamlit as st  # noqa: E402

from dashboard import reads, ui  # noqa: E402

PAGES_DIR = Path(__file__).parent / "pages"

# (file in pages/, title, icon): one line adds a page; the first is the default.
PAGES = [
    ("overview.py", "Overview", ":material/dashboard:"),
    ("throughput.py", "Throughput", ":material/speed:"),
    ("acceptance.py", "Acceptance", ":material/check_circle:"),
    ("energy.py", "Energy", ":material/bolt:"),
    ("texts.py", "Texts", ":material/article:"),
    ("paper.py", "Paper", ":material/compare:"),
    ("costs.py", "Cost model", ":material/show_chart:"),
]


def main() -> None:
    """Pick the pages: the start page while the database holds nothing, the result pages otherwise."""
    st.set_page_config(page_title="greenspec", page_icon=":seedling:", layout="wide")
    url = reads.db_url()
    if reads.db_state(url) != "ready":
        st.navigation([st.Page(ui.start_page, title="Start", icon=":material/play_arrow:")]).run()
        return
    page = st.navigation(
        [
            st.Page(PAGES_DIR / name, title=title, icon=icon, default=i == 0)
            for i, (name, title, icon) in enumerate(PAGES)
        ]
    )
    ui.sidebar_filters(url)
    try:
        page.run()
    finally:
        ui.forget_filters()  # a page that finds none knows the entrypoint did not run this time


def page_filters() -> ui.Filters:
    """The filters the entrypoint drew in this run.

    Where a `pages/` folder sits beside the entry, Streamlit runs a requested page on its own until the first
    `st.navigation` call of the process (a page opened by URL on a fresh server; every AppTest run). Then no
    filters exist yet in this run: run the entrypoint, which renders this page properly, and stop this run.
    """
    found = ui.remembered_filters()
    if found is not None:
        return found
    main()
    st.stop()


if __name__ == "__main__":  # streamlit runs the entry as __main__; a page run alone calls main() itself
    main()

"""Streamlit entry: `streamlit run dashboard/app.py` (or `greenspec dashboard`), reading `$GREENSPEC_DB`."""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:  # `streamlit run` puts only dashboard/ on the path
    sys.path.insert(0, str(ROOT))

import streamlit as st  # noqa: E402

from dashboard import queries, ui  # noqa: E402

PAGES = Path(__file__).parent / "pages"


def main() -> None:
    """Pick the pages: the start page while the database holds nothing, the five result pages otherwise."""
    st.set_page_config(page_title="greenspec", page_icon=":seedling:", layout="wide")
    url = queries.db_url()
    if queries.db_state(url) != "ready":
        st.navigation([st.Page(ui.start_page, title="Start", icon=":material/play_arrow:")]).run()
        return
    page = st.navigation([
        st.Page(PAGES / "overview.py", title="Overview", icon=":material/dashboard:", default=True),
        st.Page(PAGES / "throughput.py", title="Throughput", icon=":material/speed:"),
        st.Page(PAGES / "acceptance.py", title="Acceptance", icon=":material/check_circle:"),
        st.Page(PAGES / "energy.py", title="Energy", icon=":material/bolt:"),
        st.Page(PAGES / "texts.py", title="Texts", icon=":material/article:"),
        st.Page(PAGES / "paper.py", title="Paper", icon=":material/compare:"),
    ])
    ui.sidebar_filters(url)
    try:
        page.run()
    finally:
        ui.forget_filters()  # a page that finds none knows the entrypoint did not run this time


if __name__ == "__main__":  # streamlit runs the entry as __main__; a page run alone calls main() itself
    main()

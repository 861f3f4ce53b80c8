"""The dashboard's server process (`python -m dashboard.serve run dashboard/app.py ...`, what `greenspec dashboard`
starts): it imports what every page runs on (pandas, SQLAlchemy, plotly, the summary and its bootstrap) and then runs
Streamlit's own command line in this process. Streamlit imports a page's modules on the first view, so without this
a fresh server's first view waited for them: about 2 s on an idle 2-core machine, 8 s on busy cores."""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))


def preload() -> None:
    """Import what the pages compute with, once, before the server takes a view: everything below `dashboard.reads`
    and `dashboard.ui` (those two declare Streamlit caches, which belong to the server's runtime, so the first view
    imports them: a few milliseconds once their imports are here)."""
    import plotly.express  # noqa: F401
    import plotly.graph_objects  # noqa: F401

    import analysis.paper  # noqa: F401
    import analysis.paper_pairing  # noqa: F401
    import analysis.tables  # noqa: F401
    import dashboard.charts  # noqa: F401
    import dashboard.tokens  # noqa: F401
    import storage.browse  # noqa: F401
    import storage.summary  # noqa: F401
    import storage.validation  # noqa: F401


def main() -> int:
    from streamlit.web import cli

    preload()
    return cli.main(prog_name="streamlit")


if __name__ == "__main__":
    sys.exit(main())

"""The dashboard's layering: no SQL of its own (storage/ holds it), and no import cycle between the entry and ui."""

from __future__ import annotations

import ast
from pathlib import Path

DASHBOARD = Path(__file__).resolve().parents[2] / "dashboard"


def _imports(path: Path) -> set[str]:
    """Every module name a file imports (at any depth, lazy imports included)."""
    names = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module:
            names |= {node.module} | {f"{node.module}.{a.name}" for a in node.names}
    return names


def test_no_sqlalchemy_in_the_dashboard():
    files = sorted(DASHBOARD.rglob("*.py"))
    assert len(files) >= 10
    offenders = [f.name for f in files if any(n.split(".")[0] == "sqlalchemy" for n in _imports(f))]
    assert offenders == []


def test_only_pages_import_the_entry():
    for path in DASHBOARD.glob("*.py"):
        assert "dashboard.app" not in _imports(path), path.name  # ui, reads, charts... never import app.py
    assert "dashboard.ui" in _imports(DASHBOARD / "app.py")

"""The layout's rules, checked on the source: which package may import what, no cycles, no draft names outside drafts."""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("orchestrator", "workers", "storage", "dashboard")
# the driver's side (its entry points, Ray's start-up, the loop, the accelerator worker's handle) and the worker
# adapters (the CPU trainer, the accelerator, artifact copies between nodes)
RAY_MODULES = {
    "orchestrator.run.driver",
    "orchestrator.run.ray_startup",
    "orchestrator.run.dispatcher",
    "orchestrator.run.accelerator_actor",
    "workers.training.ray_tasks",
    "workers.accelerator",
}


def modules(packages: tuple[str, ...] = PACKAGES) -> dict[str, Path]:
    out = {}
    for pkg in packages:
        for path in (ROOT / pkg).rglob("*.py"):
            if "migrations" in path.parts:
                continue
            name = ".".join(path.relative_to(ROOT).with_suffix("").parts)
            out[name.removesuffix(".__init__")] = path
    return out


def imports(path: Path, top_level_only: bool = False) -> set[str]:
    """Modules imported by `path` (every import, or only those run at import time)."""
    tree = ast.parse(path.read_text())
    nodes = tree.body if top_level_only else list(ast.walk(tree))
    out = set()
    for node in nodes:
        if isinstance(node, ast.If) and top_level_only:  # `if TYPE_CHECKING:` imports do not run
            continue
        if isinstance(node, ast.Import):
            out.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            out.add(node.module)
            out.update(f"{node.module}.{a.name}" for a in node.names)
    return out


def test_sqlalchemy_only_in_storage():
    bad = [
        m
        for m, p in modules().items()
        if not m.startswith("storage") and any(i.split(".")[0] == "sqlalchemy" for i in imports(p))
    ]
    assert bad == []


def test_ray_only_in_the_driver_modules_and_the_two_worker_adapters():
    bad = [
        m for m, p in modules().items() if m not in RAY_MODULES and any(i.split(".")[0] == "ray" for i in imports(p))
    ]
    assert bad == []


def test_streamlit_only_in_the_dashboard():
    bad = [
        m
        for m, p in modules().items()
        if not m.startswith("dashboard") and any(i.split(".")[0] == "streamlit" for i in imports(p))
    ]
    assert bad == []


def test_no_draft_name_but_plain_compared_outside_the_drafts():
    from workers.drafts import names

    others = "|".join(re.escape(n) for n in names() if n != "plain")
    pattern = re.compile(rf"""(==|!=|\bin\b|case)\s*[\(\[\{{]?\s*["']({others})["']""")
    bad = [
        f"{m}: {line.strip()}"
        for m, p in modules((*PACKAGES, "bench")).items()
        if not m.startswith("workers.drafts")
        for line in p.read_text().splitlines()
        if pattern.search(line)
    ]
    assert bad == []


def test_no_import_cycles_at_import_time():
    mods = modules()
    graph = {m: {i for i in imports(p, top_level_only=True) if i in mods and i != m} for m, p in mods.items()}
    seen, stack, cycles = set(), [], []

    def visit(m):
        if m in stack:
            cycles.append(stack[stack.index(m) :] + [m])
            return
        if m in seen:
            return
        seen.add(m)
        stack.append(m)
        for n in graph[m]:
            visit(n)
        stack.pop()

    for m in graph:
        visit(m)
    assert cycles == []

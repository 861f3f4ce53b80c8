"""The layout's rules, checked on the source: which package may import what, no import cycles (imports inside functions
counted), no file over 400 lines, no function over 60 lines or 8 parameters without a reason on its header, no module
state without a way to clear it, no draft names outside drafts."""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("greenspec", "orchestrator", "workers", "storage", "analysis", "dashboard")
# the driver's side (its entry points, Ray's start-up, the loop, the accelerator worker's handle, the replay task it
# submits) and the worker adapters (the CPU trainer and artifact copies between nodes, the replay task, the accelerator)
RAY_MODULES = {
    "orchestrator.run.driver",
    "orchestrator.run.ray_startup",
    "orchestrator.run.dispatcher",
    "orchestrator.run.accelerator_actor",
    "orchestrator.run.replay_rows",
    "workers.training.ray_tasks",
    "workers.replay.task",
    "workers.accelerator.actor",
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


def _type_checking(node: ast.AST) -> bool:
    return isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test)


def _walk(nodes: list[ast.AST]):
    """Every node under `nodes` but those in `if TYPE_CHECKING:` blocks (imports for annotations, never run)."""
    for node in nodes:
        if _type_checking(node):
            continue
        yield node
        yield from _walk(list(ast.iter_child_nodes(node)))


def imports(path: Path, top_level_only: bool = False) -> set[str]:
    """Modules imported by `path` (every import, or only those run at import time); never `if TYPE_CHECKING:` ones."""
    tree = ast.parse(path.read_text())
    nodes = tree.body if top_level_only else list(_walk(tree.body))
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


# --- the house's rules: sizes, cycles counting imports inside functions, module state --------------------------------

MAX_FILE_LINES = 400
MAX_FUNCTION_LINES = 60
MAX_PARAMETERS = 8
# import cycles that stay, each with its reason (a frozenset of the modules on the cycle)
ALLOWED_CYCLES: dict[frozenset[str], str] = {}
# files over MAX_FILE_LINES that stay, each with its reason
LONG_FILES: dict[str, str] = {}
MUTATORS = {"append", "add", "update", "setdefault", "extend", "insert", "pop", "popitem", "remove", "discard", "clear"}


def all_cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan), each sorted."""
    index, low, on, stack, out, counter = {}, {}, set(), [], [], [0]

    def strong(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in graph[v]:
            if w not in index:
                strong(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            strong(v)
    return out


def test_no_import_cycles_counting_imports_inside_functions():
    """An import inside a function hides a cycle from the import-time check above; this one counts every import."""
    mods = modules()
    graph = {m: {i for i in imports(p) if i in mods and i != m} for m, p in mods.items()}
    cycles = [c for c in all_cycles(graph) if frozenset(c) not in ALLOWED_CYCLES]
    assert cycles == []


# The layers, lowest first (docs/architecture.md): a module may import its own layer and those below it, never one
# above, counting imports inside functions. `orchestrator` holds two: its engine (the spec, its cells, the Ray driver
# that `greenspec.run` calls) below the library, and its commands, a shell over everything, at the top.
LAYERS = (
    "workers",  # the science: corpora, IGTree, drafts, the verifier, decoding, replay, metrics, power
    "storage",  # SQL: models, engine, migrations, queries
    "analysis",  # what the rows say: summaries, intervals, model error, verdicts, curves, the paper's tables
    "orchestrator.run",  # the engine: the spec, its cells, the scheduler and the Ray driver
    "greenspec",  # the library: results as frames, findings, the report, compare, re-predict, `run`
    "dashboard",  # a shell: the Streamlit app, read-only
    "orchestrator.cli",  # a shell: the `greenspec` commands (parse, call the library, print)
)


def layer(module: str) -> int:
    """The index in LAYERS of the longest layer name that is `module` or a package above it."""
    found = [(len(name), i) for i, name in enumerate(LAYERS) if module == name or module.startswith(name + ".")]
    assert found, f"{module} is in no layer: add its package to LAYERS"
    return max(found)[1]


def test_every_import_points_down_the_layers():
    mods = modules()
    up = [
        f"{m} ({LAYERS[layer(m)]}) imports {i} ({LAYERS[layer(i)]})"
        for m, p in sorted(mods.items())
        if m != "orchestrator"  # the bare package's __init__: empty (a test below keeps it so)
        for i in sorted(imports(p))
        if i in mods and layer(i) > layer(m)
    ]
    assert up == []


def test_the_orchestrator_package_itself_imports_nothing():
    """`orchestrator/__init__.py` belongs to neither of its two layers, so it must not import either."""
    assert not {i for i in imports(modules()["orchestrator"]) if i.split(".")[0] in PACKAGES}


def test_no_cycle_between_subpackages():
    """Counting imports inside functions, no two rooms (a package's subpackages and flat modules: `workers.decoding`,
    `workers.drafts`, `workers.accelerator.runner`, `storage.queries`, ...) import each other, directly or around a loop."""
    mods = modules()
    room = {m: ".".join(m.split(".")[:2]) for m in mods}
    graph: dict[str, set[str]] = {r: set() for r in room.values()}
    for m, p in mods.items():
        graph[room[m]] |= {room[i] for i in imports(p) if i in mods and room[i] != room[m]}
    assert all_cycles(graph) == []


def test_no_file_over_400_lines():
    long = {
        m: n
        for m, p in modules((*PACKAGES, "bench")).items()
        if (n := len(p.read_text().splitlines())) > MAX_FILE_LINES and m not in LONG_FILES
    }
    assert long == {}


def header_comments(lines: list[str], fn: ast.FunctionDef | ast.AsyncFunctionDef) -> str:
    """The comments on a function's header: the line above its decorators, its def lines up to the body."""
    first = min([fn.lineno, *(d.lineno for d in fn.decorator_list)])
    return " ".join(ln.partition("#")[2] for ln in lines[max(first - 2, 0) : fn.body[0].lineno - 1] if "#" in ln)


def parameters(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> int:
    a = fn.args
    names = [x.arg for x in (*a.posonlyargs, *a.args, *a.kwonlyargs)]
    return len([n for n in names if n not in ("self", "cls")]) + (a.vararg is not None) + (a.kwarg is not None)


def test_no_function_over_60_lines_or_8_parameters_without_a_reason():
    """A function past the limits says why on its header: `# long: <why>` (lines) or `# wide: <why>` (parameters)."""
    bad = []
    for m, p in modules((*PACKAGES, "bench")).items():
        lines = p.read_text().splitlines()
        for fn in ast.walk(ast.parse("\n".join(lines))):
            if not isinstance(fn, ast.FunctionDef | ast.AsyncFunctionDef):
                continue
            why = header_comments(lines, fn)
            if fn.end_lineno - fn.lineno + 1 > MAX_FUNCTION_LINES and "long:" not in why:
                bad.append(f"{m}.{fn.name}: {fn.end_lineno - fn.lineno + 1} lines")
            if parameters(fn) > MAX_PARAMETERS and "wide:" not in why:
                bad.append(f"{m}.{fn.name}: {parameters(fn)} parameters")
    assert bad == []


def mutable_globals(tree: ast.Module) -> set[str]:
    """Module-level names bound to a dict, list or set (a literal or a call of its type)."""
    out = set()
    for node in tree.body:
        targets = (
            node.targets if isinstance(node, ast.Assign) else [node.target] if isinstance(node, ast.AnnAssign) else []
        )
        value = getattr(node, "value", None)
        mutable = isinstance(value, ast.Dict | ast.List | ast.Set) or (
            isinstance(value, ast.Call)
            and isinstance(value.func, ast.Name)
            and value.func.id in ("dict", "list", "set", "defaultdict", "OrderedDict")
        )
        if mutable:
            out.update(t.id for t in targets if isinstance(t, ast.Name))
    return out


def state_uses(fn: ast.AST, names: set[str]) -> tuple[set[str], set[str]]:
    """(names a function mutates, names it clears: `.clear()` or rebinding under `global`)."""
    mutated, cleared = set(), set()
    rebound = {n for node in ast.walk(fn) if isinstance(node, ast.Global) for n in node.names}
    for node in ast.walk(fn):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            owner = node.func.value
            if isinstance(owner, ast.Name) and owner.id in names and node.func.attr in MUTATORS:
                (cleared if node.func.attr == "clear" else mutated).add(owner.id)
        elif isinstance(node, ast.Assign | ast.AugAssign | ast.Delete):
            for t in node.targets if isinstance(node, ast.Assign | ast.Delete) else [node.target]:
                if isinstance(t, ast.Subscript) and isinstance(t.value, ast.Name) and t.value.id in names:
                    mutated.add(t.value.id)
                elif isinstance(t, ast.Name) and t.id in names & rebound:
                    cleared.add(t.id)
    return mutated, cleared


def test_no_module_state_that_outlives_a_run_without_a_way_to_clear_it():
    """A module-level dict, list or set that functions fill (a process-wide cache) has a function that clears it."""
    bad = []
    for m, p in modules().items():
        tree = ast.parse(p.read_text())
        names = mutable_globals(tree)
        mutated, cleared = set(), set()
        for fn in (n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)):
            mu, cl = state_uses(fn, names)
            mutated |= mu
            cleared |= cl
        bad += [f"{m}.{n}" for n in sorted(mutated - cleared)]
    assert bad == []

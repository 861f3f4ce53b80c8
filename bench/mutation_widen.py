"""pytest plugin for `make mutation` (loaded by bench/mutation.py): credit fixture-computed calls to whole test files,
and run a mutant's tests file by file, the quickest files first.

mutmut 3 runs each mutant only against the tests its stats run saw calling the mutated function, crediting a call
to the test during which it happened. A function that runs inside a module- or session-scoped fixture is thus
credited to the first test using that fixture only, and its mutants "survive" tests that would kill them. At the
end of the stats run this plugin credits each function to every selected test of each file that reached it.

mutmut passes a mutant's tests as a set, so pytest ran them in no particular order: files interleaved, and each
switch of file tore down and rebuilt its module fixtures (the decoding tests' models). Here they run whole file
after whole file, the file with the least time per test first (mutmut's own timings of the stats run), in each
file's own order; with `-x` a mutant that the quick hand-made tests kill stops before the slow files start.
"""

from __future__ import annotations

import os
from collections import defaultdict

_BY_FILE: dict[str, set[str]] = defaultdict(set)


def _name(nodeid: str) -> str:
    return nodeid[len("mutants/") :] if nodeid.startswith("mutants/") else nodeid


def pytest_collection_modifyitems(items) -> None:
    for item in items:
        name = _name(item.nodeid)
        _BY_FILE[name.split("::")[0]].add(name)
    if os.environ.get("MUTANT_UNDER_TEST", "stats") != "stats":
        items[:] = by_file(items, _durations())


def _durations() -> dict[str, float]:
    """Each test's time in mutmut's stats run ({} before there is one: files then keep their order)."""
    import json
    from pathlib import Path

    for path in (Path("mutmut-stats.json"), Path("mutants") / "mutmut-stats.json"):
        if path.is_file():
            return json.loads(path.read_text()).get("duration_by_test", {})
    return {}


def by_file(items: list, durations: dict[str, float]) -> list:
    """`items` grouped by file, each file's items in their own order, files by mean recorded time per test."""
    files: dict[str, list] = {}
    for item in items:
        files.setdefault(_name(item.nodeid).split("::")[0], []).append(item)

    def mean_time(f: str) -> float:
        return sum(durations.get(_name(i.nodeid), 0.0) for i in files[f]) / len(files[f])

    return [item for f in sorted(files, key=mean_time) for item in files[f]]


def pytest_sessionfinish(session) -> None:
    if os.environ.get("MUTANT_UNDER_TEST") != "stats":
        return
    from mutmut.state import state

    for tests in state().tests_by_mangled_function_name.values():
        for f in {t.split("::")[0] for t in tests}:
            tests |= _BY_FILE.get(f, set())

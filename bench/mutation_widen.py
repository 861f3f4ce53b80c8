"""pytest plugin for `make mutation` (loaded by bench/mutation.py): credit fixture-computed calls to whole test files.

mutmut 3 runs each mutant only against the tests its stats run saw calling the mutated function, crediting a call
to the test during which it happened. A function that runs inside a module- or session-scoped fixture is thus
credited to the first test using that fixture only, and its mutants "survive" tests that would kill them. At the
end of the stats run this plugin credits each function to every selected test of each file that reached it.
"""

from __future__ import annotations

import os
from collections import defaultdict

_BY_FILE: dict[str, set[str]] = defaultdict(set)


def _name(nodeid: str) -> str:
    return nodeid[len("mutants/"):] if nodeid.startswith("mutants/") else nodeid


def pytest_collection_modifyitems(items) -> None:
    for item in items:
        name = _name(item.nodeid)
        _BY_FILE[name.split("::")[0]].add(name)


def pytest_sessionfinish(session) -> None:
    if os.environ.get("MUTANT_UNDER_TEST") != "stats":
        return
    from mutmut.state import state

    for tests in state().tests_by_mangled_function_name.values():
        for f in {t.split("::")[0] for t in tests}:
            tests |= _BY_FILE.get(f, set())

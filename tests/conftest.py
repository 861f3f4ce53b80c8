"""Session-wide fixtures: one real local Ray for the whole run, the tests' own greenspec cache (never the user's)."""

from __future__ import annotations

import os
import shutil
import time

import pytest

from tests.pgserver import PgCluster, pg_bin

os.environ.setdefault("RAY_AUTH_MODE", "disabled")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
# One OpenBLAS thread per process, as greenspec's command line sets it (orchestrator/cli/__init__.py), before numpy
# loads here and in the session's Ray workers: two xdist workers' BLAS threads otherwise spin against each other.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
# Ray starts its workers 15 nicer than the process that started it (RAY_worker_niceness, default 15): on a shared
# machine the accelerator workers and training tasks of every test then starve behind other users' processes,
# and the suite mostly waits. Here they run at the test process's own niceness (set it with `nice`, as CI may).
os.environ.setdefault("RAY_worker_niceness", "0")
RAY_START_TRIES = 3
# The tests' own greenspec cache, never the user's (~/.cache/greenspec, which the dashboard's cost page reads):
# kept between runs (the dequantized GGUF and the demo models take minutes to rebuild), set before the session's Ray
# starts so that its workers inherit it (drivers joining it pass theirs: orchestrator.run.ray_startup.worker_runtime_env).
# GREENSPEC_TEST_CACHE moves it.
TEST_CACHE = os.environ.get("GREENSPEC_TEST_CACHE") or os.path.join(
    os.path.expanduser("~"), ".cache", "greenspec-tests"
)
os.environ["GREENSPEC_CACHE"] = TEST_CACHE
# Every Ray worker of the tests' runs (the session's Ray, and the runs of drivers started as processes, which inherit
# this) arms the fault seams its environment asks for (tests/faults.py); without a GREENSPEC_FAULT_* variable it
# does nothing.
os.environ["GREENSPEC_WORKER_SETUP"] = "tests.faults.install"
# ... which Ray's workers import before they take their driver's sys.path: the repository's root on theirs
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (ROOT, os.environ.get("PYTHONPATH")) if p)


SLOW_FIXTURES = {"ray_local", "tiny_verifier", "write_spec"}  # a real Ray, a trained model, a real sweep


def in_ci() -> bool:
    """Whether this run is CI's (`.ci/run` sets CI=true): there a missing test dependency fails, never skips."""
    return os.environ.get("CI", "").strip().lower() in ("true", "1", "yes")


def missing_test_tools() -> list[str]:
    """The system tools some tests need that are absent here: Chromium (the browser test), PostgreSQL's server,
    pdflatex (the LaTeX export compiled)."""
    missing = [] if shutil.which("chromium") else ["chromium (the dashboard's browser test; `make browser`)"]
    if not (pg_bin("initdb") and pg_bin("pg_ctl")):
        missing.append("PostgreSQL's initdb/pg_ctl (the PostgreSQL storage, lease and driver tests; `make postgres`)")
    if not shutil.which("pdflatex"):
        missing.append("pdflatex (the test that compiles the LaTeX export; `make latex`)")
    return missing


def pytest_sessionstart(session):
    """Under CI a missing Chromium, PostgreSQL or pdflatex ends the run at once, with one line saying what is missing."""
    missing = missing_test_tools() if in_ci() else []
    if missing:
        pytest.exit("CI=true but missing: " + "; ".join(missing), returncode=1)


def pytest_configure(config):
    """Keep the order below under xdist: pytest-xdist 3.x's `--dist loadfile` by default re-sorts the files by their
    number of tests (`--loadscope-reorder`), which put the one-test chaos file 127th of 140 and the long process-level
    files after every many-test file, so that a worker ran them alone at the end."""
    if hasattr(config.option, "loadscopereorder"):
        config.option.loadscopereorder = False


def pytest_collection_modifyitems(items):
    """Tests that start Ray or train the driver tests' verifier are `slow`, marked or not (`-m "not slow"`); files
    with slow tests run first (under `make test`'s xdist workers, which take whole files, the long end-to-end
    files then spread over both workers instead of one of them finishing alone)."""
    slow_files = set()
    for item in items:
        if SLOW_FIXTURES & set(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.slow)
        if item.get_closest_marker("slow"):
            slow_files.add(item.path)
    # stable: each file keeps its own order; the longest files first, so that none of them ends the run alone
    items.sort(
        key=lambda item: (item.path.name not in LONGEST, LONGEST.get(item.path.name, 0), item.path not in slow_files)
    )


# The longest files, longest first (they start Ray, load a real verifier or decode many times; the Gemma file's setup
# converts the model when the tests' cache is empty): a worker that draws one of them late ends the run alone while
# the other waits.
LONGEST = {
    name: rank
    for rank, name in enumerate(
        (
            "test_reliability_processes.py",
            "test_chaos.py",
            "test_reliability_runs.py",
            "test_pretrained.py",
            "test_cluster.py",
            "test_driver.py",
            "test_gemma.py",
            "test_signals_startup.py",
            "test_cli_runs.py",
            "test_decoding.py",
        )
    )
}


@pytest.fixture(scope="session")
def ray_local():
    """A real local Ray with 2 CPUs and the single `accelerator` resource, shared by every test."""
    import ray

    for attempt in range(RAY_START_TRIES):
        if ray.is_initialized():
            break
        try:
            ray.init(
                address="local",
                num_cpus=2,
                resources={"accelerator": 1},
                include_dashboard=False,
                log_to_driver=False,
                configure_logging=False,
                runtime_env={"worker_process_setup_hook": os.environ["GREENSPEC_WORKER_SETUP"]},
            )
        except Exception:  # on a heavily loaded machine the raylet can miss its 30 s start window: try again
            ray.shutdown()
            if attempt == RAY_START_TRIES - 1:
                raise
            time.sleep(5)
    yield ray
    ray.shutdown()


# ----------------------------------------------------------------------------- databases: SQLite and PostgreSQL

PG_SKIP = "PostgreSQL server binaries (initdb, pg_ctl) not installed here; `make test` installs Debian's postgresql"


@pytest.fixture(scope="session")
def pg_cluster(tmp_path_factory):
    """A PostgreSQL server for the whole test session; skipped with the reason when it cannot be started."""
    if not (pg_bin("initdb") and pg_bin("pg_ctl")):
        if in_ci():
            pytest.fail(f"CI=true: {PG_SKIP}", pytrace=False)
        pytest.skip(PG_SKIP)
    import tempfile
    from pathlib import Path

    root = Path(tempfile.mkdtemp(prefix="greenspec-pg-"))  # short path: unix socket names are limited to ~100 bytes
    try:
        cluster = PgCluster(root)
        yield cluster
        cluster.stop()
    finally:
        shutil.rmtree(root, ignore_errors=True)  # its data folder: ~125 MB a session otherwise left in /tmp


@pytest.fixture(scope="session")
def pdflatex() -> str:
    """The pdflatex program; skipped with the reason when absent (failed under CI=true)."""
    found = shutil.which("pdflatex")
    if not found:
        reason = "pdflatex not installed here; `make test` installs Debian's texlive-latex-base (`make latex`)"
        if in_ci():
            pytest.fail(f"CI=true: {reason}", pytrace=False)
        pytest.skip(reason)
    return found


@pytest.fixture(params=["sqlite", "postgresql"])
def db_url(request, tmp_path) -> str:
    """A fresh empty database URL, once on a SQLite file and once on a real PostgreSQL server."""
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'g.db'}"
    return request.getfixturevalue("pg_cluster").new_database()


@pytest.fixture(scope="session")
def fixture_db(tmp_path_factory) -> str:
    """URL of a database holding the finished fixture experiment (tests/dashboard/populate.py; the dashboard's and
    the paper tables' tests read it)."""
    from tests.dashboard.populate import populate

    url = f"sqlite:///{tmp_path_factory.mktemp('db') / 'fixture.db'}"
    populate(url)
    return url


@pytest.fixture(scope="session")
def live_db(tmp_path_factory) -> str:
    """URL of a database whose sweep still has running and pending cells."""
    from tests.dashboard.populate import populate

    url = f"sqlite:///{tmp_path_factory.mktemp('live') / 'live.db'}"
    populate(url, live=True)
    return url

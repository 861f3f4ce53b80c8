"""`greenspec resume -e NAME` and `greenspec retry --failed -e NAME` through the CLI, three experiments in one db."""

from __future__ import annotations

import shlex

import pytest
from click.testing import CliRunner
from sqlalchemy import select

from orchestrator.cli import main
from orchestrator.run.driver import RunOptions, run_spec_file
from orchestrator.run.prepare import prepare
from orchestrator.run.spec import spec_hash
from orchestrator.run.spec_paths import load_spec
from storage import store
from storage.db import open_db
from storage.models import Cell, Experiment, Generation
from storage.queries import status_counts

pytestmark = [pytest.mark.usefixtures("ray_local"), pytest.mark.slow]

# k = 2: a train cell, 2 references, (plain + ngram + olifant) x 2 prompts x 2 regimes
CELLS = 1 + 2 + 3 * 2 * 2


def _register_only(url: str, spec_path) -> None:
    """What `greenspec run` stores before its first Ray call: the experiment and its pending cells."""
    text, spec = spec_path.read_text(), load_spec(spec_path)
    _, _, cells = prepare(spec)
    _, Session = open_db(url)
    with Session() as s:
        exp = store.upsert_experiment(s, spec.experiment.name, text, spec_hash(text), str(spec_path.resolve()))
        store.add_cells(s, exp.id, cells)
        s.commit()


def _state(url: str) -> dict[str, tuple[dict, dict]]:
    """experiment -> (cell counts by state, cell id -> generation id)."""
    _, Session = open_db(url, migrate=False)
    with Session() as s:
        out = {}
        for exp in s.scalars(select(Experiment)):
            gens = dict(
                s.execute(select(Generation.cell_id, Generation.id).where(Generation.experiment_id == exp.id)).all()
            )
            out[exp.name] = (status_counts(s, exp.name)["cells"], gens)
        return out


def test_resume_and_retry_by_name_leave_the_other_experiments_alone(tmp_path, write_spec):
    url = f"sqlite:///{tmp_path / 'g.db'}"
    _register_only(url, write_spec(name="c", k=[2]))  # a driver killed before it ran anything
    run_spec_file(
        write_spec(name="a", k=[2], attempts=1), RunOptions(db_url=url, worker_env={"GREENSPEC_FAULT_RAISE": "ngram"})
    )
    # the newest, the default of both commands, is registered only as well: a command that ran it instead of the
    # named experiment would change its cells all the same, and a third sweep (a worker started) is saved
    _register_only(url, write_spec(name="b", k=[2]))
    before = _state(url)
    assert before["a"][0] == {"pending": 0, "running": 0, "done": CELLS - 4, "failed": 4}
    assert before["b"] == ({"pending": CELLS, "running": 0, "done": 0, "failed": 0}, {})
    assert before["c"] == ({"pending": CELLS, "running": 0, "done": 0, "failed": 0}, {})

    cli = CliRunner()
    out = cli.invoke(main, ["--db", url, "retry", "--failed", "-e", "a"])
    assert out.exit_code == 0, out.output
    assert f"a: {CELLS} done, 0 failed, 0 pending" in out.output
    printed = [line.split("  ")[1] for line in out.output.splitlines() if line.startswith("  greenspec --db ")]
    assert [cmd.split()[3] for cmd in printed] == ["findings", "export", "report", "dashboard"]
    for cmd in printed[:2]:  # the next commands it prints run as printed
        assert cli.invoke(main, shlex.split(cmd)[1:]).exit_code == 0, cmd
    after = _state(url)
    assert after["a"][0]["done"] == CELLS
    assert all(after["a"][1][cell] == gen for cell, gen in before["a"][1].items())  # finished ones not re-run
    assert after["b"] == before["b"] and after["c"] == before["c"]

    out = cli.invoke(main, ["--db", url, "resume", "-e", "c"])
    assert out.exit_code == 0, out.output
    final = _state(url)
    assert final["c"][0] == {"pending": 0, "running": 0, "done": CELLS, "failed": 0} and len(final["c"][1]) == 12
    assert final["a"] == after["a"] and final["b"] == before["b"]
    _, Session = open_db(url, migrate=False)
    with Session() as s:
        assert all(g.exact_match for g in s.scalars(select(Generation)))
        assert s.scalar(select(Cell.attempts).where(Cell.state == "done").order_by(Cell.attempts.desc())) == 1

    missing = cli.invoke(main, ["--db", url, "resume", "-e", "nosuch"])
    assert missing.exit_code == 2
    assert missing.output.strip().splitlines() == [
        f"greenspec: error: no experiment 'nosuch' in {url} (known: a, b, c)"
    ]

"""Issue 13, bad input through the CLI: one line, non-zero exit, no traceback, nothing written (cases 3, 5, 6, 8)."""

from __future__ import annotations

import hashlib
import json
import re
import socket
from pathlib import Path

import pytest

from orchestrator.run.spec import MAX_NEW_TOKENS
from storage.db import open_db
from tests.orchestrator.conftest import cli


def one_line_error(code: int, err: str, *words: str) -> None:
    lines = err.strip().splitlines()
    assert code != 0 and code is not None
    assert len(lines) == 1, err
    assert "Traceback" not in err
    for w in words:
        assert w in lines[0], lines[0]


def digest(folder: Path) -> dict[str, str]:
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(folder.iterdir()) if p.is_file()}


# ----------------------------------------------------------------------------- case 3: colliding cells


def test_strategies_with_the_same_draft_and_options_collide(write_spec, tmp_path):
    spec = write_spec()
    spec.write_text(spec.read_text() + '[[strategies]]\nname = "ngram-again"\ndraft = "ngram"\n')
    for cmd in (["validate", str(spec)], ["--db", f"sqlite:///{tmp_path / 'g.db'}", "run", str(spec)]):
        code, _, err = cli(*cmd)
        one_line_error(code, err, "duplicate cells", "'ngram'", "'ngram-again'")
    assert not (tmp_path / "g.db").exists()


def test_two_tasks_reading_one_file_collide(write_spec, text_files, tmp_path):
    spec = write_spec()
    spec.write_text(
        spec.read_text() + f'[[tasks]]\nname = "again"\npath = "{text_files[1]}"\nprompts = 2\nprompt_words = 20\n'
    )
    for cmd in (["validate", str(spec)], ["--db", f"sqlite:///{tmp_path / 'g.db'}", "run", str(spec)]):
        code, _, err = cli(*cmd)
        one_line_error(code, err, "duplicate cells", "'pydoc'", "'again'")
    assert not (tmp_path / "g.db").exists()


def test_repeated_prompts_in_a_task_are_used_once_and_said_so(write_spec, tmp_path, caplog):
    task = tmp_path / "repeats.txt"
    doc = " ".join(f"word{i}" for i in range(60))
    task.write_text("\n\n".join([doc, doc + " tail", "other " + doc]))
    spec = write_spec()
    spec.write_text(
        spec.read_text()
        .replace("prompts = 2", "prompts = 3")
        .replace(
            f'path = "{spec.read_text().split("[[tasks]]")[1].split("path = ")[1].split(chr(10))[0].strip(chr(34))}"',
            f'path = "{task}"',
        )
    )
    code, out, err = cli("validate", str(spec))
    assert code == 0, err
    assert "sweep cells" in out
    assert any("repeat an earlier one" in r.getMessage() for r in caplog.records)


# ----------------------------------------------------------------------------- case 5: raw tracebacks


@pytest.mark.parametrize(
    "url, says",
    [
        ("not a url", "not a SQLAlchemy URL"),
        ("nosuch://x/y", "unknown database scheme"),
        ("postgresql+pg8000://u@localhost/db", "not installed"),
        ("sqlite:////no/such/dir/g.db", "does not exist"),
    ],
)
def test_bad_db_urls(url, says):
    for cmd in (["status"], ["export"], ["resume"]):
        code, _, err = cli("--db", url, *cmd)
        one_line_error(code, err, says)


def test_db_that_is_not_a_database_file(tmp_path, write_spec):
    bogus = tmp_path / "notes.db"
    bogus.write_text("just some text, not SQLite\n" * 50)
    before = digest(tmp_path)
    for cmd in (["status"], ["export"], ["resume"], ["run", str(write_spec())]):
        code, _, err = cli("--db", f"sqlite:///{bogus}", *cmd)
        one_line_error(code, err, "not a database")
    after = digest(tmp_path)
    assert after[bogus.name] == before[bogus.name]


def test_export_into_a_missing_folder(tmp_path):
    url = f"sqlite:///{tmp_path / 'g.db'}"
    open_db(url)[0].dispose()
    code, _, err = cli("--db", url, "export", "--out", str(tmp_path / "nope" / "t.csv"))
    one_line_error(code, err, "does not exist")


def test_spec_that_is_not_utf8(tmp_path, write_spec):
    spec = write_spec()
    spec.write_bytes(spec.read_text().replace('name = "t"', 'name = "t" # caf\u00e9').encode("latin-1"))
    for cmd in (["validate", str(spec)], ["--db", f"sqlite:///{tmp_path / 'g.db'}", "run", str(spec)]):
        code, _, err = cli(*cmd)
        one_line_error(code, err, "not UTF-8")
    assert not (tmp_path / "g.db").exists()


@pytest.mark.parametrize("seconds", ["inf", "nan", "-1", "0", "1e12"])
def test_power_seconds_out_of_range(seconds):
    code, _, err = cli("power", "--seconds", seconds)
    one_line_error(code, err, "--seconds")


def test_verifier_with_config_but_no_weights(tmp_path, write_spec, tiny_verifier):
    empty = tmp_path / "no-weights"
    empty.mkdir()
    (empty / "config.json").write_text((tiny_verifier / "config.json").read_text())
    spec = write_spec()
    spec.write_text(spec.read_text().replace(f'model = "{tiny_verifier}"', f'model = "{empty}"'))
    for cmd in (["validate", str(spec)], ["--db", f"sqlite:///{tmp_path / 'g.db'}", "run", str(spec)]):
        code, _, err = cli(*cmd)
        one_line_error(code, err, "verifier.model", "no weights")
    assert not (tmp_path / "g.db").exists()  # checked before the first write: no experiment registered


# ----------------------------------------------------------------------------- case 6: unbounded work


def test_huge_max_new_tokens_is_refused_by_validate(write_spec):
    spec = write_spec()
    spec.write_text(re.sub(r"max_new_tokens = \d+", "max_new_tokens = 2000000000", spec.read_text()))
    code, _, err = cli("validate", str(spec))
    one_line_error(code, err, "sweep.max_new_tokens", str(MAX_NEW_TOKENS))


@pytest.mark.parametrize(
    "old, new",
    [
        ("k = [2, 3]", "k = [2, 1000]"),
        ("prompts = 2", "prompts = 10000000"),
        ("prompt_words = 20", "prompt_words = 99999999"),
    ],
)
def test_huge_k_and_prompts_are_refused(write_spec, old, new):
    spec = write_spec()
    text = spec.read_text()
    assert old in text
    spec.write_text(text.replace(old, new))
    code, _, err = cli("validate", str(spec))
    one_line_error(code, err, "less than or equal")


def test_grid_longer_than_the_verifiers_context(write_spec, tmp_path, tiny_verifier):
    n_ctx = json.loads((tiny_verifier / "config.json").read_text())["max_position_embeddings"]
    spec = write_spec()
    spec.write_text(re.sub(r"max_new_tokens = \d+", f"max_new_tokens = {n_ctx - 10}", spec.read_text()))
    for cmd in (["validate", str(spec)], ["--db", f"sqlite:///{tmp_path / 'g.db'}", "run", str(spec)]):
        code, _, err = cli(*cmd)
        one_line_error(code, err, "sweep.max_new_tokens", f"context of {n_ctx}")
    assert not (tmp_path / "g.db").exists()


# ----------------------------------------------------------------------------- case 8: status and the dashboard port


def test_status_of_an_unknown_experiment_refuses_like_resume(tmp_path):
    url = f"sqlite:///{tmp_path / 'g.db'}"
    open_db(url)[0].dispose()
    for cmd in (["status", "-e", "nosuch"], ["resume", "-e", "nosuch"]):
        code, _, err = cli("--db", url, *cmd)
        one_line_error(code, err, "no experiment 'nosuch'")
    code, _, err = cli("--db", f"sqlite:///{tmp_path / 'none.db'}", "status", "-e", "nosuch")
    one_line_error(code, err, "no experiment 'nosuch'")


def test_dashboard_on_a_taken_port_fails_before_printing_the_url(tmp_path):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        code, out, err = cli("--db", f"sqlite:///{tmp_path / 'g.db'}", "dashboard", "--port", str(port))
    one_line_error(code, err, f"--port {port}", "in use")
    assert "http://" not in out


def test_status_without_experiment_shows_each_one(tmp_path):
    from storage import store
    from storage.cell_spec import CellParams, CellSpec

    url = f"sqlite:///{tmp_path / 'g.db'}"
    engine, Session = open_db(url)
    with Session() as s:
        for name, n in (("first", 2), ("second", 3)):
            exp = store.upsert_experiment(s, name, "", "", None)
            store.add_cells(
                s,
                exp.id,
                [
                    CellSpec(
                        key=f"{name}{i}", kind="reference", task="t", prompt_index=i, params=CellParams(prompt=str(i))
                    )
                    for i in range(n)
                ],
            )
        s.commit()
    engine.dispose()
    code, out, err = cli("--db", url, "status")
    assert code == 0, err
    lines = out.splitlines()
    assert any(ln.startswith("first:") and "2 pending" in ln for ln in lines)
    assert any(ln.startswith("second:") and "3 pending" in ln for ln in lines)
    code, out, _ = cli("--db", url, "status", "--json")
    assert json.loads(out)["experiments"]["second"]["cells"]["pending"] == 3

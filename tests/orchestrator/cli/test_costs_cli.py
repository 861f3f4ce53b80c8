"""`greenspec costs measure | list | import | export | repredict` and `export / report --costs`, in process over real
SQLite files: a table measured with the CLI on a tiny real verifier saved with its tokenizer; a table moved from one
database to another and back unchanged; a small replayed experiment re-predicted, exported and reported with the
label; every bad input refused in one line (exit 2) with nothing stored changed."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

from tests.orchestrator import costs_support as cs
from tests.orchestrator.conftest import cli
from workers.portable_tables import table_file


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory) -> Path:
    """A tiny Llama over the offline Mistral tokenizer's vocabulary, saved with the tokenizer (a local model folder)."""
    from workers.models.tokenizer import load_tokenizer

    out = tmp_path_factory.mktemp("tiny-model")
    cs.tiny_model(hidden=32, vocab=32000).save_pretrained(out)
    load_tokenizer("mistral").save_pretrained(out)
    return out


@pytest.fixture(scope="module")
def small(tmp_path_factory):
    verifier = cs.tiny_verifier(hidden=64)
    folder = tmp_path_factory.mktemp("costs-cli")
    built = cs.build(folder / "g.db", verifier, n_prompts=1, threads=1, rounds=1)
    table, samples = cs.measure(verifier, "tiny", 1, repeats=2)
    (folder / "t1.json").write_text(table_file(table, "tiny-1t", samples))
    return built, folder


def dump(path: Path) -> list[str]:
    """Every row of a SQLite file, as SQL text."""
    with sqlite3.connect(path) as conn:
        return list(conn.iterdump())


def refused(result, *words: str) -> None:
    code, _, err = result
    lines = err.strip().splitlines()
    assert code == 2 and len(lines) == 1 and lines[0].startswith("greenspec: error: "), err
    assert "unexpected" not in lines[0] and all(w in lines[0] for w in words), err


def test_measure_writes_the_table_and_stores_it(model_dir, tmp_path):
    out, db = tmp_path / "t.json", f"sqlite:///{tmp_path / 'm.db'}"
    args = ["costs", "measure", "--verifier", str(model_dir), "--threads", "1", "--max-k", "2", "--trees", ""]
    code, _, err = cli(*args, "--contexts", "8-24", "--repeats", "2", "--out", str(out), "--db", db)
    assert code == 0, err
    raw = json.loads(out.read_text())
    assert raw["name"] == "tiny-model0-cpu-1t-float32" and raw["meta"]["threads"] == 1
    assert raw["meta"]["agreement"] == 1.0 and raw["meta"]["energy"] in ("measured", "estimated")
    assert set(raw["noise"]) == {"uncached", "cached", "cached-standard"} and raw["samples"]
    assert "reference check: 100.0% of 96 positions agree" in err and "stored as cost table 1" in err
    code, listed, _ = cli("--db", db, "costs", "list")
    assert code == 0 and "tiny-model0-cpu-1t-float32" in listed and str(model_dir) in listed


def test_a_table_moves_between_databases_unchanged(small, tmp_path):
    _, folder = small
    a, b = f"sqlite:///{tmp_path / 'a.db'}", f"sqlite:///{tmp_path / 'b.db'}"
    code, said, _ = cli("--db", a, "costs", "import", str(folder / "t1.json"))
    assert code == 0 and "stored as cost table 1 (tiny-1t)" in said
    assert "already stored as cost table 1" in cli("--db", a, "costs", "import", str(folder / "t1.json"))[1]
    assert cli("--db", a, "costs", "export", "tiny-1t", "--out", str(tmp_path / "x.json"))[0] == 0
    assert cli("--db", b, "costs", "import", str(tmp_path / "x.json"), "--name", "moved")[0] == 0
    assert cli("--db", b, "costs", "export", "1", "--out", str(tmp_path / "y.json"))[0] == 0
    first, back = json.loads((folder / "t1.json").read_text()), json.loads((tmp_path / "y.json").read_text())
    assert back.pop("name") == "moved" and first.pop("name") == "tiny-1t" and back == first
    code, listed, _ = cli("--db", b, "costs", "list")
    assert code == 0 and "moved" in listed and "cpu: " in listed
    assert cli("--db", f"sqlite:///{tmp_path / 'none.db'}", "costs", "list")[1].startswith("no cost tables yet")


def test_export_and_report_with_costs_show_the_prediction_labelled(small, tmp_path):
    built, folder = small
    db = built.url
    assert cli("--db", db, "costs", "import", str(folder / "t1.json"))[0] == 0
    code, out, err = cli("--db", db, "export", "--experiment", "small", "--costs", "tiny-1t", "--format", "markdown")
    assert code == 0, err
    assert "small@tiny-1t: predicted for tiny-1t (cpu: " in err
    assert "predicted_for" in out.splitlines()[0] and "| replay " in out and "| timed " not in out
    code, out, err = cli("--db", db, "costs", "repredict", "-e", "small", "--costs", "tiny-1t")
    assert code == 0 and "(reused)" in out and "its 9 timed generations are not copied" in out
    html = tmp_path / "r.html"
    code, _, err = cli("--db", db, "report", "-e", "small", "--costs", "tiny-1t", "--out", str(html))
    assert code == 0, err
    text = html.read_text()
    assert "small@tiny-1t" in text and "predicted for tiny-1t" in text
    code, out, _ = cli("--db", db, "export", "-e", "small@tiny-1t", "--generations")
    assert code == 0 and "predicted_for" in out.splitlines()[0] and ",timed," not in out


def test_bad_input_is_refused_in_one_line_and_changes_nothing(small, tmp_path):
    built, folder = small
    db, path = built.url, Path(built.url.removeprefix("sqlite:///"))
    good = (folder / "t1.json").read_text()
    raw = json.loads(good)
    other = raw | {"verifier": "gemma:torch.float32", "meta": raw["meta"] | {"model": "gemma3-270m"}, "name": "g"}
    (tmp_path / "other.json").write_text(json.dumps(other))
    assert cli("--db", db, "costs", "import", str(tmp_path / "other.json"))[0] == 0
    (tmp_path / "fresh.json").write_text(json.dumps(raw | {"noise": {}}))
    (tmp_path / "cut.json").write_text(good[: len(good) // 2])
    (tmp_path / "junk.json").write_text("\x00garbage")
    timed_only = cs.build(tmp_path / "timed.db", cs.tiny_verifier(hidden=64), n_prompts=1, threads=1, rounds=1)
    before, before_timed = dump(path), dump(tmp_path / "timed.db")
    refused(cli("--db", db, "costs", "import", str(tmp_path / "cut.json")), "cut.json", "truncated")
    refused(cli("--db", db, "costs", "import", str(tmp_path / "junk.json")), "junk.json", "not a cost table")
    refused(cli("--db", db, "costs", "import", str(tmp_path / "missing.json")), "missing.json", "cannot read")
    refused(cli("--db", db, "costs", "import", str(tmp_path / "fresh.json"), "--name", "g"), "already named 'g'")
    refused(cli("--db", db, "costs", "export", "99", "--out", str(tmp_path / "z.json")), "no cost table '99'")
    refused(cli("--db", db, "costs", "repredict", "-e", "small", "--costs", "99"), "no cost table '99'", "known: ")
    refused(cli("--db", db, "costs", "repredict", "-e", "small", "--costs", "g"), "'gemma3-270m'", "own verifier")
    refused(cli("--db", db, "costs", "repredict", "-e", "nope", "--costs", "g"), "no experiment 'nope'")
    refused(cli("--db", db, "export", "-e", "small", "--costs", "99"), "no cost table '99'")
    refused(cli("--db", db, "report", "-e", "small", "--costs", "g", "--out", str(tmp_path / "r.html")), "gemma3-270m")
    refused(cli("--db", db, "costs", "measure", "--verifier", "x", "--contexts", "9"), "--contexts '9'")
    refused(cli("--db", db, "costs", "measure", "--verifier", "x", "--trees", "4,a"), "--trees '4,a'")
    assert dump(path) == before and not (tmp_path / "z.json").exists() and not (tmp_path / "r.html").exists()
    # an experiment whose generations were all timed: nothing to re-predict (its replays dropped here, by hand)
    with sqlite3.connect(tmp_path / "timed.db") as conn:
        conn.execute("delete from generations where measure = 'replay'")
    assert cli("--db", timed_only.url, "costs", "import", str(folder / "t1.json"))[0] == 0
    before_timed = dump(tmp_path / "timed.db")
    refused(cli("--db", timed_only.url, "export", "--costs", "tiny-1t"), "no replayed generations (9 timed)")
    assert dump(tmp_path / "timed.db") == before_timed


def test_measure_checks_an_experiments_stored_references(model_dir, small, tmp_path):
    """--experiment: the table's reference check runs the experiment's own references teacher-forced; another model's
    disagree, and the table (another verifier) is refused for that experiment."""
    built, _ = small
    args = ["costs", "measure", "--verifier", str(model_dir), "--threads", "1", "--max-k", "2", "--trees", ""]
    code, _, err = cli(*args, "--contexts", "8-24", "--repeats", "2", "--experiment", "small", "--db", built.url)
    assert code == 0, err
    assert "reference check: " in err and "of 12 positions agree" in err and "100.0%" not in err
    code, listed, _ = cli("--db", built.url, "costs", "list")
    name = next(line.split()[1] for line in listed.splitlines() if "tiny-model" in line)
    refused(
        cli("--db", built.url, "costs", "repredict", "-e", "small", "--costs", name), "is for verifier", "tiny-model"
    )

"""`validate` and `run` read corpora and tasks as training does: a file training could not read is refused in one
line naming the file and the line, column or byte at fault (exit 2), and `run` stores nothing."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from tests.orchestrator.conftest import cli
from tests.orchestrator.run.test_reliability_inputs import one_line_error

WORDS = " ".join(f"w{i}" for i in range(80))


def _bad_corpora(folder: Path) -> dict[str, tuple[Path, list[str]]]:
    """name -> (a corpus file training cannot read, the words its refusal must name)."""
    rows = folder / "body.jsonl"
    rows.write_text(json.dumps({"text": "ok"}) + "\n" + json.dumps({"body": "no text field"}) + "\n")
    broken = folder / "broken.jsonl"
    broken.write_text(json.dumps({"text": "ok"}) + "\n\n{not json\n")
    md = folder / "notes.md"
    md.write_text("# a markdown file\n\nsome text\n")
    binary = folder / "binary.txt"
    binary.write_bytes(Path("/bin/ls").read_bytes()[:20000])
    latin = folder / "latin.txt"
    latin.write_bytes(("caf\u00e9 " * 10).encode("latin-1"))
    numbers = folder / "ints.parquet"
    pq.write_table(pa.table({"text": [1, 2, 3]}), numbers)
    return {
        "no column": (rows, [f"{rows}:2", "no column 'text'", "body"]),
        "bad line": (broken, [f"{broken}:3", "not valid JSON"]),
        "markdown": (md, [str(md), "unsupported file type"]),
        "binary": (binary, [str(binary), "not utf-8 text", "at offset"]),
        "latin-1": (latin, [str(latin), "not utf-8 text (byte 0xe9 at offset 3)"]),
        "parquet ints": (numbers, [str(numbers), "column 'text' holds int64, not text"]),
    }


@pytest.mark.parametrize("case", ["no column", "bad line", "markdown", "binary", "latin-1", "parquet ints"])
def test_a_corpus_training_cannot_read_is_refused_by_validate_and_run(case, write_spec, tmp_path, text_files):
    corpus, words = _bad_corpora(tmp_path)[case]
    spec = write_spec(**{f'path = "{text_files[0]}"': f'path = "{corpus}"'})
    db = tmp_path / "g.db"
    for cmd in (["validate", str(spec)], ["--db", f"sqlite:///{db}", "run", str(spec)]):
        code, _, err = cli(*cmd)
        assert code == 2, err
        one_line_error(code, err, "corpora[0].path:", *words)
    assert not db.exists()  # refused before the database was created


def test_a_task_file_that_is_not_utf8_is_refused_naming_the_task(write_spec, tmp_path, text_files):
    task = tmp_path / "task.txt"
    task.write_bytes(text_files[1].read_bytes() + "\n\nna\u00efve\n".encode("latin-1"))
    offset = len(text_files[1].read_bytes()) + len(b"\n\nna")
    spec = write_spec(**{f'path = "{text_files[1]}"': f'path = "{task}"', "prompts = 2": "prompts = 20"})
    code, _, err = cli("validate", str(spec))
    one_line_error(code, err, "tasks[0].path:", str(task), f"byte 0xef at offset {offset}")


def test_encoding_key_reads_a_latin1_corpus_and_task(write_spec, tmp_path, text_files):
    """With `encoding = "latin-1"` the same bytes are read as the text they are: the prompt keeps its accent."""
    from orchestrator.run.prepare import load_prompts
    from orchestrator.run.spec_paths import load_spec

    corpus, task = tmp_path / "corpus.txt", tmp_path / "task.txt"
    corpus.write_bytes(text_files[0].read_text().replace("the", "th\u00e9").encode("latin-1", errors="ignore"))
    task.write_bytes(("caf\u00e9 " + WORDS + "\n\n" + WORDS + " end\n").encode("latin-1"))
    spec = write_spec(
        **{
            f'path = "{text_files[0]}"': f'path = "{corpus}"\nencoding = "latin-1"',
            f'path = "{text_files[1]}"': f'path = "{task}"\nencoding = "latin-1"',
        }
    )
    code, out, err = cli("validate", str(spec))
    assert code == 0, err
    assert load_prompts(load_spec(spec))[0].texts[0].startswith("caf\u00e9 w0 w1")


def test_an_unknown_encoding_is_a_spec_error(write_spec, text_files):
    spec = write_spec(**{f'path = "{text_files[0]}"': f'path = "{text_files[0]}"\nencoding = "klingon"'})
    code, _, err = cli("validate", str(spec))
    one_line_error(code, err, "corpora[0].encoding", "unknown encoding 'klingon'")

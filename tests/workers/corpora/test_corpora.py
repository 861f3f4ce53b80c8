"""Corpora: .parquet files, folders of mixed files and local Hugging Face datasets, read offline."""

from __future__ import annotations

import json

import datasets
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from workers.corpora import TextSource, iter_documents
from workers.errors import CorpusError
from workers.training.ibase import IBaseRequest, train_instance_base

ROWS = ["Slices take a start, a stop and a step.", "", "  ", "Attributes are looked up on the type first."]


def _parquet(path, rows=ROWS, column="text"):
    pq.write_table(pa.table({column: rows, "id": list(range(len(rows)))}), path)
    return path


def test_parquet_file_yields_its_non_empty_rows_in_order(tmp_path):
    src = TextSource(name="p", path=str(_parquet(tmp_path / "c.parquet")))
    assert list(iter_documents(src)) == [ROWS[0], ROWS[3]]


def test_parquet_other_column_and_missing_column(tmp_path):
    path = _parquet(tmp_path / "c.parquet", column="body")
    assert list(iter_documents(TextSource(name="p", path=str(path), column="body")))[0] == ROWS[0]
    with pytest.raises(CorpusError, match="no column 'text'"):
        list(iter_documents(TextSource(name="p", path=str(path))))


def test_not_a_parquet_file_is_one_clear_error(tmp_path):
    bad = tmp_path / "bad.parquet"
    bad.write_text("not parquet")
    with pytest.raises(CorpusError, match="not a readable parquet file"):
        list(iter_documents(TextSource(name="p", path=str(bad))))


def test_folder_reads_every_supported_file_sorted_by_path(tmp_path):
    (tmp_path / "b").mkdir()
    (tmp_path / "a.txt").write_text("first block\nsame block\n\nsecond block\n")
    (tmp_path / "b" / "c.jsonl").write_text(json.dumps({"text": "from jsonl"}) + "\n\n")
    _parquet(tmp_path / "b" / "d.parquet", rows=["from parquet"])
    (tmp_path / "notes.md").write_text("ignored: not a corpus suffix")
    docs = list(iter_documents(TextSource(name="f", path=str(tmp_path))))
    assert docs == ["first block\nsame block", "second block", "from jsonl", "from parquet"]


def test_folder_without_corpus_files_is_refused(tmp_path):
    (tmp_path / "readme.md").write_text("nothing to read")
    with pytest.raises(CorpusError, match="holds no"):
        list(iter_documents(TextSource(name="f", path=str(tmp_path))))


def test_local_parquet_dataset_folder_is_read_without_the_hub(tmp_path, monkeypatch):
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")  # any hub access would fail
    (tmp_path / "ds").mkdir()
    _parquet(tmp_path / "ds" / "train.parquet")
    src = TextSource(name="hf", dataset=str(tmp_path / "ds"), split="train")
    assert list(iter_documents(src)) == [ROWS[0], ROWS[3]]


def test_save_to_disk_dataset_and_dataset_dict(tmp_path, monkeypatch):
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    ds = datasets.Dataset.from_dict({"text": ROWS})
    ds.save_to_disk(str(tmp_path / "one"))
    datasets.DatasetDict({"train": ds, "test": datasets.Dataset.from_dict({"text": ["held out"]})}).save_to_disk(
        str(tmp_path / "dict")
    )
    assert list(iter_documents(TextSource(name="hf", dataset=str(tmp_path / "one")))) == [ROWS[0], ROWS[3]]
    assert list(iter_documents(TextSource(name="hf", dataset=str(tmp_path / "dict"), split="test"))) == ["held out"]
    with pytest.raises(CorpusError, match="cannot be loaded"):
        list(iter_documents(TextSource(name="hf", dataset=str(tmp_path / "dict"), split="validation")))


def test_instance_base_trained_from_parquet_equals_the_same_text_file(tmp_path):
    text = ["The slice of a sequence is a new sequence.", "A slice with a step skips items of the sequence."]
    _parquet(tmp_path / "c.parquet", rows=text)
    (tmp_path / "c.txt").write_text("\n\n".join(text))
    from_parquet = train_instance_base(
        IBaseRequest(TextSource(name="c", path=str(tmp_path / "c.parquet")), "mistral", tmp_path / "a")
    )
    from_text = train_instance_base(
        IBaseRequest(TextSource(name="c", path=str(tmp_path / "c.txt")), "mistral", tmp_path / "b")
    )
    assert from_parquet.tokens == from_text.tokens > 20
    assert from_parquet.nodes_after_prune == from_text.nodes_after_prune


# ----------------------------------------------------------------------------- text that is text


def test_bad_utf8_is_refused_with_its_byte_offset_even_past_the_first_read(tmp_path):
    """The offset counts bytes from the file's start, across the reader's 1 MiB reads and a split character."""
    good = ("\u00e9t\u00e9 " * 300_000).encode()  # 2,100,000 bytes of valid two-byte characters
    bad = tmp_path / "c.txt"
    bad.write_bytes(good + b"ok \xff tail\n")
    with pytest.raises(CorpusError, match=rf"not utf-8 text \(byte 0xff at offset {len(good) + 3}\)"):
        list(iter_documents(TextSource(name="c", path=str(bad))))
    cut = tmp_path / "cut.txt"
    cut.write_bytes(b"caf\xc3")  # a two-byte character cut short at the end
    with pytest.raises(CorpusError, match="truncated at offset 3"):
        list(iter_documents(TextSource(name="c", path=str(cut))))


def test_encoding_reads_latin1_as_text_and_never_as_replacement_characters(tmp_path):
    f = tmp_path / "c.jsonl"
    f.write_bytes(json.dumps({"text": "caf\u00e9"}, ensure_ascii=False).encode("latin-1") + b"\n")
    with pytest.raises(CorpusError, match=r"byte 0xe9 at offset 13\)"):
        list(iter_documents(TextSource(name="c", path=str(f))))
    assert list(iter_documents(TextSource(name="c", path=str(f), encoding="latin-1"))) == ["caf\u00e9"]


def test_a_nul_character_or_many_control_characters_is_not_text(tmp_path):
    nul = tmp_path / "nul.txt"
    nul.write_bytes(b"line one\nline\x00two\n")
    with pytest.raises(CorpusError, match=rf"{nul}:2: a NUL character"):
        list(iter_documents(TextSource(name="c", path=str(nul), encoding="latin-1")))
    noisy = tmp_path / "noisy.txt"
    noisy.write_text("abcdefghi\x1b" * 10)  # 10% escape characters
    with pytest.raises(CorpusError, match=r"10 control characters in its first 100 \(10%, more than 1%\)"):
        list(iter_documents(TextSource(name="c", path=str(noisy))))
    fine = tmp_path / "fine.txt"  # tabs, form feeds and one escape in 200 characters are text
    fine.write_text("a\tb\fc" + "x" * 194 + "\x1b\n")
    assert len(list(iter_documents(TextSource(name="c", path=str(fine))))) == 1


def test_jsonl_rows_must_be_objects_with_a_text_column(tmp_path):
    f = tmp_path / "c.jsonl"
    f.write_text('{"text": "ok"}\n[1, 2]\n')
    with pytest.raises(CorpusError, match=rf"{f}:2: a JSON list, not an object"):
        list(iter_documents(TextSource(name="c", path=str(f))))
    f.write_text('{"text": "ok"}\n{"text": 5}\n')
    with pytest.raises(CorpusError, match=rf"{f}:2: column 'text' is a int, not text"):
        list(iter_documents(TextSource(name="c", path=str(f))))


def test_scan_source_stops_at_its_budget_and_finds_an_early_fault(tmp_path):
    from workers.corpora import scan_source

    f = tmp_path / "c.jsonl"
    f.write_text("".join(json.dumps({"text": f"doc {i}"}) + "\n" for i in range(100)) + "not json\n")
    assert scan_source(TextSource(name="c", path=str(f)), max_chars=50) == 10  # "doc 0" .. "doc 9": 5 characters each
    with pytest.raises(CorpusError, match=rf"{f}:101: not valid JSON"):
        scan_source(TextSource(name="c", path=str(f)))
    (tmp_path / "blank.txt").write_text("\n \n")
    assert scan_source(TextSource(name="c", path=str(tmp_path / "blank.txt"))) == 0


def test_source_identity_leaves_out_an_unset_encoding():
    """Artifact names and cell keys of sources without an encoding stay what they were before the key existed."""
    assert "encoding" not in TextSource(name="c", path="x.txt").identity()
    assert TextSource(name="c", path="x.txt", encoding="latin-1").identity()["encoding"] == "latin-1"

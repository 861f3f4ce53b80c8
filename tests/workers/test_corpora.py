"""Corpora: .parquet files, folders of mixed files and local Hugging Face datasets, read offline."""

from __future__ import annotations

import json

import datasets
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from workers.corpora import TextSource, iter_documents
from workers.errors import CorpusError
from workers.trainer import IBaseRequest, train_instance_base

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

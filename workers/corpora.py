"""Text sources: local .txt/.jsonl/.parquet files or Hugging Face datasets, read as documents.

`dataset` names a hub dataset, a local folder of data files (e.g. parquet), or a folder written by
`datasets.Dataset.save_to_disk` / `DatasetDict.save_to_disk` (read with `load_from_disk`, `split` picking
the split of a DatasetDict).

A *document* is one unit of text: a blank-line-separated block of a .txt file, one row's `column` of a
.jsonl/.parquet file or of a dataset split. Documents are streamed, never held all at once.

Example:
    >>> src = TextSource(name="plays", path="corpus.txt")
    >>> next(iter_documents(src))[:20]
    'ACT I. SCENE I. Elsin'
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

from workers.errors import CorpusError

logger = logging.getLogger(__name__)

LOCAL_SUFFIXES = (".txt", ".jsonl", ".json", ".parquet")

# WikiText marks an article's title as " = Title = " on a row of its own, its sections as " = = Section = = ".
_WIKITEXT_TITLE = re.compile(r"^= (?!=).*(?<!=) =$")
_WIKITEXT_HEADING = re.compile(r"^=( =)* .* =( =)*$")


@dataclass(frozen=True)
class TextSource:
    """Where a corpus or task's documents come from: a local `path`, or `dataset`/`config`/`split`/`column`."""

    name: str
    path: str | None = None
    dataset: str | None = None
    config: str | None = None
    split: str = "train"
    column: str = "text"

    def describe(self) -> str:
        """A short human label: the path, or dataset[/config]:split."""
        if self.path:
            return self.path
        return f"{self.dataset}{'/' + self.config if self.config else ''}:{self.split}"


def check_source(source: TextSource) -> None:
    """Raise CorpusError if a local source is missing or of an unsupported kind (cheap: no reading)."""
    if source.path is None:
        if not source.dataset:
            raise CorpusError(f"{source.name}: give either path or dataset")
        return
    path = Path(source.path)
    if not path.exists():
        raise CorpusError(f"{source.name}: no such file or directory: {source.path}")
    files = _local_files(source)
    if not files:
        raise CorpusError(f"{source.name}: {source.path} holds no {'/'.join(LOCAL_SUFFIXES)} files")


def iter_documents(source: TextSource) -> Iterator[str]:
    """Yield the non-empty documents of a source in a fixed order."""
    check_source(source)
    if source.path is None:
        yield from _dataset_documents(source)
        return
    for file in _local_files(source):
        yield from _file_documents(file, source.column)


def _local_files(source: TextSource) -> list[Path]:
    path = Path(source.path)
    if path.is_dir():
        return sorted(p for p in path.rglob("*") if p.suffix in LOCAL_SUFFIXES and p.is_file())
    if path.suffix not in LOCAL_SUFFIXES:
        raise CorpusError(f"{source.name}: {source.path}: unsupported file type; use {', '.join(LOCAL_SUFFIXES)}")
    return [path]


def _file_documents(file: Path, column: str) -> Iterator[str]:
    if file.suffix == ".txt":
        yield from _text_blocks(file)
    elif file.suffix in (".jsonl", ".json"):
        yield from _jsonl_documents(file, column)
    else:
        yield from _parquet_documents(file, column)


def _text_blocks(file: Path) -> Iterator[str]:
    """Blank-line-separated blocks of a text file, each joined into one document."""
    block: list[str] = []
    with open(file, encoding="utf-8", errors="replace") as fh:
        for line in fh:
            if line.strip():
                block.append(line.rstrip("\n"))
            elif block:
                yield "\n".join(block)
                block = []
    if block:
        yield "\n".join(block)


def _jsonl_documents(file: Path, column: str) -> Iterator[str]:
    with open(file, encoding="utf-8") as fh:
        for lineno, line in enumerate(fh, 1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except json.JSONDecodeError as err:
                raise CorpusError(f"{file}:{lineno}: not valid JSON ({err.msg})") from err
            if column not in row:
                raise CorpusError(f"{file}:{lineno}: no column {column!r} (have {sorted(row)})")
            if text := str(row[column]).strip():
                yield text


def _parquet_documents(file: Path, column: str) -> Iterator[str]:
    import pyarrow.parquet as pq

    try:
        pf = pq.ParquetFile(file)
    except Exception as err:  # pyarrow raises several unrelated types for a bad file
        raise CorpusError(f"{file}: not a readable parquet file ({err})") from err
    if column not in pf.schema_arrow.names:
        raise CorpusError(f"{file}: no column {column!r} (have {pf.schema_arrow.names})")
    for batch in pf.iter_batches(columns=[column], batch_size=1024):
        for text in batch.column(0).to_pylist():
            if text and str(text).strip():
                yield str(text).strip()


def _load_dataset(source: TextSource):
    """A dataset split: a local `save_to_disk` folder through `load_from_disk`, anything else streamed."""
    import datasets

    local = Path(source.dataset)
    if (local / "state.json").is_file() or (local / "dataset_dict.json").is_file():  # written by save_to_disk
        ds = datasets.load_from_disk(str(local))
        return ds[source.split] if isinstance(ds, datasets.DatasetDict) else ds
    return datasets.load_dataset(source.dataset, source.config, split=source.split, streaming=True)


def _dataset_documents(source: TextSource) -> Iterator[str]:
    """Stream a Hugging Face dataset split: from the hub (or its cache), a local data folder, or save_to_disk."""
    try:
        ds = _load_dataset(source)
    except Exception as err:  # datasets raises many types (connection, missing config, ...)
        raise CorpusError(
            f"{source.name}: dataset {source.describe()} cannot be loaded: {str(err).splitlines()[0]}"
        ) from err
    for row in ds:
        if source.column not in row:
            raise CorpusError(f"{source.name}: dataset {source.describe()} has no column {source.column!r}")
        if text := str(row[source.column] or "").strip():
            yield text


def is_wikitext(source: TextSource) -> bool:
    """Whether a source is WikiText by name (its dataset id or path mentions "wikitext"): rows are single lines."""
    return "wikitext" in (source.dataset or source.path or "").lower()


def wikitext_articles(rows: Iterable[str]) -> Iterator[str]:
    """Group WikiText's one-line rows into articles: a new article starts at each ` = Title = ` row.

    An article is its body rows joined by newlines; the title row and the ` = = Section = = ` heading rows are
    markup, not prose, and are left out. Rows before the first title form an article of their own.
    """
    body: list[str] = []
    for row in rows:
        line = row.strip()
        if _WIKITEXT_TITLE.match(line):
            if body:
                yield "\n".join(body)
            body = []
        elif line and not _WIKITEXT_HEADING.match(line):
            body.append(line)
    if body:
        yield "\n".join(body)

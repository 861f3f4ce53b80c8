"""Text sources: local .txt/.jsonl/.parquet files or Hugging Face datasets, read as documents.

`dataset` names a hub dataset, a local folder of data files (e.g. parquet), or a folder written by
`datasets.Dataset.save_to_disk` / `DatasetDict.save_to_disk` (read with `load_from_disk`, `split` picking
the split of a DatasetDict).

A *document* is one unit of text: a blank-line-separated block of a .txt file, one row's `column` of a
.jsonl/.parquet file or of a dataset split. Documents are streamed, never held all at once.

Local text is decoded strictly: a .txt or .jsonl file that is not valid in its `encoding` (default UTF-8) is refused
with the byte offset of the first bad byte, never read with replacement characters. A file that is not text is
refused too: any NUL character, or more than `MAX_CONTROL_SHARE` of control characters (other than tab, newline,
carriage return, form feed) among the first `SNIFF_CHARS` characters. `scan_source` reads a source as training
does, bounded by `SCAN_CHARS` characters and `SCAN_S` seconds, so that `validate` and `run` refuse before any write.

Example:
    >>> src = TextSource(name="plays", path="corpus.txt")
    >>> next(iter_documents(src))[:20]
    'ACT I. SCENE I. Elsin'
"""

from __future__ import annotations

import codecs
import dataclasses
import json
import logging
import re
import time
import unicodedata
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

from workers.errors import CorpusError

logger = logging.getLogger(__name__)

LOCAL_SUFFIXES = (".txt", ".jsonl", ".json", ".parquet")
SNIFF_CHARS = 65_536  # the characters of each text file whose share of control characters is checked
MAX_CONTROL_SHARE = 0.01  # more control characters than this (tab, newlines, form feed aside): not text
SCAN_CHARS = 64 * 2**20  # scan_source reads at most this many characters of a source's documents ...
SCAN_S = 10.0  # ... and for at most this many seconds; training reads the rest
_READ_BYTES = 1 << 20
_TEXT_CONTROLS = frozenset("\t\n\r\f\v")

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
    encoding: str | None = None  # of a local .txt/.jsonl file (None: UTF-8)

    def identity(self) -> dict:
        """The fields that name the source's content, for artifact names and cell keys (`encoding` only when set,
        so that sources without it keep the names they had before it existed)."""
        out = dataclasses.asdict(self)
        if out["encoding"] is None:
            del out["encoding"]
        return out

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
    files = local_files(source)
    if not files:
        raise CorpusError(f"{source.name}: {source.path} holds no {'/'.join(LOCAL_SUFFIXES)} files")


def iter_documents(source: TextSource) -> Iterator[str]:
    """Yield the non-empty documents of a source in a fixed order."""
    check_source(source)
    if source.path is None:
        yield from _dataset_documents(source)
        return
    for file in local_files(source):
        yield from _file_documents(file, source.column, source.encoding or "utf-8")


def scan_source(source: TextSource, max_chars: int = SCAN_CHARS, max_s: float = SCAN_S) -> int:
    """Read a source as training does (every file decoded and parsed, the column checked) until `max_chars`
    characters of documents or `max_s` seconds; the documents read (0: the source holds no text). Raises CorpusError
    naming the file and the line or byte offset at fault."""
    t0, chars, n = time.monotonic(), 0, 0
    for doc in iter_documents(source):
        n, chars = n + 1, chars + len(doc)
        if chars >= max_chars or time.monotonic() - t0 >= max_s:
            logger.info("%s: scanned %d documents (%d characters), the rest is read by training", source.name, n, chars)
            return n
    return n


def local_files(source: TextSource) -> list[Path]:
    """A local source's corpus files (those of LOCAL_SUFFIXES), in the order they are read."""
    path = Path(source.path)
    if path.is_dir():
        return sorted(p for p in path.rglob("*") if p.suffix in LOCAL_SUFFIXES and p.is_file())
    if path.suffix not in LOCAL_SUFFIXES:
        raise CorpusError(f"{source.name}: {source.path}: unsupported file type; use {', '.join(LOCAL_SUFFIXES)}")
    return [path]


def _file_documents(file: Path, column: str, encoding: str) -> Iterator[str]:
    if file.suffix == ".txt":
        yield from _text_blocks(file, encoding)
    elif file.suffix in (".jsonl", ".json"):
        yield from _jsonl_documents(file, column, encoding)
    else:
        yield from _parquet_documents(file, column)


def _bad_byte(file: Path, encoding: str) -> CorpusError:
    """The error for a file that does not decode: its first bad byte and that byte's offset in the file."""
    decoder = codecs.getincrementaldecoder(encoding)(errors="strict")
    fed = 0  # bytes given to the decoder so far
    with open(file, "rb") as fh:
        while raw := fh.read(_READ_BYTES):
            try:
                decoder.decode(raw)
            except UnicodeDecodeError as err:
                offset, byte = fed - len(decoder.getstate()[0]) + err.start, err.object[err.start]
                break
            fed += len(raw)
        else:
            offset, byte = fed - len(decoder.getstate()[0]), None  # a character cut short at the end of the file
    what = f"byte {byte:#04x} at offset {offset}" if byte is not None else f"truncated at offset {offset}"
    return CorpusError(
        f'{file}: not {encoding} text ({what}); give the source\'s encoding (e.g. encoding = "latin-1") '
        "or convert the file to UTF-8"
    )


def _lines(file: Path, encoding: str) -> Iterator[str]:
    """The file's lines, decoded strictly (universal newlines, as text mode reads them) and refused when the file is
    not text: a NUL character anywhere, or more than MAX_CONTROL_SHARE control characters in its first SNIFF_CHARS."""
    seen = controls = 0  # characters sniffed, control characters among them
    try:
        with open(file, encoding=encoding, errors="strict") as fh:
            for lineno, line in enumerate(fh, 1):
                if "\0" in line:
                    raise CorpusError(f"{file}:{lineno}: a NUL character: a binary file, not text")
                if seen < SNIFF_CHARS:
                    head = line[: SNIFF_CHARS - seen]
                    seen, controls = seen + len(head), controls + sum(map(_is_control, head))
                    if seen == SNIFF_CHARS:
                        _check_controls(file, controls, seen)
                yield line
    except UnicodeDecodeError:
        raise _bad_byte(file, encoding) from None
    if seen < SNIFF_CHARS:
        _check_controls(file, controls, seen)


def _is_control(ch: str) -> bool:
    return ch not in _TEXT_CONTROLS and unicodedata.category(ch) == "Cc"


def _check_controls(file: Path, controls: int, chars: int) -> None:
    if controls > MAX_CONTROL_SHARE * chars:
        raise CorpusError(
            f"{file}: {controls} control characters in its first {chars} ({controls / chars:.0%}, more than "
            f"{MAX_CONTROL_SHARE:.0%}): a binary file, not text"
        )


def _text_blocks(file: Path, encoding: str) -> Iterator[str]:
    """Blank-line-separated blocks of a text file, each joined into one document."""
    block: list[str] = []
    for line in _lines(file, encoding):
        if line.strip():
            block.append(line.rstrip("\n"))
        elif block:
            yield "\n".join(block)
            block = []
    if block:
        yield "\n".join(block)


def _jsonl_documents(file: Path, column: str, encoding: str) -> Iterator[str]:
    for lineno, line in enumerate(_lines(file, encoding), 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError as err:
            raise CorpusError(f"{file}:{lineno}: not valid JSON ({err.msg})") from err
        if not isinstance(row, dict):
            raise CorpusError(f"{file}:{lineno}: a JSON {type(row).__name__}, not an object with {column!r}")
        if column not in row:
            raise CorpusError(f"{file}:{lineno}: no column {column!r} (have {sorted(row)})")
        if not isinstance(row[column], str | None):
            raise CorpusError(f"{file}:{lineno}: column {column!r} is a {type(row[column]).__name__}, not text")
        if text := (row[column] or "").strip():
            yield text


def _parquet_documents(file: Path, column: str) -> Iterator[str]:
    import pyarrow as pa
    import pyarrow.parquet as pq

    try:
        pf = pq.ParquetFile(file)
    except Exception as err:  # pyarrow raises several unrelated types for a bad file
        raise CorpusError(f"{file}: not a readable parquet file ({err})") from err
    if column not in pf.schema_arrow.names:
        raise CorpusError(f"{file}: no column {column!r} (have {pf.schema_arrow.names})")
    kind = pf.schema_arrow.field(column).type
    if not (pa.types.is_string(kind) or pa.types.is_large_string(kind) or pa.types.is_string_view(kind)):
        raise CorpusError(f"{file}: column {column!r} holds {kind}, not text (strings)")
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

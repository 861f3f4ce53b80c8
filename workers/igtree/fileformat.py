"""The .igtree file: preamble | header JSON | pad to 64 | arrays (each 64-aligned); sha256 of the data in the header.

Arrays are written from chunk iterators, so a tree joined from partitions on disk is written without ever being
held whole; an in-memory tree is the one-chunk case of the same writer, hence the identical bytes.
"""

from __future__ import annotations

import hashlib
import json
import os
import struct
import tempfile
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from workers.errors import IBaseError

MAGIC = b"GSIGTREE"
FORMAT_VERSION = 2  # 2: nodes keep their runner-up classes (`d<d>.alt_*`); version 1 files read without them
READABLE_VERSIONS = (1, 2)
_PREAMBLE = struct.Struct("<8sII32s")  # magic, format version, header length, sha256 of the header
_ALIGN = 64


@dataclass(frozen=True)
class Column:
    """One array of a file: its name, dtype, length and a function giving its data in chunks, in order."""

    name: str
    dtype: np.dtype
    length: int
    chunks: Callable[[], Iterable[np.ndarray]]


def _aligned(n: int) -> int:
    return -(-n // _ALIGN) * _ALIGN


def _header(meta: dict, specs: list[dict], data_bytes: int, digest_hex: str) -> bytes:
    return json.dumps(
        {"meta": meta, "arrays": specs, "data_bytes": data_bytes, "data_sha256": digest_hex}, sort_keys=True
    ).encode()


def write_columns(path: Path, columns: list[Column], meta: dict) -> int:
    """Serialise columns + meta to path atomically (tmp + os.replace); returns bytes written."""
    specs, offset = [], 0
    for col in columns:
        offset = _aligned(offset)
        specs.append({"name": col.name, "dtype": np.dtype(col.dtype).str, "shape": [int(col.length)], "offset": offset})
        offset += int(col.length) * np.dtype(col.dtype).itemsize
    placeholder = _header(meta, specs, offset, "0" * 64)  # the digest is fixed-length: the header's size is known
    data_start = _aligned(_PREAMBLE.size + len(placeholder))
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=path.name, suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(b"\0" * data_start)
            digest = hashlib.sha256()
            for spec, col in zip(specs, columns):
                fh.write(b"\0" * (data_start + spec["offset"] - fh.tell()))
                written = 0
                for chunk in col.chunks():
                    raw = np.ascontiguousarray(chunk, dtype=col.dtype).tobytes()
                    digest.update(raw)
                    fh.write(raw)
                    written += len(raw)
                if written != col.length * np.dtype(col.dtype).itemsize:
                    raise IBaseError(f"{path}: column {col.name} gave {written} bytes, expected {col.length} values")
            header = _header(meta, specs, offset, digest.hexdigest())
            fh.seek(0)
            fh.write(_PREAMBLE.pack(MAGIC, FORMAT_VERSION, len(header), hashlib.sha256(header).digest()))
            fh.write(header)
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    return data_start + offset


def write_file(path: Path, arrays: dict[str, np.ndarray], meta: dict) -> int:
    """Serialise in-memory arrays + meta to path atomically; returns bytes written."""
    columns = [Column(name, a.dtype, len(a), lambda a=a: [a]) for name, a in arrays.items()]
    return write_columns(path, columns, meta)


def read_file(path: Path, verify: bool) -> tuple[dict[str, np.ndarray], dict]:
    """Parse and check a file written by write_columns; arrays are read-only memory maps."""
    try:
        size = path.stat().st_size
        with open(path, "rb") as fh:
            pre = fh.read(_PREAMBLE.size)
            if len(pre) < _PREAMBLE.size:
                raise IBaseError(f"{path}: truncated ({size} bytes); not an instance base")
            magic, version, hlen, hsha = _PREAMBLE.unpack(pre)
            if magic != MAGIC:
                raise IBaseError(f"{path}: not a greenspec instance base (bad magic {magic!r})")
            if version not in READABLE_VERSIONS:
                raise IBaseError(
                    f"{path}: format version {version}; this greenspec reads versions "
                    f"{', '.join(map(str, READABLE_VERSIONS))}; retrain it"
                )
            header = fh.read(hlen)
    except OSError as err:
        raise IBaseError(f"{path}: cannot be read ({err.strerror})") from err
    if len(header) != hlen or hashlib.sha256(header).digest() != hsha:
        raise IBaseError(f"{path}: header is truncated or corrupt (checksum mismatch)")
    head = json.loads(header)
    data_start = _aligned(_PREAMBLE.size + hlen)
    if size != data_start + head["data_bytes"]:
        raise IBaseError(f"{path}: truncated or padded ({size} bytes, expected {data_start + head['data_bytes']})")
    mm = (
        np.memmap(path, dtype=np.uint8, mode="r", offset=data_start, shape=(head["data_bytes"],))
        if head["data_bytes"]
        else np.zeros(0, dtype=np.uint8)
    )  # a fully pruned tree holds no node
    arrays, digest = {}, hashlib.sha256()
    for spec in head["arrays"]:
        dt = np.dtype(spec["dtype"])
        n = int(np.prod(spec["shape"]))
        raw = mm[spec["offset"] : spec["offset"] + n * dt.itemsize]
        if verify:
            digest.update(raw)
        arrays[spec["name"]] = raw.view(dt).reshape(spec["shape"])
    if verify and digest.hexdigest() != head["data_sha256"]:
        raise IBaseError(f"{path}: data checksum mismatch; the file is corrupt, retrain or copy it again")
    return arrays, head["meta"]

"""Small file helpers shared by the artifact builders (instance bases, datastores, converted models), the caches and
benchmarks."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

BLOCK = 1 << 20  # read files 1 MiB at a time: a 10^9-token artifact never sits in memory whole


def file_sha256(path: str | os.PathLike, prefix: bytes = b"") -> str:
    """sha256 (hex) of `prefix` followed by a file's bytes, read in 1 MiB blocks.

    >>> import tempfile; f = tempfile.NamedTemporaryFile(delete=False); _ = f.write(b"abc"); f.close()
    >>> file_sha256(f.name)[:16]
    'ba7816bf8f01cfea'
    """
    digest = hashlib.sha256(prefix)
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(BLOCK), b""):
            digest.update(block)
    return digest.hexdigest()


def cache_dir() -> Path:
    """Where greenspec caches derived files (tokenizer copies, demo models): `$GREENSPEC_CACHE` or ~/.cache/greenspec."""
    root = os.environ.get("GREENSPEC_CACHE") or os.path.join(os.path.expanduser("~"), ".cache", "greenspec")
    path = Path(root)
    path.mkdir(parents=True, exist_ok=True)
    return path

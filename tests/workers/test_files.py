"""The one file-hash helper every artifact and the converted-model cache key use."""

from __future__ import annotations

import hashlib

from workers.files import BLOCK, file_sha256


def test_file_sha256_equals_hashlib_across_block_edges(tmp_path):
    data = bytes(range(256)) * (BLOCK // 256 * 2 + 3)  # two whole blocks and a tail
    path = tmp_path / "f.bin"
    path.write_bytes(data)
    assert file_sha256(path) == hashlib.sha256(data).hexdigest()
    assert file_sha256(path, prefix=b"1\n") == hashlib.sha256(b"1\n" + data).hexdigest()
    (tmp_path / "empty").write_bytes(b"")
    assert file_sha256(tmp_path / "empty") == hashlib.sha256(b"").hexdigest()

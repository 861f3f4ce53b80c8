"""Artifacts between Ray nodes (`workers.training.ray_tasks`) on the session's real local Ray: a file already here is used as
it is, a copy is checked by sha256 before it is put in place, chunk by chunk. (Two real nodes with separate disks:
tests/orchestrator/run/test_cluster.py.)"""

from __future__ import annotations

import os

import pytest

from workers.files import file_sha256
from workers.training import ray_tasks


def test_a_file_already_here_is_not_copied(ray_local, tmp_path):
    path = tmp_path / "a.igtree"
    path.write_bytes(b"tree" * 1000)
    assert ray_tasks.ensure_local(str(path)) == "local"
    assert ray_tasks.ensure_local(str(path), file_sha256(path)) == "local"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.igtree"]


def test_a_file_no_node_holds_is_missing(ray_local, tmp_path):
    assert ray_tasks.ensure_local(str(tmp_path / "gone.igtree")) == "missing"
    assert ray_tasks.find_holder(str(tmp_path / "gone.igtree")) is None


def test_a_copy_goes_in_chunks_and_is_checked_by_sha256(ray_local, tmp_path, monkeypatch):
    path = tmp_path / "b.igtree"
    data = os.urandom(10_000)
    path.write_bytes(data)
    held = ray_tasks.find_holder(str(path))
    assert held is not None and held.size == 10_000 and held.sha256 == file_sha256(path)
    monkeypatch.setattr(ray_tasks, "CHUNK_BYTES", 999)  # 11 chunks, 4 in flight
    ray_tasks.fetch(str(path), held)
    assert path.read_bytes() == data
    bad = ray_tasks.Held(held.node_id, held.size, "0" * 64)
    with pytest.raises(OSError, match="expected 000000000000"):
        ray_tasks.fetch(str(path), bad)
    assert path.read_bytes() == data and sorted(p.name for p in tmp_path.iterdir()) == ["b.igtree"]


def test_no_accelerator_elsewhere_means_nothing_to_replicate(ray_local, tmp_path):
    path = tmp_path / "c.igtree"
    path.write_bytes(b"c")
    assert ray_tasks.accelerator_nodes() == [ray_tasks.this_node()]  # the session Ray is one node with it
    assert ray_tasks.replicate_to_accelerator(str(path), file_sha256(path)) == []

"""The tests never write into the user's greenspec cache: the test process and every Ray worker use the tests' own
cache, and a driver passes its GREENSPEC_CACHE to the workers of a cluster it joins."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from orchestrator.run.ray_startup import worker_runtime_env
from tests.conftest import TEST_CACHE
from workers.files import cache_dir

USER_CACHE = Path.home() / ".cache" / "greenspec"


@pytest.mark.usefixtures("ray_local")
def test_a_ray_task_sees_the_tests_cache():
    import ray

    @ray.remote(num_cpus=0)
    def where() -> tuple[str | None, str]:
        from workers.files import cache_dir

        return os.environ.get("GREENSPEC_CACHE"), str(cache_dir())

    env, seen = ray.get(where.remote())
    assert env == TEST_CACHE and Path(seen) == cache_dir() == Path(TEST_CACHE)
    assert Path(seen) != USER_CACHE


def test_the_driver_hands_its_settings_and_setup_hook_to_the_workers(monkeypatch, tmp_path):
    for k in [k for k in os.environ if k.startswith("GREENSPEC_")]:
        monkeypatch.delenv(k)
    assert worker_runtime_env() is None
    monkeypatch.setenv("GREENSPEC_CACHE", str(tmp_path))
    monkeypatch.setenv("GREENSPEC_LEASE_S", "")  # empty: not a setting
    monkeypatch.setenv("OTHER_CACHE", "x")  # not greenspec's
    assert worker_runtime_env() == {"env_vars": {"GREENSPEC_CACHE": str(tmp_path)}}
    monkeypatch.setenv("GREENSPEC_WORKER_SETUP", "tests.faults.install")
    assert worker_runtime_env() == {
        "env_vars": {"GREENSPEC_CACHE": str(tmp_path), "GREENSPEC_WORKER_SETUP": "tests.faults.install"},
        "worker_process_setup_hook": "tests.faults.install",
    }

"""Session-wide fixtures: one real local Ray for the whole run, a fresh greenspec cache per session."""

from __future__ import annotations

import os

import pytest

os.environ.setdefault("RAY_AUTH_MODE", "disabled")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")


SLOW_FIXTURES = {"ray_local", "tiny_verifier", "write_spec"}  # a real Ray, a trained model, a real sweep


def pytest_collection_modifyitems(items):
    """Tests that start Ray or train the driver tests' verifier are `slow`, marked or not (`-m "not slow"`)."""
    for item in items:
        if SLOW_FIXTURES & set(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.slow)


@pytest.fixture(scope="session")
def ray_local():
    """A real local Ray with 2 CPUs and the single `accelerator` resource, shared by every test."""
    import ray

    for attempt in range(3):  # Ray gives its raylet 30 s to register: on a loaded machine that can run out
        if ray.is_initialized():
            break
        try:
            ray.init(address="local", num_cpus=2, resources={"accelerator": 1}, include_dashboard=False, log_to_driver=False,
                     configure_logging=False)
        except Exception as err:  # Ray raises a bare Exception for this timeout
            if "timed out during startup" not in str(err) or attempt == 2:
                raise
            ray.shutdown()
    yield ray
    ray.shutdown()

"""Session-wide fixtures: one real local Ray for the whole run, a fresh greenspec cache per session."""

from __future__ import annotations

import os

import pytest

os.environ.setdefault("RAY_AUTH_MODE", "disabled")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")


@pytest.fixture(scope="session")
def ray_local():
    """A real local Ray with 2 CPUs and the single `accelerator` resource, shared by every test."""
    import ray

    if not ray.is_initialized():
        ray.init(
            num_cpus=2,
            resources={"accelerator": 1},
            include_dashboard=False,
            log_to_driver=False,
            configure_logging=False,
        )
    yield ray
    ray.shutdown()

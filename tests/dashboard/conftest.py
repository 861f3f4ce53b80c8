"""Dashboard fixtures: one populated SQLite database per session (populate() loads the real tokenizer)."""

from __future__ import annotations

import pytest

from tests.dashboard.populate import populate


@pytest.fixture(scope="session")
def fixture_db(tmp_path_factory) -> str:
    """URL of a database holding the finished fixture experiment."""
    url = f"sqlite:///{tmp_path_factory.mktemp('db') / 'fixture.db'}"
    populate(url)
    return url


@pytest.fixture(scope="session")
def live_db(tmp_path_factory) -> str:
    """URL of a database whose sweep still has running and pending cells."""
    url = f"sqlite:///{tmp_path_factory.mktemp('live') / 'live.db'}"
    populate(url, live=True)
    return url

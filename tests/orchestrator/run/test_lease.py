"""`orchestrator.run.lease`: a dead driver of this host is seen to be dead and its lease taken at once;
a live one, or one on another host, keeps it."""

from __future__ import annotations

import logging
import os
import socket
import subprocess
import sys
import time

import pytest

from orchestrator.run.lease import ExperimentLease, LeaseHeld, holder_is_dead, holder_name
from storage import store
from storage.db import open_db
from storage.models import Lease

HOST = socket.gethostname()


def dead_pid() -> int:
    """The pid of a process that has exited (and been reaped)."""
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def test_holder_liveness():
    now = time.time()
    assert not holder_is_dead(holder_name(HOST, os.getpid(), now))  # this very process
    assert holder_is_dead(holder_name(HOST, dead_pid(), now))  # gone
    assert holder_is_dead(holder_name(HOST, os.getpid(), now - 10 * 86400))  # the pid now names a later process
    assert not holder_is_dead(holder_name("elsewhere", dead_pid(), now))  # another host: cannot tell
    assert not holder_is_dead("another driver")  # a name we did not write


@pytest.fixture
def Session(tmp_path):
    engine, factory = open_db(f"sqlite:///{tmp_path / 'g.db'}")
    yield factory
    engine.dispose()


def hold(Session, holder: str, ttl_s: float = 3600) -> None:
    """A lease row as a driver would leave it (valid for an hour: only liveness can free it)."""
    with Session() as s:
        assert store.acquire_lease(s, "e", holder, ttl_s, time.time()) is None
        s.commit()


def current(Session) -> str:
    with Session() as s:
        return s.get(Lease, "e").holder


def test_a_dead_holders_lease_is_taken_at_once_and_said(Session, caplog):
    dead = holder_name(HOST, dead_pid(), time.time())
    hold(Session, dead)
    t0 = time.monotonic()
    with caplog.at_level(logging.WARNING, logger="orchestrator.run.lease"), ExperimentLease(Session, "e") as lease:
        assert current(Session) == lease.holder
    assert time.monotonic() - t0 < 5
    said = [r.getMessage() for r in caplog.records if "took over" in r.getMessage()]
    assert len(said) == 1 and dead in said[0]


def test_a_live_or_remote_holder_keeps_it(Session):
    for holder in (holder_name(HOST, os.getpid(), time.time() - 1), holder_name("elsewhere", dead_pid(), time.time())):
        hold(Session, holder)
        with pytest.raises(LeaseHeld, match="--wait"):
            ExperimentLease(Session, "e").__enter__()
        assert current(Session) == holder
        with Session() as s:
            store.release_lease(s, "e", holder)
            s.commit()

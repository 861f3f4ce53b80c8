"""One driver per experiment: the experiment's lease, held by a driver while it runs and renewed by a heartbeat.

A second driver refuses with the holder's name, or waits (`wait=True`). The holder is named
`host:pid:started` (started: when the lease was first asked for, UTC, milliseconds). A holder on this host whose
process is gone, or whose pid now belongs to a process started after the lease, is dead: the next driver takes
its lease at once and says so. A holder on another host cannot be checked; its lease lapses after `ttl_s`
without renewal (a kill -9'd driver elsewhere).

Example:
    >>> holder_is_dead("myhost:4242:2026-01-01T10:00:00.000Z", host="myhost")   # no process 4242 here
    True
"""

from __future__ import annotations

import calendar
import logging
import os
import re
import socket
import threading
import time

import psutil

from orchestrator.run.options import Sessions
from storage import store
from workers.errors import GreenspecError

logger = logging.getLogger(__name__)

LEASE_S = 30.0  # a dead driver's lease elsewhere lapses after this long (env GREENSPEC_LEASE_S; renewed every 1/6)
HOLDER = re.compile(r"^(?P<host>.+):(?P<pid>\d+):(?P<started>\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)\.(?P<ms>\d{3})Z$")
CLOCK_SLACK_S = 1.0  # a process's start time is read in clock ticks; a reused pid starts well after the lease


class LeaseHeld(GreenspecError):
    """Another driver is running this experiment."""


class LeaseLost(GreenspecError):
    """This driver's lease lapsed and another driver took the experiment."""


def holder_name(host: str, pid: int, now_s: float) -> str:
    """`host:pid:YYYY-MM-DDTHH:MM:SS.mmmZ`."""
    return (
        f"{host}:{pid}:" + time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(now_s)) + f".{int(now_s * 1000) % 1000:03d}Z"
    )


def holder_is_dead(holder: str, host: str | None = None) -> bool:
    """Whether a lease holder is a driver of this host that no longer runs: its pid is gone, or belongs to a process
    started after the lease was taken (the pid was reused). False for another host's driver or an unknown name."""
    m = HOLDER.match(holder)
    if m is None or m["host"] != (host or socket.gethostname()):
        return False
    started_s = calendar.timegm(time.strptime(m["started"], "%Y-%m-%dT%H:%M:%S")) + int(m["ms"]) / 1000
    try:
        proc = psutil.Process(int(m["pid"]))
        return proc.status() == psutil.STATUS_ZOMBIE or proc.create_time() > started_s + CLOCK_SLACK_S
    except psutil.NoSuchProcess:
        return True
    except psutil.Error:  # it exists but cannot be inspected (another user's): alive, as far as we can tell
        return False


class ExperimentLease:
    """The experiment's lease, held while the `with` block runs and renewed by a heartbeat thread."""

    def __init__(self, Session: Sessions, experiment: str, wait: bool = False, ttl_s: float | None = None):
        self.Session, self.experiment, self.wait = Session, experiment, wait
        self.ttl_s = ttl_s or float(os.environ.get("GREENSPEC_LEASE_S", LEASE_S))
        self.holder = holder_name(socket.gethostname(), os.getpid(), time.time())
        self.lost = threading.Event()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._heartbeat, name="greenspec-lease", daemon=True)

    def _try(self) -> str | None:
        with self.Session() as s:
            holder = store.acquire_lease(s, self.experiment, self.holder, self.ttl_s, time.time())
            s.commit()
        return holder

    def _take_over(self, dead: str) -> bool:
        """Take a dead holder's lease (False when it changed hands meanwhile)."""
        with self.Session() as s:
            took = store.take_over_lease(s, self.experiment, dead, self.holder, self.ttl_s, time.time())
            s.commit()
        if took:
            logger.warning(
                "experiment %s: took over the lease of driver %s, which is no longer running", self.experiment, dead
            )
        return took

    def __enter__(self) -> ExperimentLease:
        waiting_for = None
        while (holder := self._try()) is not None:
            if holder_is_dead(holder) and self._take_over(holder):
                break
            if not self.wait:
                raise LeaseHeld(
                    f"experiment {self.experiment!r} is being run by another driver ({holder}); "
                    "wait for it to finish, or pass --wait"
                )
            if holder != waiting_for:
                logger.warning("experiment %s is being run by %s; waiting for it", self.experiment, holder)
                waiting_for = holder
            time.sleep(min(2.0, self.ttl_s / 6))
        self._thread.start()
        return self

    def _heartbeat(self) -> None:
        while not self._stop.wait(self.ttl_s / 6):
            try:
                with self.Session() as s:
                    ours = store.renew_lease(s, self.experiment, self.holder, self.ttl_s, time.time())
                    s.commit()
            except Exception:  # a busy or full database: try again at the next beat, the lease is still ours
                logger.debug("lease renewal failed; retrying at the next beat", exc_info=True)
                continue
            if not ours:
                self.lost.set()
                return

    def check(self) -> None:
        """Raise when the lease was lost (the driver stalled past its expiry and another driver took over)."""
        if self.lost.is_set():
            raise LeaseLost(
                f"experiment {self.experiment!r}: this driver's lease lapsed and another driver took "
                "the experiment over; stopping"
            )

    def __exit__(self, *exc) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join()
        try:
            with self.Session() as s:
                store.release_lease(s, self.experiment, self.holder)
                s.commit()
        except Exception:  # e.g. a full disk: the lease lapses by itself after ttl_s
            logger.info("could not release the lease of %s; it lapses in %.0f s", self.experiment, self.ttl_s)

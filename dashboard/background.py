"""Slow work off a page's critical path: computed once per data version in a worker thread; the page shows the
newest finished result (or a note) meanwhile and polls until the new one is ready.

Example:
    >>> value, busy = latest(("table5", url, exp_id), version, lambda: expensive(url, exp_id))
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Hashable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import streamlit as st

logger = logging.getLogger(__name__)


@dataclass
class Slot:
    """The newest finished value of one computation and the run in flight (mutable, guarded by Slots.lock)."""

    value: Any = None
    value_version: Any = None
    future: Future | None = None
    future_version: Any = None
    error: str | None = None


@dataclass
class Slots:
    """Every slot of this server process, one worker thread for all of them."""

    lock: threading.Lock
    slots: dict
    pool: ThreadPoolExecutor


@st.cache_resource(show_spinner=False)
def _slots() -> Slots:
    return Slots(threading.Lock(), {}, ThreadPoolExecutor(max_workers=1, thread_name_prefix="greenspec-bg"))


def latest(key: Hashable, version: Hashable, compute: Callable[[], Any]) -> tuple[Any, bool]:
    """(newest finished value or None, whether a computation for `version` is still running); starts one if needed."""
    state = _slots()
    with state.lock:
        slot = state.slots.setdefault(key, Slot())
        if slot.future is not None and slot.future.done():
            _collect(slot)
        if slot.value_version != version and slot.future is None and slot.error is None:
            slot.future, slot.future_version = state.pool.submit(compute), version
        return slot.value, slot.future is not None


def error(key: Hashable) -> str | None:
    """The last computation's error for `key`, if it failed."""
    slot = _slots().slots.get(key)
    return slot.error if slot is not None else None


def _collect(slot: Slot) -> None:
    """Move a finished run's result into the slot (a failure is kept as a message, not raised into the page)."""
    future, slot.future = slot.future, None
    try:
        slot.value, slot.value_version, slot.error = future.result(), slot.future_version, None
    except Exception as err:  # noqa: BLE001 - a worker-thread boundary: recorded and shown, never re-run in a loop
        logger.exception("background computation failed")
        slot.error = f"{type(err).__name__}: {err}"

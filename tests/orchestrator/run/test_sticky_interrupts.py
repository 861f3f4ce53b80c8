"""Ctrl-C that Python swallows (raised inside a `__del__` or a gc callback, where it only prints "Exception ignored")
still stops the run: the interrupt stays pending until a handler takes it."""

from __future__ import annotations

import gc
import os
import signal
import time

import pytest

from orchestrator.run.ray_startup import check_interrupt, interrupt_handled, interrupt_pending, sticky_interrupts


class InterruptedWhileCollected:
    def __del__(self):
        os.kill(os.getpid(), signal.SIGINT)
        for _ in range(1000):  # the handler runs at the next bytecode boundary, inside this __del__
            time.sleep(0.001)


def test_an_interrupt_swallowed_in_a_finalizer_is_raised_again_at_the_next_check():
    before = signal.getsignal(signal.SIGINT)  # Python's default, or SIG_IGN where the suite runs in the background
    with sticky_interrupts(signal.SIGINT):
        obj = InterruptedWhileCollected()
        del obj  # the KeyboardInterrupt is raised in __del__ and ignored by Python
        gc.collect()
        assert interrupt_pending()
        with pytest.raises(KeyboardInterrupt):
            check_interrupt()
        assert interrupt_pending()  # until a handler takes it
        interrupt_handled()
        check_interrupt()  # nothing pending: returns
    assert signal.getsignal(signal.SIGINT) is before  # the handler it found is back


def test_an_interrupt_that_propagates_is_raised_once_and_taken_by_its_handler():
    with sticky_interrupts(signal.SIGINT):
        with pytest.raises(KeyboardInterrupt):
            os.kill(os.getpid(), signal.SIGINT)
            time.sleep(5)
        interrupt_handled()
        assert not interrupt_pending()

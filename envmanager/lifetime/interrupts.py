"""Holding Ctrl-C while the workers are being stopped, so that stopping them is never cut short.

Closing a manager is where a user presses Ctrl-C the most (a close that waits for a hung
worker); cut short there, the workers and their helpers would outlive ``close()``, the
``max_concurrency`` semaphore would stay, and no timers would be written.  So the part of a
close that ends processes and writes the dump runs with SIGINT held: a Ctrl-C that comes
meanwhile is only noted, and delivered, to whatever handler the program had, once it is done
(a second or so).  Not by masking the signal: another thread of the program could still take
it.  Only the main thread can set handlers; elsewhere Ctrl-C cannot land in this thread anyway.
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager

__all__ = ["interrupts_held"]


@contextmanager
def interrupts_held() -> Iterator[None]:
    """Note a SIGINT that comes during the block; deliver it when the block ends."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    noted: list[int] = []
    previous = signal.signal(signal.SIGINT, lambda number, frame: noted.append(number))
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)
        if noted:
            signal.raise_signal(signal.SIGINT)

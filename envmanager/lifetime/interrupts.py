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

import multiprocessing.forkserver
import multiprocessing.resource_tracker
import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager

__all__ = ["interrupts_held", "starting_without_interrupts"]


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


@contextmanager
def starting_without_interrupts(start_method: str) -> Iterator[None]:
    """Start processes (of ``start_method``) in this block that must never get the trainer's Ctrl-C.

    They begin with SIGINT blocked (fork and exec keep the signal mask) until they ignore it
    themselves: a Ctrl-C at the terminal goes to the trainer's whole process group, which a
    starting process is still in, and would print its traceback.  The trainer's own Ctrl-C
    is held until the block has recorded what it started, so none is left unrecorded.

    The helper processes ``multiprocessing`` starts on first use are started before: the
    resource tracker (starting it unblocks SIGINT in the calling thread, which would undo the
    block), and the fork server, unblocked, so the program's own forkserver processes still get
    Ctrl-C (and so, in their first moments, do the workers it forks).
    """
    if start_method in ("spawn", "forkserver"):
        multiprocessing.resource_tracker.ensure_running()
    if start_method == "forkserver":
        multiprocessing.forkserver.ensure_running()
    with interrupts_held():
        signal_mask = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
        try:
            yield
        finally:
            signal.pthread_sigmask(signal.SIG_SETMASK, signal_mask)

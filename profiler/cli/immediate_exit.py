"""``os._exit`` in a program under ``rlprof run``: the run still ends with its files and analysis.

Some trainers end with ``os._exit``: to skip threads that would hang the interpreter's exit (a
logger's, a simulator's), or from a watchdog thread that gives up on a stuck run. Under
``python`` the process ends there, running no ``finally`` block and no exit handler. Under
``rlprof run`` it ended the same way, before rlprof wrote anything, and no line said so.

While the program runs, :func:`os_exit_ends_the_run` puts a function in front of ``os._exit`` in
the trainer's process: it ends the run first (the last timers, the files, the analysis: a
:class:`RunEnding`), then calls the real ``os._exit`` with the program's code. The program's own
code after the call still does not run, nor its ``finally`` blocks or exit handlers, as under
``python``. A process forked from the trainer (``multiprocessing``'s fork workers end with
``os._exit``) exits at once, as it would without rlprof.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Generic, TypeVar

__all__ = ["RunEnding", "os_exit_ends_the_run"]

End = TypeVar("End")


class RunEnding(Generic[End]):
    """The end of the run, done once, by whichever asks first: the program's return (or error,
    or signal) in the main thread, or an ``os._exit`` in any thread of the program. Who asks while
    it is being done waits for it, and gets what it returned."""

    def __init__(self, finish: Callable[[End], End]) -> None:
        self._finish = finish
        self._lock = threading.Lock()
        self._ended: End | None = None

    def __call__(self, end: End) -> End:
        with self._lock:
            if self._ended is None:
                self._ended = self._finish(end)
            return self._ended


@contextmanager
def os_exit_ends_the_run(end_the_run: Callable[[int], object]) -> Iterator[None]:
    """While the ``with`` block runs, ``os._exit(code)`` in this process first calls
    ``end_the_run(code)``, which should tell what goes wrong rather than raise: the process ends
    with ``code`` all the same. A code that is not a whole number goes to the real ``os._exit``
    untouched, which refuses it as under ``python``."""
    real_exit = os._exit
    trainer_pid = os.getpid()

    def exit_after_the_run_ends(code: int) -> None:
        if isinstance(code, int) and os.getpid() == trainer_pid:
            try:
                end_the_run(code)
            finally:
                real_exit(code)
        real_exit(code)

    exit_after_the_run_ends.__doc__ = real_exit.__doc__
    os._exit = exit_after_the_run_ends
    try:
        yield
    finally:
        if os._exit is exit_after_the_run_ends:
            os._exit = real_exit

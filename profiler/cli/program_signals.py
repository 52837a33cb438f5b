"""How SIGTERM and SIGINT reach a program under ``rlprof run``, and what it forks.

Under ``python``, SIGTERM ends a program at once, with no ``finally`` block run. Under ``rlprof
run`` it raises :class:`Terminated` in the program instead, so the timers are kept and written, and
rlprof then ends by the same signal (:func:`sigterm_raises_in_the_program`). A process the program
forks gets the program's own handler back. While rlprof writes its files, a second Ctrl-C or
SIGTERM waits until they are complete (:func:`signals_held`).
"""

from __future__ import annotations

import os
import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

__all__ = ["Terminated", "signals_held", "sigterm_raises_in_the_program"]


class Terminated(BaseException):
    """Raised in the program by SIGTERM, so its ``finally`` blocks run and the timers are kept.

    A ``BaseException`` like ``KeyboardInterrupt``: a program's ``except Exception`` does not
    swallow it.
    """

    def __init__(self, signal_number: int) -> None:
        super().__init__(f"terminated by signal {signal_number}")
        self.signal_number = signal_number


def _terminate(signal_number: int, frame: Any) -> None:
    raise Terminated(signal_number)


_programs_sigterm: list[Any] = []
"""The SIGTERM handler the program had before :func:`sigterm_raises_in_the_program` put
:func:`_terminate` in its place (one while that holds, none otherwise)."""


@contextmanager
def sigterm_raises_in_the_program() -> Iterator[None]:
    """While the ``with`` block runs, SIGTERM raises :class:`Terminated` wherever the main thread
    is; the program's own handler is put back after."""
    _programs_sigterm.append(signal.signal(signal.SIGTERM, _terminate))
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, _programs_sigterm.pop())


def _give_a_forked_child_the_programs_sigterm() -> None:
    """A process the program forks runs the program's code, not ``rlprof run``'s, and must end on
    SIGTERM as under ``python``. With :func:`_terminate` inherited, a worker that
    ``multiprocessing`` terminates (``Process.terminate()``, or a daemon at the program's exit)
    printed a traceback of rlprof's and ended with exit code 1 instead of -15. A handler the
    program set itself during the run is left as it is."""
    if _programs_sigterm and signal.getsignal(signal.SIGTERM) is _terminate:
        signal.signal(signal.SIGTERM, _programs_sigterm[-1])


os.register_at_fork(after_in_child=_give_a_forked_child_the_programs_sigterm)


@contextmanager
def signals_held() -> Iterator[list[int]]:
    """Hold SIGINT and SIGTERM while the files are written: a second Ctrl-C waits until they are.

    A signal that comes meanwhile is only noted in the list given to the ``with`` block; the
    run then ends by it once the files are complete. (Masking the signals would not do: another
    thread of the program could still take them.) Only the main thread can set handlers: where
    another thread ends the run (its ``os._exit``), the signals stay the program's.
    """
    noted: list[int] = []
    if threading.current_thread() is not threading.main_thread():
        yield noted
        return
    previous = {number: signal.signal(number, lambda number, frame: noted.append(number))
                for number in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield noted
    finally:
        for number, handler in previous.items():
            signal.signal(number, handler)

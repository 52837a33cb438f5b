"""A background thread that does one piece of work every so many seconds, until stopped.

``profiler.control.controls`` runs its continuous dump and memory sampling on one: the work runs beside
the trainer, never inside a timer block, and a stop takes effect at once rather than at the end
of the current period. The thread is a daemon, so it never keeps a finished program alive; the
end-of-run dump (``profiler.control.end_of_run``) stops it before writing the last files.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

__all__ = ["PeriodicThread"]


class PeriodicThread:
    """Calls ``work()`` every ``period`` seconds on a daemon thread named ``name``.

    An exception from ``work`` is handed to ``on_error`` and the thread carries on: one full disk
    must not end the dumps that follow. ``work`` never runs twice at once.
    """

    def __init__(
        self,
        name: str,
        period: float,
        work: Callable[[], None],
        on_error: Callable[[BaseException], None],
    ) -> None:
        self.period = period
        self._work = work
        self._on_error = on_error
        self._stopping = threading.Event()
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stopping.wait(self.period):
            try:
                self._work()
            except Exception as error:  # noqa: BLE001 - reported, and the next period tries again
                self._on_error(error)

    def stop(self, timeout: float = 30.0) -> None:
        """Ask the thread to end and wait (up to ``timeout`` seconds) for its current work.

        Called from the thread itself (a dump that stops dumping), it only asks.
        """
        self._stopping.set()
        if threading.current_thread() is not self._thread:
            self._thread.join(timeout)

    def is_alive(self) -> bool:
        return self._thread.is_alive()

"""A descriptor that becomes readable when a worker process exits, whatever its children hold.

``multiprocessing``'s ``process.sentinel`` is the reading end of a pipe whose writing end the
worker holds (under fork and spawn): it fires when the last copy of that writing end closes.
A process the worker forks without exec (``os.fork``, a ``multiprocessing`` fork started by an
env, a simulator launched from a fork) holds a copy, so a killed worker's sentinel stays silent
until that grandchild exits too, and every wait on it (the trainer's poll, the death watch)
would wait that long.

On Linux (5.3 and later, Python 3.9 and later) ``os.pidfd_open`` gives a descriptor that refers
to the process itself: it becomes readable when that process exits, and no other process can
keep it from doing so.  Where it is unavailable (another system, an older kernel, a sandbox
that forbids the call) the sentinel is used, as before.  Under forkserver the sentinel is the
forkserver's report of the worker's exit, which no grandchild holds either; a pidfd is still
preferred there, as it fires as soon as the worker exits.
"""

from __future__ import annotations

import os
from typing import Any

__all__ = ["ExitDescriptor"]


class ExitDescriptor:
    """Readable once ``process`` has exited: its pidfd where the system gives one, else its sentinel.

    ``fileno`` is what a poll or ``multiprocessing.connection.wait`` watches.  Call
    :meth:`close` once the process is reaped (a pidfd is this object's own; the sentinel is
    ``multiprocessing``'s and is left alone).
    """

    __slots__ = ("fileno", "_owned")

    def __init__(self, process: Any) -> None:
        pidfd = _open_pidfd(process.pid)
        self._owned = pidfd is not None
        self.fileno: int = process.sentinel if pidfd is None else pidfd

    def close(self) -> None:
        if self._owned:
            self._owned = False
            os.close(self.fileno)


def _open_pidfd(pid: int) -> int | None:
    """``pid``'s pidfd, or None where the system gives none (or the process is already reaped:
    by the forkserver, whose sentinel then reports it)."""
    pidfd_open = getattr(os, "pidfd_open", None)
    if pidfd_open is None:
        return None
    try:
        return pidfd_open(pid)
    except OSError:  # ENOSYS (kernel < 5.3), EPERM (seccomp), ESRCH (already reaped)
        return None

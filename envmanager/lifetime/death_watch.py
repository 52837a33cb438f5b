"""The trainer's side of a worker's death: its process group ends the moment the worker does.

A worker killed from outside (the OOM killer picks it, a user's ``kill -9``) or crashing
cannot end its own process group, so the helper processes its envs started live on.  The
trainer would end that group when it next talks to the manager and meets the dead worker;
but the trainer may be busy elsewhere for long (an epoch of learning), or die first, and then
nobody ever would.  So a daemon thread of the trainer watches every worker's exit descriptor
(its pidfd, readable once the process has exited even while a process it forked lives on; see
:mod:`envmanager.lifetime.exit_descriptor`) and kills the group of a worker as soon as it has
exited.  That also ends what the worker forked, which may hold its reply pipe open: the
trainer's blocking read of that pipe then ends, too.  It blocks in ``poll`` with the GIL released, so it costs nothing
until a worker ends; a forked copy of the trainer has no such thread.

Safety: a group is killed by the number of a worker that made it (see
:mod:`envmanager.lifetime.process_group`), while that worker is a zombie (exited, not reaped):
the pool forgets a worker here before it reaps it, under the same lock.  One gap remains: a
``multiprocessing`` call of the user's (``Process.start``, ``active_children``) reaps every
exited child; between that and this thread's kill, the number would have to be taken by a new
process that leads a group of its own, within microseconds.
"""

from __future__ import annotations

import os
import select
import threading
from typing import Any

from envmanager.lifetime.process_group import kill_process_group

__all__ = ["DeathWatch"]


class DeathWatch:
    """Kills the process group of each watched worker process once it has exited."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self._watched: dict[int, Any] = {}  # exit descriptor -> process
        self._wake_reader, self._wake_writer = os.pipe()
        self._stopped = False
        self._thread: threading.Thread | None = None

    def watch(self, process: Any, exit_descriptor: int) -> None:
        """Watch a started worker process (its group is killed once ``exit_descriptor``, which
        the caller owns and keeps open until it calls :meth:`forget`, is readable)."""
        with self.lock:
            self._watched[exit_descriptor] = process
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="rlprof-death-watch", daemon=True)
                self._thread.start()
        self._wake()

    def forget(self, exit_descriptor: int) -> None:
        """Stop watching a worker: call it, holding ``lock``, before reaping the process and
        closing its exit descriptor."""
        self._watched.pop(exit_descriptor, None)

    def stop(self) -> None:
        """End the watching thread (once every worker is stopped) and free its pipe."""
        with self.lock:
            if self._stopped:
                return
            self._stopped = True
            self._watched.clear()
            thread, self._thread = self._thread, None
        self._wake()
        if thread is not None:
            thread.join()
        os.close(self._wake_reader)
        os.close(self._wake_writer)

    def _wake(self) -> None:
        try:
            os.write(self._wake_writer, b"x")
        except (BlockingIOError, OSError):
            pass  # already awake, or stopped

    def _run(self) -> None:
        while True:
            with self.lock:
                if self._stopped:
                    return
                polled = dict(self._watched)
            poller = select.poll()
            poller.register(self._wake_reader, select.POLLIN)
            for exit_descriptor in polled:
                poller.register(exit_descriptor, select.POLLIN)
            ready = {fd for fd, _ in poller.poll()}
            if self._wake_reader in ready:
                os.read(self._wake_reader, 4096)
            with self.lock:
                for exit_descriptor in ready:
                    process = polled.get(exit_descriptor)
                    # While this thread waited for the lock, the pool may have forgotten the
                    # dead worker, closed its descriptor and watched a restarted worker under
                    # the same number: that one is alive and keeps its group.
                    if process is not None and self._watched.get(exit_descriptor) is process:
                        del self._watched[exit_descriptor]
                        kill_process_group(process.pid)

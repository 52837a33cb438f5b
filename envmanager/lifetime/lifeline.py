"""How a worker learns that its trainer died, whatever the worker is doing at the time.

The trainer can die without a word: SIGKILL from the OOM killer or a scheduler.  The
command pipe cannot be trusted to tell: EOF reaches a worker only once *every* copy of the
trainer's end is closed, and a process the trainer forked after building the manager holds
copies; and a worker inside a long or hung env call is not reading the pipe anyway.

So each pool has a **lifeline**, a pipe nobody ever writes to.  Only the trainer holds its
write end: every process forked from the trainer closes its copy at once (an
``os.register_at_fork`` hook), and exec'd processes never get it (the descriptor is not
inheritable).  Each worker holds the read end and watches it from a daemon thread; when it
reads EOF, the trainer is gone, and the worker terminates itself (its SIGTERM path closes
its envs, see :mod:`envmanager.transport.worker`).  The thread blocks in ``read`` with the GIL
released, so it costs nothing until then, and it acts even while the env hangs in Python
code (a C call that never releases the GIL is beyond any thread's reach).

On Linux a worker started from the trainer's main thread (or from the forkserver) also asks
the kernel for a signal when its parent dies (``PR_SET_PDEATHSIG``), which also covers a
lifeline copy kept by a process forked outside Python.  Not from other threads: the kernel
sends that signal when the *thread* that forked the worker ends, which would kill healthy
workers of a manager built in a short-lived thread.  That signal is ``PARENT_DEATH_SIGNAL``
(SIGHUP, "your controlling process hung up"), not the SIGTERM the trainer stops workers with:
it comes as soon as the trainer's main thread ends, while the dying process may still hold the
lifeline open in its other threads (numpy's), so the worker must know it by the signal alone.

Whatever route tells a worker that its trainer is gone (the lifeline, that signal, a broken
reply pipe, end-of-file on its requests with the lifeline broken), it ends the same way
(:func:`end_after_trainer_death`): it removes the ``max_concurrency`` semaphore and kills its
own process group, with every helper process its envs left running.  Nobody else is left to.

A forked copy of the trainer also stops counting the workers as its own children, so that
``multiprocessing``'s exit hook in that copy does not terminate them.

Each end of the lifeline is closed once, by the Connection that owns it, even when a manager
collected as garbage closes the lifeline after the collector finalised its ends
(:mod:`envmanager.lifetime.one_way_pipe`).
"""

from __future__ import annotations

import ctypes
import multiprocessing.process
import os
import signal
import sys
import threading
import time
import weakref
from multiprocessing.connection import Connection
from typing import Any, Callable

from envmanager.lifetime.one_way_pipe import one_way_pipe
from envmanager.lifetime.process_group import kill_own_process_group

__all__ = [
    "Lifeline",
    "watch_trainer",
    "trainer_is_gone",
    "terminate_after_trainer_death",
    "ask_for_signal_at_parent_death",
    "end_after_trainer_death",
    "GRACE_BEFORE_KILL_SECONDS",
    "PARENT_DEATH_SIGNAL",
    "TRAINER_EXIT_SECONDS",
]

# After the trainer's death: how long a worker's SIGTERM path may take before its watcher
# kills it outright (an env that swallows the exception or takes long to close).
GRACE_BEFORE_KILL_SECONDS = 2.0

# How long a worker that read end-of-file on its requests waits for the lifeline to say whether
# the trainer is gone: a dying trainer's descriptors close one after another, so the lifeline's
# end can follow by a moment.  A trainer that cut the worker off (Ctrl-C mid-message) and lives
# stops the worker itself; this only delays that worker's own exit by as much.
TRAINER_EXIT_SECONDS = 0.2

# The signal the kernel sends a worker when the thread that started it ends (see above).
PARENT_DEATH_SIGNAL = signal.SIGHUP

_PR_SET_PDEATHSIG = 1


class Lifeline:
    """The trainer's side: the write end it alone holds, and the read end to give workers."""

    def __init__(self) -> None:
        self.reader, self._writer = one_way_pipe()
        self._workers: weakref.WeakSet[Any] = weakref.WeakSet()
        _lifelines.add(self)

    def bind(self, process: Any) -> None:
        """Note a worker process started on this lifeline (forgotten by forked copies)."""
        self._workers.add(process)

    def close(self) -> None:
        """Cut the lifeline: every worker still watching it ends.  Call once they are stopped."""
        _lifelines.discard(self)
        self.reader.close()
        self._writer.close()

    def _after_fork_in_child(self) -> None:
        self._writer.close()
        for process in self._workers:
            multiprocessing.process._children.discard(process)


_lifelines: weakref.WeakSet[Lifeline] = weakref.WeakSet()


def _cut_lifelines_in_forked_child() -> None:
    for lifeline in list(_lifelines):
        lifeline._after_fork_in_child()
    _lifelines.clear()


os.register_at_fork(after_in_child=_cut_lifelines_in_forked_child)


def watch_trainer(reader: Connection, on_trainer_death: Callable[[], None]) -> None:
    """Worker side: call ``on_trainer_death()`` from a daemon thread once the lifeline breaks."""

    def watch() -> None:
        try:
            reader.recv_bytes()  # nothing is ever sent: this returns only by raising at EOF
        except EOFError:
            on_trainer_death()
        except OSError:
            pass  # the descriptor was closed in this process: that says nothing of the trainer

    threading.Thread(target=watch, name="rlprof-lifeline", daemon=True).start()


def trainer_is_gone(reader: Connection, parent_pid: int, wait: float = 0.0) -> bool:
    """Whether the lifeline is broken (EOF is readable) or the parent changed, waiting up to
    ``wait`` seconds for the lifeline to tell."""
    if os.getppid() != parent_pid:
        return True  # orphaned: the kernel's parent-death signal can come before the EOF
    try:
        return reader.poll(wait)
    except (EOFError, OSError):
        return True


def terminate_after_trainer_death(permits: Any = None) -> None:
    """What a worker does once the lifeline broke: remove the ``max_concurrency`` semaphore at
    once (the main thread may be stuck in an env), SIGTERM itself, then SIGKILL if still here.

    The SIGTERM goes through the worker's own handler, which closes the envs (and their
    helper processes) and ends the process group.  SIGKILL of the process group is the
    fallback when that does not finish within ``GRACE_BEFORE_KILL_SECONDS``.
    """
    _remove_permits(permits)
    os.kill(os.getpid(), signal.SIGTERM)
    time.sleep(GRACE_BEFORE_KILL_SECONDS)
    kill_own_process_group()


def end_after_trainer_death(permits: Any) -> None:
    """The end of a worker whose trainer is gone, whatever told it: remove the ``max_concurrency``
    semaphore (``permits``, None if there is none) and kill the worker's process group."""
    _remove_permits(permits)
    kill_own_process_group()


def _remove_permits(permits: Any) -> None:
    if permits is not None:
        try:
            permits.remove()  # the trainer cannot remove it any more
        except OSError:
            pass  # not ours to remove, or already gone: the group must still end


def ask_for_signal_at_parent_death(signum: int) -> bool:
    """Linux: have the kernel send ``signum`` when the parent (thread) dies; False elsewhere."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return libc.prctl(_PR_SET_PDEATHSIG, signum, 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False

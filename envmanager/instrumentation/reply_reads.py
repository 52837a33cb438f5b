"""The trainer's reads of its vector env's worker replies, each timed where it blocked.

A vector env whose envs run in workers (``AsyncVectorEnv``, ``SubprocVecEnv``) reads its
workers' replies in its own ``step_wait``, one pipe after the other, each reply as soon as it is
there: while the trainer unpickles worker 0's reply, the other workers still step. rlprof keeps
that overlap: it does not wait for every reply before the class reads them (that wait put the
reading of every reply after the last worker's: 4-6% of an ``AsyncVectorEnv`` program's wall
time). It still tells waiting from receiving: while a timed ``step_wait`` runs
(:attr:`ReceiveWaits.active`), the ``recv`` of each of the vector env's pipes first waits for its
pipe to be readable, the GIL released, and adds the time it *blocked* to
:attr:`ReceiveWaits.blocked`; then it calls the connection's own ``recv``. That blocked time is the
step's ``vector.wait_for_workers``; the rest of ``step_wait`` (reading, unpickling, stacking) is its
``vector.receive_results`` (:mod:`.known_classes`). Outside a timed ``step_wait`` (``reset``,
``call``, ``close``) a pipe's ``recv`` is the connection's own, after one test.

The ``recv`` is an attribute set on each of the program's ``Connection`` objects (the class is
left alone) when the vector env is registered (:meth:`ReplyReads.attach`), and removed when the
vector env goes, or at the end of the run (:meth:`ReplyReads.release`). It holds its connection,
as the bound method it stands for does (one taken from the pipe still reads once the program
dropped the pipe; a finalizer that reads its pipes, such as ``AsyncVectorEnv.__del__`` with a step
pending, reads them while gc collects them, where a weak reference would be cleared), and calls
the class's ``recv`` with it. The reference cycle that makes through the connection's own
attribute is broken as the vector env is freed, before its pipes are: they are freed when the
program drops the vector env, by their count, as under python. A closed connection, or one whose
peer closed, is handed to the connection's own ``recv``, which raises its own error.

Two implementations, the same results: :class:`ReceiveWaits` and :func:`timed_receive` below, in
Python, are the reference and the fallback; ``_step_core.c``'s ``ReceiveWaits`` and
``TimedReceive`` do the same in C (one call from the program's Python into C per reply, no Python
frame), where the step path's C helper is in force (:func:`envmanager.transport.timed_calls.compiled`).
"""

from __future__ import annotations

import select
import weakref
from typing import Any, Callable

from envmanager.transport import timed_calls

__all__ = ["ReceiveWaits", "ReplyReads", "timed_receive"]

_READY = select.POLLIN | select.POLLPRI


class ReceiveWaits:
    """The state that one vector env's timed ``recv`` s share (the reference of ``_step_core.ReceiveWaits``)."""

    __slots__ = ("active", "blocked", "clock")

    def __init__(self) -> None:
        self.active = False  # a timed step_wait runs: the reads wait first, and count what they blocked
        self.blocked = 0.0  # seconds the reads blocked since the step_wait began
        self.clock: Callable[[], Any] | None = None  # the run's clock, set by begin()

    # Two calls a step rather than four attribute stores: a C type's attributes are set through
    # their descriptors, unspecialized (about 150 instructions each).
    def begin(self, clock: Callable[[], Any]) -> None:
        """A timed ``step_wait`` begins: its reads count what they block on ``clock``, from 0."""
        self.clock, self.blocked, self.active = clock, 0.0, True

    def end(self) -> float:
        """The ``step_wait`` is over: the seconds its reads blocked."""
        self.active = False
        return self.blocked


def timed_receive(waits: ReceiveWaits, connection: Any) -> Callable[..., Any]:
    """``connection.recv``, which while ``waits.active`` first waits for the connection to be
    readable and adds the time it blocked to ``waits.blocked`` (the reference of ``_step_core.TimedReceive``)."""
    receive = type(connection).recv
    poller = select.poll()
    poller.register(connection.fileno(), _READY)
    poll = poller.poll

    def recv(*args: Any, **kwargs: Any) -> Any:
        # A closed connection: its own recv raises its own error (its descriptor may be another's now).
        if waits.active and not connection.closed and not poll(0):
            clock = waits.clock
            start = clock()
            poll(None)  # the GIL released; on a signal its handler runs, and one that raises ends the wait
            waits.blocked += clock() - start
        return receive(connection, *args, **kwargs)

    return recv


class ReplyReads:
    """One vector env's pipes, each with its timed ``recv``, and their shared :class:`ReceiveWaits`."""

    __slots__ = ("waits", "_timed_receive", "_release")

    def __init__(self) -> None:
        extension = timed_calls.extension()
        # Chosen once, as a vector env's record is made: the step path's core in force then.
        in_c = timed_calls.compiled() and extension is not None
        self.waits: Any = extension.ReceiveWaits() if in_c else ReceiveWaits()
        self._timed_receive: Callable[[Any, Any], Any] = extension.TimedReceive if in_c else timed_receive
        self._release: weakref.finalize | None = None

    def attach(self, owner: Any, pipes: list[Any]) -> None:
        """Set the timed ``recv`` on each open connection of ``pipes`` (the trainer's ends of the
        vector env ``owner``'s pipes), until ``owner`` is freed or :meth:`release`."""
        attached = []
        for connection in pipes:
            if connection is None or connection.closed:
                continue
            connection.recv = self._timed_receive(self.waits, connection)
            attached.append(weakref.ref(connection))
        # Run as the vector env is freed, before the pipes it holds (and by gc before any
        # finalizer: AsyncVectorEnv.__del__ then reads its pipes with their own recv).
        self._release = weakref.finalize(owner, _give_back, attached)
        self._release.atexit = False

    def release(self) -> None:
        """Give every connection still alive its own ``recv`` back."""
        if self._release is not None:
            self._release()


def _give_back(connections: list[weakref.ref[Any]]) -> None:
    """Remove the timed ``recv`` of each connection still alive: the class's is its own again."""
    for reference in connections:
        connection = reference()
        if connection is not None:
            connection.__dict__.pop("recv", None)

"""The trainer's wait for its vector env's workers: until every worker's pipe has a reply.

The wait is the ``vector.wait_for_workers`` block of a vector step (:mod:`.known_classes`): the
time until the last worker's reply is there, apart from reading it. Nothing is read, so the
class's own ``step_wait`` then finds every reply where it would have.

It runs once per vector step. The reference, in Python, keeps one ``select.poll`` object per
pipe, each registered once, and waits on the pipes in turn: the step's wait ends when the last of
them has its reply, whichever order the replies came in. ``multiprocessing.connection.wait`` made
a selector, registered every pipe and closed it again at each of its calls
(``benchmarks/vector_step_cost.py``); one poll object for all the pipes, polled until each had
answered, had to take the pipes that answered out of it and put them back (``poll`` is
level-triggered), and rebuilt its table of descriptors at each poll after that: about 9,000
instructions a step of 4 workers, where a poll of one registered pipe at a time takes about a
quarter (``benchmarks/instrumented_step_instructions.py``).

Where the step path's C helper is in force (:func:`envmanager.transport.timed_calls.compiled`),
its ``wait_for_replies`` does the same wait in one call, the GIL released once for the whole wait
rather than once a pipe (each release and re-acquisition cost about 800 instructions): it waits
first on the pipe that answered last at the previous step alone, then ``poll()`` s every pipe not
yet answered at once, until none is left. Where the workers answer in about the same order each
step, the trainer then wakes once, when the last reply is in, and finds the others in with one
more ``poll()``; polling every pipe at once from the start would return at each reply in turn.
"""

from __future__ import annotations

import math
import select
import time
from typing import Any, Callable

from envmanager.transport import timed_calls

__all__ = ["ReplyWaiter"]

_READY = select.POLLIN | select.POLLPRI


class ReplyWaiter:
    """Waits for replies on the trainer's ends of one vector env's worker pipes."""

    __slots__ = ("_pipes", "_polls", "_descriptors", "_wait_in_c", "_answered_last")

    def __init__(self) -> None:
        self._pipes: Any = None
        self._polls: tuple[Callable[[int | None], list[tuple[int, int]]], ...] = ()
        self._descriptors: tuple[int, ...] = ()
        extension = timed_calls.extension()
        # Chosen once, as a vector env's record is made: the step path's core in force then.
        self._wait_in_c = extension.wait_for_replies if timed_calls.compiled() and extension is not None else None
        self._answered_last: int | None = None  # the place of the pipe that answered last (the C wait's)

    def wait(self, pipes: list[Any], timeout: float | None) -> bool:
        """Return once every open pipe of ``pipes`` has something to read, its peer closed, or
        ``timeout`` seconds passed: True in the first case, False when the timeout ran out (the
        class's own ``step_wait``, given no time left, then raises its own error)."""
        if pipes is not self._pipes:
            # The vector env's own list of pipes, the same object at every step: read once. A
            # pipe closed later is polled as closed (reported at once), and the class's own
            # step_wait raises its own error on it.
            self._descriptors = tuple(pipe.fileno() for pipe in pipes if pipe is not None and not pipe.closed)
            if self._wait_in_c is None:
                self._polls = tuple(_poll_of(descriptor) for descriptor in self._descriptors)
            self._pipes = pipes
            self._answered_last = None
        if self._wait_in_c is not None:
            answered_last = self._wait_in_c(self._descriptors, timeout, self._answered_last)
            if answered_last is None:  # timed out, or no pipe to wait on
                return not self._descriptors
            self._answered_last = answered_last
            return True
        if timeout is None:
            for poll in self._polls:
                poll(None)
            return True
        deadline = time.monotonic() + timeout
        for poll in self._polls:
            if not poll(math.ceil(max(0.0, deadline - time.monotonic()) * 1000)):
                return False
        return True


def _poll_of(descriptor: int) -> Callable[[int | None], list[tuple[int, int]]]:
    """A poll of ``descriptor`` alone (its ``poll`` method: milliseconds, or None to block)."""
    poller = select.poll()
    poller.register(descriptor, _READY)
    return poller.poll

"""The trainer's wait for its vector env's workers: until every worker's pipe has a reply.

The wait is the ``vector.wait_for_workers`` block of a vector step (:mod:`.known_classes`): the
time until the last worker's reply is there, apart from reading it. Nothing is read, so the
class's own ``step_wait`` then finds every reply where it would have.

It runs once per vector step, so it keeps one ``select.poll`` object per vector env, its pipes
registered once: ``multiprocessing.connection.wait`` made a selector, registered every pipe and
closed it again at each of its calls, a few of them per step (as replies came in one by one),
which cost the trainer more CPU per step than the block timing around it
(``benchmarks/vector_step_cost.py``). When a poll leaves replies to wait for, the pipes with
their reply in are set aside until the step's end (``poll`` is level-triggered: it would report
them again at once); when every reply is in at once, nothing is set aside.
"""

from __future__ import annotations

import math
import select
import time
from typing import Any

__all__ = ["ReplyWaiter"]

_READY = select.POLLIN | select.POLLPRI


class ReplyWaiter:
    """Waits for replies on the trainer's ends of one vector env's worker pipes."""

    __slots__ = ("_pipes", "_descriptors", "_poller")

    def __init__(self) -> None:
        self._pipes: Any = None
        self._descriptors: tuple[int, ...] = ()
        self._poller: Any = None

    def wait(self, pipes: list[Any], timeout: float | None) -> None:
        """Return once every open pipe of ``pipes`` has something to read, its peer closed, or
        ``timeout`` seconds passed (the class's own ``step_wait`` then raises its own error)."""
        poller = self._poller
        if pipes is not self._pipes or poller is None:
            # The vector env's own list of pipes, the same object at every step: read once. A
            # pipe closed later is polled as closed (reported at once), and the class's own
            # step_wait raises its own error on it.
            self._descriptors = tuple(pipe.fileno() for pipe in pipes if pipe is not None and not pipe.closed)
            poller = self._poller = select.poll()
            for descriptor in self._descriptors:
                poller.register(descriptor, _READY)
            self._pipes = pipes
        pending = len(self._descriptors)
        deadline = None if timeout is None else time.monotonic() + timeout
        set_aside = []
        try:
            while pending:
                milliseconds = None if deadline is None else math.ceil(max(0.0, deadline - time.monotonic()) * 1000)
                events = poller.poll(milliseconds)
                if not events:
                    return  # timed out
                pending -= len(events)
                if pending:  # polled again: the pipes with their reply in are set aside till then
                    for descriptor, _ in events:
                        poller.unregister(descriptor)
                        set_aside.append(descriptor)
        finally:
            for descriptor in set_aside:
                poller.register(descriptor, _READY)

"""The trainer's wait for every worker's reply, before a ``step_wait`` given a timeout reads any.

Only a program's ``step_wait(timeout=T)`` (Gymnasium's ``AsyncVectorEnv``) takes this wait: the
class itself polls every pipe before reading any reply then, so nothing of the program's overlap
is lost by waiting for them all first, and the wait is the step's ``vector.wait_for_workers``.
Without a timeout the class reads each reply as soon as it is there, and the time it blocked is
counted where it reads (:mod:`.reply_reads`).
"""

from __future__ import annotations

import time
from typing import Any

__all__ = ["wait_for_replies"]


def wait_for_replies(pipes: list[Any], timeout: float) -> bool:
    """Return once every open pipe of ``pipes`` has something to read or its peer closed (True),
    or once ``timeout`` seconds passed (False: the class's own ``step_wait``, given no time left,
    then raises its own error). Nothing is read."""
    deadline = time.monotonic() + timeout
    for pipe in pipes:
        if pipe is not None and not pipe.closed and not pipe.poll(max(0.0, deadline - time.monotonic())):
            return False
    return True

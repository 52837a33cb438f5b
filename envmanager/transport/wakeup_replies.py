"""The trainer's reading of a step's wake-up replies: a step whose results are all in shared memory
comes back as one fixed-size message per worker, taken here without decoding it.

:meth:`envmanager.transport.pool.WorkerPool.wait` reads each awaited reply's first bytes (the
whole reply, for one this small) into its handle's ``read_ahead``; then, for a step::

    left = take_wakeups(targets, ready_at, counted, cleared)
    for handle in left: pool._receive(handle, on_reply)   # anything else, the general way

``take_wakeups`` takes each awaited reply that is exactly a step's wake-up (its framed bytes as
:func:`~envmanager.transport.protocol.write_message` wrote them: header, tag, sequence number,
the worker's stamp) from a worker that owes no other reply, with a stamp of the shared clock, and
leaves the handle as :meth:`~envmanager.transport.pool.WorkerPool._receive` leaves it (nothing
read ahead, nothing owed or awaited, the stamp in ``ready_at``) and the manager's lists as its
reply handler leaves them (``counted[worker] += 1``: a step no payload reported yet;
``cleared[worker] = None``: the step's infos, of which a wake-up has none). It returns the other
awaited handles, in order, for the general path: a pickled reply (with timers, infos or a
failure), one not read ahead (the wait polled), one not yet whole, the end of the pipe, a stamp
beyond the shared clock (the general path then stops trusting the workers' stamps).

Once a step, every step, with every worker: in Python it was a dozen lines per worker. Two
implementations, the same results: :func:`take_wakeups_in_python` is the reference and the
fallback; ``_step_core.take_wakeups`` makes the same in C, used where it was built unless
``RLPROF_PURE_PYTHON=1`` is set, under the same switch as the worker's step timer
(:func:`envmanager.transport.timed_calls.compiled`).
"""

from __future__ import annotations

from typing import Any, Callable

from profiler.multiprocess.payload import MAX_SECONDS

from envmanager.transport import timed_calls
from envmanager.transport.protocol import FRAMED_STEP_REPLY_SIZE, STEP_REPLY_FIELDS, STEP_REPLY_FRAME_START

__all__ = ["NOTHING_AWAITED", "TakeWakeups", "take_wakeups_function", "take_wakeups_in_python"]

NOTHING_AWAITED = 0
"""A handle's ``awaiting`` while it waits for no reply (the pool's own constant)."""

TakeWakeups = Callable[[list, list, list, list], list]


def take_wakeups_in_python(targets: list[Any], ready_at: list[Any], counted: list[int], cleared: list[Any]) -> list[Any]:
    """Take the awaited replies that are a step's wake-up (see the module's docstring); the other
    awaited targets, in order."""
    left = []
    for handle in targets:
        if handle.awaiting == NOTHING_AWAITED:
            continue
        start = handle.read_ahead
        if (
            start is not None
            and handle.outstanding == 1
            and len(start) == FRAMED_STEP_REPLY_SIZE
            and start[:5] == STEP_REPLY_FRAME_START
        ):
            finished_at = STEP_REPLY_FIELDS.unpack_from(start, 5)[1]
            if 0.0 <= finished_at < MAX_SECONDS:
                handle.read_ahead = None
                handle.outstanding = 0
                handle.awaiting = NOTHING_AWAITED
                ready_at[handle.index] = finished_at
                counted[handle.index] += 1
                cleared[handle.index] = None
                continue
        left.append(handle)
    return left


def _configured_extension() -> Any:
    extension = timed_calls.extension()
    if extension is not None:
        extension.configure_wakeups(STEP_REPLY_FRAME_START, STEP_REPLY_FIELDS.size, MAX_SECONDS)
    return extension


_extension = _configured_extension()


def take_wakeups_function() -> TakeWakeups:
    """``take_wakeups``: in C where the step path's helper is in force
    (:func:`~envmanager.transport.timed_calls.compiled`), else the Python reference."""
    if timed_calls.compiled() and _extension is not None:
        return _extension.take_wakeups  # type: ignore[no-any-return]
    return take_wakeups_in_python

"""Every message that crosses the pipe between the manager and a worker, in one place.

Messages are plain tuples of built-ins and numpy arrays, never class instances, because
pickling a tuple of scalars is several times cheaper than pickling an object and the step
path sends two messages per worker per step.  The layouts below are the whole protocol.

Request (manager -> worker)::

    (sequence, command, body)

Reply (worker -> manager)::

    (sequence, ok, body, timers)

``sequence`` is echoed back so the manager can recognise and drop a late reply to a request
it already gave up on (after a timeout) instead of mistaking it for the current answer.
``ok`` is False when the command raised; ``body`` is then a :class:`RemoteFailure`.
``timers`` is a profiler payload or None; it rides on the reply so that shipping timer data
never costs an extra round trip, and it is kept apart from ``body`` so it can never leak
into the infos a user sees.

Bodies, per command (``k`` is the number of envs the worker runs):

=============  ==============================================  ==============================================
command        request body                                    reply body
=============  ==============================================  ==============================================
``STEP``       ``k`` actions (array slice or list)             ``(observations, rewards, terminations,
                                                               truncations, infos)``
``RESET``      ``(seeds, options, mask)``: ``k`` seeds,        ``(observations, infos)``
               options dict or None, ``k`` bools or None
``CALL``       ``(name, args, kwargs)``                        ``k`` results
``SET_ATTR``   ``(name, values)``: ``k`` values                None
``DESCRIBE``   None                                            ``k`` pairs ``(observation_space, action_space)``
``FLUSH``      None                                            None (all timer data is in ``timers``)
``CLOSE``      None                                            None (the last timer data is in ``timers``)
=============  ==============================================  ==============================================

``observations`` is None when they travel through shared memory; otherwise it is one stacked
array for array-like spaces (``Box``, ``Discrete``, ``MultiDiscrete``, ``MultiBinary``) or a
list of ``k`` observations for everything else.  ``rewards``, ``terminations`` and
``truncations`` are tuples of ``k`` scalars.  ``infos`` is None when no env reported anything
(the common case, so nothing is pickled for it), else a list of ``k`` dicts or None.
"""

from __future__ import annotations

import pickle
import traceback
from typing import Any

__all__ = [
    "STEP",
    "RESET",
    "CALL",
    "SET_ATTR",
    "DESCRIBE",
    "FLUSH",
    "CLOSE",
    "COMMAND_NAMES",
    "Request",
    "Reply",
    "RemoteFailure",
]

# Plain ints rather than an Enum: an Enum member pickles as a class reference plus a value.
STEP = 1
RESET = 2
CALL = 3
SET_ATTR = 4
DESCRIBE = 5
FLUSH = 6
CLOSE = 7

COMMAND_NAMES = {
    STEP: "step",
    RESET: "reset",
    CALL: "call",
    SET_ATTR: "set_attr",
    DESCRIBE: "describe",
    FLUSH: "flush",
    CLOSE: "close",
}

Request = tuple[int, int, Any]
Reply = tuple[int, bool, Any, Any]


class RemoteFailure:
    """An exception raised inside a worker, in a form that always survives the pipe.

    The original exception object is sent when it pickles, so the manager can re-raise the
    very same type with the very same arguments.  When it does not pickle (a lambda in its
    args, a class defined in ``__main__`` under spawn, ...), its type name and message are
    kept instead and the manager raises a ``RuntimeError`` that says so.
    """

    __slots__ = ("exception", "type_name", "message", "traceback", "env_index")

    def __init__(self, exc: BaseException, env_index: int | None) -> None:
        self.type_name = type(exc).__qualname__
        self.message = str(exc)
        self.traceback = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
        self.env_index = env_index
        try:
            # Prove the round trip here, where a failure can still be handled.
            pickle.loads(pickle.dumps(exc))
            self.exception: BaseException | None = exc
        except Exception:
            self.exception = None

    def __getstate__(self) -> tuple:
        exc = self.exception
        if exc is not None:
            # The traceback object cannot be pickled and its text is already in self.traceback.
            exc = exc.with_traceback(None)
        return (exc, self.type_name, self.message, self.traceback, self.env_index)

    def __setstate__(self, state: tuple) -> None:
        (self.exception, self.type_name, self.message, self.traceback, self.env_index) = state

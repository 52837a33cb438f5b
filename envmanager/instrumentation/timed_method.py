"""A timed method of an env, as the program sees it: the env's own method, copied and pickled as it.

An instrumented env's ``step``, ``reset`` and ``close`` are instance attributes that stand for the
env's own bound methods (:mod:`.timed_env`). Under plain python ``env.step`` is a bound method: a
copy or a pickle of it alone is ``getattr(env, "step")`` of a copy of the env (its
``__reduce_ex__``), ``copy.copy`` gives an equal one. A timed method reduces as the method it stands
for, so the same happens under ``rlprof run``: a pickle names the env and the method's name (the env
pickled as the program built it, untimed), a deep copy is the bound method of a deep copy of the
env, a shallow copy is the env's ``step`` again.

``_step_core.EnvStep``, the C step, reduces the same way. The others (``reset``, ``close``, and the
step's Python reference) are made by :func:`timed_method`: :class:`TimedMethod` here, the reference,
a ``functools.partial`` of rlprof's closure with no argument bound, so calling one is the closure's
call with no Python frame of its own (a class with ``__call__`` would add one at every env step),
and unlike a function, its copies and pickles can be chosen; ``_step_core.TimedMethod`` where the
step path's C helper is in force, the same with no argument tuple per call (on Python 3.11 a
subclass of ``partial`` loses partial's vectorcall: about 500 instructions a call).
"""

from __future__ import annotations

import functools
from typing import Any, Callable

from envmanager.transport import timed_calls

__all__ = ["TimedMethod", "timed_method"]


def timed_method(call: Callable[..., Any], original: Any) -> Any:
    """``call`` shown, copied and pickled as ``original``, the env's own method: in C
    (``_step_core.TimedMethod``) where the step path's helper is in force, else a :class:`TimedMethod`."""
    extension = timed_calls.extension()
    if timed_calls.compiled() and extension is not None:
        return functools.update_wrapper(extension.TimedMethod(call, original), original)
    return TimedMethod(call, original)


class TimedMethod(functools.partial):
    """``call`` (rlprof's timing around the env's method ``original``), shown as ``original``
    (``functools.update_wrapper``: its name, doc, module, ``__wrapped__``), copied and pickled as it."""

    def __new__(cls, call: Callable[..., Any], original: Any) -> TimedMethod:
        timed = super().__new__(cls, call)
        functools.update_wrapper(timed, original)
        return timed

    def __reduce_ex__(self, protocol: Any) -> Any:
        return self.__wrapped__.__reduce_ex__(protocol)

    def __repr__(self) -> str:
        return f"<timed {self.__wrapped__!r}>"

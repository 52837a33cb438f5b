"""An env manager's ``live_view=True``: the live view of the run, up while the manager's workers run.

The view itself is the profiler's (:mod:`profiler.integrations.live_view`): one per process, drawn
on stderr, showing the trainer thread's timers with the manager's workers merged into them. A
manager only puts it up when its workers have started and takes it down when it closes, so a
trainer needs one argument rather than ``start()``/``stop()`` around its loop.

One view per process, shared: a view already up (``rlprof run --live``, ``set_config(live_view=True)``,
``profiler.live_view.start()``) is used as it is and left up at close; among several managers with
``live_view=True``, the last one closed takes down the view the first one put up.
"""

from __future__ import annotations

import threading
import warnings
from collections.abc import Callable

from profiler.integrations import live_view
from profiler.timing import timers
from profiler.timing.timers import TimerStack

__all__ = ["check_live_view", "start_live_view"]

_holders = 0
"""Managers open that hold the view one of them put up; 0 when no manager's view is up."""
_generation = 0
"""Counts the views the managers held that someone else took down; a release of an older one is void."""
_holders_lock = threading.Lock()


def check_live_view(live_view_on: bool, profiling: bool) -> None:
    """Refuse ``live_view=True`` with ``profiling=False``: the view shows the profiling's figures."""
    if not isinstance(live_view_on, bool):
        raise TypeError(f"`live_view` must be True or False, got {live_view_on!r}.")
    if live_view_on and not profiling:
        raise ValueError("`live_view=True` shows what the manager's profiling measures: it needs "
                         "`profiling=True`.")


def _nothing_to_stop() -> None:
    pass


def start_live_view(live_view_on: bool, profiling_enabled: bool, timer_stack: TimerStack) -> Callable[[], None]:
    """Put the view of ``timer_stack`` up (when ``live_view_on``); returns what takes it down at close.

    With profiling switched off for the whole process (``profiler.disable()``), there is nothing
    to show: one warning says so and no view goes up.
    """
    global _holders, _generation
    if not live_view_on:
        return _nothing_to_stop
    if not (profiling_enabled and timers.is_enabled()):
        warnings.warn("rlprof: live_view=True shows nothing while profiling is disabled "
                      "(profiler.disable()); no live view", RuntimeWarning, stacklevel=3)
        return _nothing_to_stop
    with _holders_lock:
        if live_view.is_showing():
            if _holders == 0:
                return _nothing_to_stop  # someone else's view: theirs to take down
        elif _holders:
            # The view the managers held was taken down by someone else (live_view.stop()): a
            # new one, held afresh; the managers holding the old one no longer count.
            _holders, _generation = 0, _generation + 1
        live_view.start(timer_stack=timer_stack)
        _holders += 1
        return _release_once(_generation)


def _release_once(generation: int) -> Callable[[], None]:
    released = False

    def release() -> None:
        global _holders
        nonlocal released
        with _holders_lock:
            if released or generation != _generation:
                return
            released = True
            _holders -= 1
            last = _holders == 0
        if last:
            live_view.stop()

    return release

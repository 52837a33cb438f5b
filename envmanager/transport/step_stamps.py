"""The trainer's side of a profiled vector step: its step block opened, and closed with the
critical path's stamps.

:class:`~envmanager.subprocess_env_manager.SubprocessEnvManager` times each step as a
:class:`~profiler.timing.phased_block.PhasedBlock` (the step, then sending, waiting and
receiving) and keeps, with the run, when it began waiting and each worker's reply stamp, which the
critical path counts in bulk when the block folds its runs::

    open_step, close_step = step_functions()
    clock = open_step(step_block)        # None: time the step with ``with`` blocks instead
    ...  send; sent = clock(); wait; waited = clock(); receive
    close_step(step_block, clock, sent, waited, waiting_since, ready_at)

Both run once per vector step, and in Python they were most of what timing the step cost the
trainer (a method call, a dozen attribute reads, a tuple built by unpacking). At each fold the
critical path counts the held stamps in bulk, in C too where the helper is in force
(:func:`whole_steps_counter`): the numpy reference's dozen calls were most of a fold. Two
implementations, the same results: :func:`open_step_in_python` (``PhasedBlock.open`` itself) and
:func:`close_step_in_python` below are the reference and the fallback; ``_step_core.c`` makes the
same two functions in C, used where it was built unless ``RLPROF_PURE_PYTHON=1`` is set, under the
same switch as the worker's step timer (:func:`envmanager.transport.timed_calls.compiled`).
"""

from __future__ import annotations

from typing import Any, Callable

from profiler.timing import timer_node, timers
from profiler.timing.phased_block import FOLD_AT_RUNS, PhasedBlock

from envmanager.measurement.critical_path import WholeStepsCounter, whole_steps_in_python
from envmanager.transport import timed_calls

__all__ = ["close_step_in_python", "open_step_in_python", "step_functions", "whole_steps_counter"]

OpenStep = Callable[[PhasedBlock], Callable[[], Any] | None]
CloseStep = Callable[[PhasedBlock, Callable[[], Any], Any, Any, Any, list], None]

open_step_in_python: OpenStep = PhasedBlock.open
"""The reference of ``_step_core.open_step``: open the block in the calling thread; the clock to
stamp its phase ends with, or None where it cannot be timed from stamps now."""


def close_step_in_python(
    step_block: PhasedBlock,
    clock: Callable[[], Any],
    sent: Any,
    waited: Any,
    waiting_since: Any,
    ready_at: list,
) -> None:
    """Close the step block now (``PhasedBlock.close`` with extra columns): the run is kept as
    ``(start, sent, waited, end, waiting_since, *ready_at)`` and the runs held are folded once
    there are :data:`~profiler.timing.phased_block.FOLD_AT_RUNS`."""
    end = clock()
    step_block.stack.current = step_block.parent  # type: ignore[union-attr]
    runs = step_block.runs
    runs.append((step_block.node._start, sent, waited, end, waiting_since, *ready_at))  # type: ignore[union-attr]
    if len(runs) >= FOLD_AT_RUNS:
        step_block.fold()


def _configured_extension() -> Any:
    extension = timed_calls.extension()
    if extension is not None:
        extension.configure_steps(PhasedBlock, timer_node, FOLD_AT_RUNS)
    return extension


_extension = _configured_extension()


def step_functions() -> tuple[OpenStep, CloseStep]:
    """``(open_step, close_step)``: in C where the step path's helper is in force
    (:func:`~envmanager.transport.timed_calls.compiled`), else the Python reference."""
    if timed_calls.compiled() and _extension is not None:
        return _extension.open_step, _extension.close_step
    return open_step_in_python, close_step_in_python


def whole_steps_counter() -> WholeStepsCounter:
    """How the critical path counts a fold's steps every worker replied in: ``_step_core``'s
    ``count_whole_steps`` where the step path's helper is in force (one pass in C, where the
    numpy reference makes a dozen calls, the larger part of a fold), else
    :func:`~envmanager.measurement.critical_path.whole_steps_in_python`."""
    if timed_calls.compiled() and _extension is not None:
        return _extension.count_whole_steps  # type: ignore[no-any-return]
    return whole_steps_in_python

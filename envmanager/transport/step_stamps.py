"""The trainer's side of a profiled vector step: its step block opened, stamped where each phase
ends, and closed with the critical path's stamps, as one record.

:class:`~envmanager.subprocess_env_manager.SubprocessEnvManager` times each step as a
:class:`~profiler.timing.phased_block.PhasedBlock` (the step, then sending, waiting and
receiving) and counts, with the run, whom the step waited for last (the critical path: when the
trainer began waiting, each worker's reply stamp)::

    record = step_record(step_block, ready_at, WAIT_BOUNDS_SECONDS, critical_path.add_whole_steps)
    node = record.open()                 # None: time the step with ``with`` blocks instead
    ...  send; record.sent(); wait; record.waited(); receive (filling ready_at)
    record.close()                       # or record.fail() as an exception leaves the step

``ready_at`` is the pool's list of each worker's reply stamp (None: no reply), filled in place
by every step.

It runs once per vector step, every step: what profiling adds to the trainer's step is mostly
this. Two implementations, the same figures. :class:`StepRecordInPython`, the reference and the
fallback, opens the block with ``PhasedBlock.open`` and keeps each run as a tuple of its stamps in
the block's runs (``(start, sent, waited, end, waiting_since, *ready_at)``), which the block folds into its
nodes with numpy and hands to the critical path (``count_steps``: in C too where the helper is in
force, :func:`whole_steps_counter`). ``_step_core.StepRecord`` (``_step_record.h``), the step's
state as one C struct, keeps the stamps as doubles and counts each run as it closes into sums held
in C, which go to the nodes and to the critical path when the block folds (it is the block's
``accumulator``): no tuple, no float per stamp, no numpy fold, which together were most of what
profiling added to the trainer's step (``benchmarks/trainer_step_instructions.py``). Counts,
extremes and histograms are the reference's; totals and waits are the same sums taken in another
order (equal to the last bits of a double). A step some worker did not reply in is kept as the
reference keeps it, and so is every step while the timeline records (``timers.span_blocks``, as
under ``rlprof run``): the block's fold then records each run's spans from its stamps, the
spans the ``with`` blocks would record. The C record is used where it was built unless ``RLPROF_PURE_PYTHON=1`` is
set, under the same switch as the worker's step timer
(:func:`envmanager.transport.timed_calls.compiled`).
"""

from __future__ import annotations

import time
from typing import Any, Callable, Sequence

from profiler.timing import timer_node
from profiler.timing.phased_block import FOLD_AT_RUNS, PhasedBlock

from envmanager.measurement.critical_path import WholeStepsCounter, whole_steps_in_python
from envmanager.transport import timed_calls

__all__ = ["StepRecordInPython", "step_record", "whole_steps_counter"]

_PERF_COUNTER = time.perf_counter


def _configured_extension() -> Any:
    extension = timed_calls.extension()
    if extension is not None:
        extension.configure_steps(PhasedBlock, timer_node, FOLD_AT_RUNS)
    return extension


_extension = _configured_extension()


def whole_steps_counter() -> WholeStepsCounter:
    """How the critical path counts a fold's steps every worker replied in: ``_step_core``'s
    ``count_whole_steps`` where the step path's helper is in force (one pass in C, where the
    numpy reference makes a dozen calls, the larger part of a fold), else
    :func:`~envmanager.measurement.critical_path.whole_steps_in_python`."""
    if timed_calls.compiled() and _extension is not None:
        return _extension.count_whole_steps  # type: ignore[no-any-return]
    return whole_steps_in_python


class StepRecordInPython:
    """The reference of ``_step_core.StepRecord``: one profiled vector step's stamps, each run kept
    as a tuple in the block's runs (``bounds`` and
    ``on_whole_steps`` are the C record's: here the block's ``on_fold``, the critical path's
    ``count_steps``, counts the steps as it folds them). Its methods are the Python lines the
    manager's step ran inline before, kept as few calls as the C record's: each Python call is a
    visible share of a pure-Python step."""

    __slots__ = ("block", "ready_at", "clock", "sent_at", "waited_at", "waiting_since")

    def __init__(
        self, block: PhasedBlock, ready_at: list, bounds: Sequence[float], on_whole_steps: Callable[..., Any] | None
    ) -> None:
        self.block = block
        self.ready_at = ready_at
        self.clock: Callable[[], Any] | None = None
        self.sent_at: Any = None
        self.waited_at: Any = None
        self.waiting_since: Any = None

    def open(self) -> Any:
        """Open the block in the calling thread: its node; None, opening nothing, when the step
        cannot be timed from stamps now (timing off or paused, a companion other than the
        timeline watches blocks)."""
        block = self.block
        clock = self.clock = block.open()
        if clock is None:
            return None
        self.sent_at = self.waited_at = None
        return block.node

    def sent(self) -> None:
        """The sending phase ended now; the trainer began waiting then, on the workers' clock
        (``time.perf_counter``: the timers' clock but in tests)."""
        clock = self.clock
        self.sent_at = self.waiting_since = clock()  # type: ignore[misc]
        if clock is not _PERF_COUNTER:
            self.waiting_since = _PERF_COUNTER()

    def waited(self) -> None:
        """The waiting phase ended now."""
        self.waited_at = self.clock()  # type: ignore[misc]

    def close(self) -> None:
        """Close the block now (``PhasedBlock.close`` with extra columns), with each worker's reply
        stamp in ``ready_at`` (None: no reply): the run is kept as ``(start, sent, waited, end,
        waiting_since, *ready_at)`` and the runs held are folded once there are
        :data:`~profiler.timing.phased_block.FOLD_AT_RUNS`."""
        end = self.clock()  # type: ignore[misc]
        block = self.block
        block.stack.current = block.parent  # type: ignore[union-attr]
        runs = block.runs
        runs.append((block.node._start, self.sent_at, self.waited_at, end, self.waiting_since, *self.ready_at))  # type: ignore[union-attr]
        if len(runs) >= FOLD_AT_RUNS:
            block.fold()

    def fail(self) -> None:
        """Close the block now as an exception leaving it (:meth:`PhasedBlock.fail`)."""
        self.block.fail(self.sent_at, self.waited_at)


StepRecord = Any
"""A step record: ``_step_core.StepRecord`` or :class:`StepRecordInPython`."""


def step_record(
    block: PhasedBlock, ready_at: list, bounds: Sequence[float], on_whole_steps: Callable[..., Any] | None
) -> StepRecord:
    """The step record of ``block`` for the workers whose reply stamps ``ready_at`` holds, the critical path's ``bounds`` and
    ``add_whole_steps``: in C where the step path's helper is in force
    (:func:`~envmanager.transport.timed_calls.compiled`), as the block's accumulator, else the
    Python reference."""
    if timed_calls.compiled() and _extension is not None:
        record = _extension.StepRecord(block, ready_at, bounds, on_whole_steps)
        block.accumulator = record
        return record
    return StepRecordInPython(block, ready_at, bounds, on_whole_steps)

"""Which worker the trainer waited for last in each vector step, and what that wait cost.

A vector step is over when the *last* worker's reply is ready, so that worker alone decides
how long the step waits after the second-to-last reply.  Summed over a run, that extra wait
is what the worker cost the trainer; a worker with the highest mean ``env.step`` is not
necessarily the one the trainer waits for (a slow worker that replies early costs nothing).

Each reply carries the moment the worker finished it (``time.perf_counter`` in the worker:
``CLOCK_MONOTONIC`` on Linux, one clock for every process of a machine), so the order of
replies is the order in which the workers finished, not the order in which the trainer
happened to read them.  Per step, the extra wait is::

    last reply - max(second-to-last reply, moment the trainer began waiting)

clamped at 0: if every reply was ready before the trainer began to wait, nobody cost it
anything.  With a single worker there is no second-to-last reply, so its extra wait is the
whole wait.

Recording a step is a handful of C calls when every worker replied (the usual step): ``sorted``
orders the stamps, no Python loop runs over the workers, and three figures change.  The per-worker loop is kept
for the steps in which some worker did not reply.  :meth:`CriticalPath.count_steps` counts many
steps at once from a table of their stamps: the manager's profiled step keeps its stamps with
its own timer block's and has them counted in bulk (see ``profiler.timing.phased_block.PhasedBlock``).
"""

from __future__ import annotations

import math
from itertools import repeat
from bisect import bisect_right as _bucket
from typing import Any, Callable, Sequence

import numpy as np

from profiler.timing import block_hooks
from profiler.timing.timers import TimerStack

__all__ = ["WAIT_BOUNDS_SECONDS", "CriticalPath", "stamps_within", "whole_steps_in_python"]

WAIT_BOUNDS_SECONDS = (1e-5, 3e-5, 1e-4, 3e-4, 1e-3, 3e-3, 1e-2, 3e-2, 0.1, 0.3, 1.0, 3.0)
"""Bucket bounds of the extra-wait histogram, about two per decade from 10 us to 3 s.

Bucket ``i`` counts waits in ``[bounds[i-1], bounds[i])``; the first bucket starts at 0 and
the last one (``len(bounds)``) holds everything from 3 s up.
"""


class CriticalPath:
    """Per worker: steps it replied in, how often it was last, and the extra wait it cost.

    While the timer stack records a timeline, each step also leaves an instant
    ``env_manager.last_to_reply: worker <i>`` at the moment the last reply was ready and a
    sample of the counter ``env_manager.wait_as_last`` (the step's extra wait, in seconds).

    When the timer stack is reset, the steps counted before are forgotten, as the tree forgets
    its blocks, and ``on_stack_reset`` (if given) is called: the check rides on each step,
    which reads the stack anyway.
    """

    __slots__ = (
        "timer_stack",
        "steps_all_replied",
        "partial_steps",
        "wait_as_last",
        "histograms",
        "on_stack_reset",
        "_generation",
        "_several",
        "_instant_names",
        "count_whole_steps",
    )

    def __init__(
        self, workers: int, timer_stack: TimerStack, on_stack_reset: Callable[[], None] | None = None
    ) -> None:
        self.timer_stack = timer_stack
        # A worker's vector steps are the steps all workers replied in, plus those it replied in
        # while some other did not: one counter for the usual step rather than one per worker.
        self.steps_all_replied = 0
        self.partial_steps = [0] * workers
        self.wait_as_last = [0.0] * workers
        # A step in which the worker was last adds one to a bucket of its histogram: the times
        # it was last are the sum of its histogram, not a counter more per step.
        self.histograms = [[0] * (len(WAIT_BOUNDS_SECONDS) + 1) for _ in range(workers)]
        self.on_stack_reset = on_stack_reset
        self._generation = timer_stack.generation
        self._several = workers > 1
        self._instant_names = [f"env_manager.last_to_reply: worker {index}" for index in range(workers)]
        # How count_steps counts the steps every worker replied in: the numpy reference, or the
        # step path's C helper, which the manager sets where it is in force (the same figures).
        self.count_whole_steps: WholeStepsCounter = whole_steps_in_python

    @property
    def vector_steps(self) -> list[int]:
        """Per worker, the vector steps it replied in."""
        return [self.steps_all_replied + partial for partial in self.partial_steps]

    @property
    def last_to_reply(self) -> list[int]:
        """Per worker, the vector steps whose last reply was its own."""
        return [sum(histogram) for histogram in self.histograms]

    def record_step(self, ready_at: list[float | None], waiting_since: float) -> None:
        """Count one vector step from each worker's reply time (None: no reply this step).

        ``waiting_since`` is when the trainer began waiting for the replies, on the same clock.
        """
        timer_stack = self.timer_stack
        if timer_stack.generation != self._generation:
            self._forget_steps_before_reset()
        try:
            ordered = sorted(ready_at)
            last = ordered[-1]
            # The wait the last reply alone decided began at the second-to-last reply, or when
            # the trainer began waiting if that was later (with one worker: then, always).
            began = ordered[-2] if self._several else waiting_since
            if waiting_since > began:
                began = waiting_since
            extra_wait = last - began
        except TypeError:
            # A None (no reply) is neither ordered among stamps nor subtracted from one; testing
            # for it first would cost every step more (``None in ready_at`` compares None with
            # every float the slow way).
            self._record_partial_step(ready_at, waiting_since)
            return
        self.steps_all_replied += 1
        # What _count_last does, inline.
        worker = ready_at.index(last)  # the first of equal stamps, as a loop with > finds
        if extra_wait < 0.0:
            extra_wait = 0.0
        self.wait_as_last[worker] += extra_wait
        self.histograms[worker][_bucket(WAIT_BOUNDS_SECONDS, extra_wait)] += 1
        timeline = timer_stack.timeline
        if timeline is not None and timeline.recording:
            self._mark_last(worker, last, extra_wait)

    def count_steps(self, steps: np.ndarray) -> None:
        """Count many vector steps at once, as :meth:`record_step` would one by one, but without
        timeline marks (they ended earlier; a manager records a timeline step by step).

        ``steps`` holds a row per step: the moment the trainer began waiting, then each
        worker's reply stamp. Its dtype is object when some worker did not reply in some step
        (a None in its row): those rows are counted one by one.
        """
        if self.timer_stack.generation != self._generation:
            self._forget_steps_before_reset()
        if steps.dtype == object:
            whole = []
            for waiting_since, *ready_at in steps.tolist():
                if None in ready_at:
                    self._record_partial_step(ready_at, waiting_since, mark=False)
                else:
                    whole.append((waiting_since, *ready_at))
            if whole:
                self.count_steps(np.array(whole, dtype=np.float64))
            return
        self.add_whole_steps(
            len(steps), self.count_whole_steps(steps, self._several, WAIT_BOUNDS_SECONDS, len(self.wait_as_last))
        )

    def count_steps_and_mark(self, steps: np.ndarray) -> None:
        """:meth:`count_steps`, then, while the timeline records spans, each step's instant and
        counter sample as :meth:`record_step` makes them, in step order: the manager's step
        block folds its steps here, and its fold records their spans too (while only the
        timeline watches blocks, the steps are timed from stamps, not step by step)."""
        self.count_steps(steps)
        timeline = self.timer_stack.timeline
        if timeline is None or not timeline.recording or not block_hooks.records_spans():
            return
        if steps.dtype != object:
            self._mark_whole_steps(timeline, steps)
            return
        for waiting_since, *ready_at in steps.tolist():
            replies = sorted(at for at in ready_at if at is not None)
            if not replies:
                continue
            last = replies[-1]
            # As record_step and _record_partial_step: the wait the last reply alone decided
            # began at the second-to-last reply, or when the trainer began waiting if later.
            began = replies[-2] if len(replies) > 1 and replies[-2] > waiting_since else waiting_since
            self._mark_last(ready_at.index(last), last, max(last - began, 0.0))

    def _mark_whole_steps(self, timeline: Any, steps: np.ndarray) -> None:
        """The marks of :meth:`record_step` for a float64 table of steps every worker replied in,
        with numpy (the figures of :func:`whole_steps_in_python`), added to ``timeline`` in bulk."""
        waiting_since, replies = steps[:, 0], steps[:, 1:]
        last_worker = replies.argmax(axis=1)  # the first of equal stamps, as record_step finds
        last = replies.max(axis=1)
        began = np.maximum(np.partition(replies, -2, axis=1)[:, -2], waiting_since) if self._several else waiting_since
        at = last.tolist()
        timeline.add_instants(list(zip(map(self._instant_names.__getitem__, last_worker.tolist()), at)))
        extra_wait = np.maximum(last - began, 0.0).tolist()
        timeline.add_counters(list(zip(repeat("env_manager.wait_as_last"), at, extra_wait)))

    def add_whole_steps(self, steps: int, per_worker: list[tuple[int, float, list[int]]]) -> None:
        """Add ``steps`` vector steps every worker replied in, already counted elsewhere:
        ``(worker, the wait it decided summed, its count per bucket)`` for each worker that was
        last in some of them, as :func:`whole_steps_in_python` gives them (the trainer's step
        record counts them as each step closes: ``envmanager.transport.step_stamps``)."""
        if self.timer_stack.generation != self._generation:
            self._forget_steps_before_reset()
        self.steps_all_replied += steps
        for worker, wait_sum, counts in per_worker:
            self.wait_as_last[worker] += wait_sum
            histogram = self.histograms[worker]
            histogram[:] = [mine + more for mine, more in zip(histogram, counts)]

    def _record_partial_step(
        self, ready_at: Sequence[float | None], waiting_since: float, mark: bool = True
    ) -> None:
        last_worker, last, second = self._count_partial_step(ready_at)
        if last_worker >= 0:
            self._count_last(last_worker, last, last - (second if second > waiting_since else waiting_since), mark)

    def _count_last(self, worker: int, last: float, extra_wait: float, mark: bool = True) -> None:
        """``worker``'s reply, at ``last``, was the step's last, after ``extra_wait`` seconds it
        alone decided (clamped at 0). :meth:`record_step` does the same inline: a call per
        step would cost more than these lines."""
        if extra_wait < 0.0:
            extra_wait = 0.0
        self.wait_as_last[worker] += extra_wait
        self.histograms[worker][_bucket(WAIT_BOUNDS_SECONDS, extra_wait)] += 1
        timeline = self.timer_stack.timeline
        if mark and timeline is not None and timeline.recording:
            self._mark_last(worker, last, extra_wait)

    def _mark_last(self, worker: int, last: float, extra_wait: float) -> None:
        timeline = self.timer_stack.timeline
        timeline.add_instant(self._instant_names[worker], last)
        timeline.add_counter("env_manager.wait_as_last", last, extra_wait)

    def _forget_steps_before_reset(self) -> None:
        self.clear()
        if self.on_stack_reset is not None:
            self.on_stack_reset()

    def _count_partial_step(self, ready_at: Sequence[float | None]) -> tuple[int, float, float]:
        """Count a step some worker did not reply in (it died or was shut down during it):
        ``(last worker, its stamp, the second-to-last stamp)``, the worker -1 if none replied."""
        last = second = -math.inf
        last_worker = -1
        partial_steps = self.partial_steps
        for worker, at in enumerate(ready_at):
            if at is None:
                continue
            partial_steps[worker] += 1
            if at > last:
                second = last
                last = at
                last_worker = worker
            elif at > second:
                second = at
        return last_worker, last, second

    def clear(self) -> None:
        """Forget every step counted so far (the timer stack was reset)."""
        self._generation = self.timer_stack.generation
        workers = len(self.partial_steps)
        self.steps_all_replied = 0
        self.partial_steps[:] = [0] * workers
        self.wait_as_last[:] = [0.0] * workers
        for histogram in self.histograms:
            histogram[:] = [0] * len(histogram)

    def section(self, worker: int) -> dict[str, Any] | None:
        """The worker's ``critical_path`` entry in the dump (None for an index it never had)."""
        if self.timer_stack.generation != self._generation:
            self._forget_steps_before_reset()
        if not 0 <= worker < len(self.partial_steps):
            return None
        return {
            "vector_steps": self.steps_all_replied + self.partial_steps[worker],
            "last_to_reply": sum(self.histograms[worker]),
            "wait_as_last_seconds": self.wait_as_last[worker],
            "wait_as_last_histogram": {
                "bounds_seconds": list(WAIT_BOUNDS_SECONDS),
                "counts": list(self.histograms[worker]),
            },
        }


WholeStepsCounter = Callable[[np.ndarray, bool, Sequence[float], int], list[tuple[int, float, list[int]]]]


def whole_steps_in_python(
    steps: np.ndarray, several: bool, bounds: Sequence[float], workers: int
) -> list[tuple[int, float, list[int]]]:
    """The steps of a float64 table (a row per step: when the trainer began waiting, then each
    worker's reply stamp) counted as :meth:`CriticalPath.record_step` counts them one by one:
    ``(worker, the wait it decided summed, its count per bucket of bounds)`` for each worker that
    was last in some step, in worker order. The reference of ``_step_core.count_whole_steps``,
    which the manager's critical path uses where the step path's C helper is in force."""
    waiting_since, replies = steps[:, 0], steps[:, 1:]
    last_worker = replies.argmax(axis=1)  # the first of equal stamps, as record_step finds
    last = replies.max(axis=1)
    began = np.maximum(np.partition(replies, -2, axis=1)[:, -2], waiting_since) if several else waiting_since
    extra_wait = np.maximum(last - began, 0.0)
    buckets = len(bounds) + 1
    wait_sums = np.bincount(last_worker, weights=extra_wait, minlength=workers)
    bucket_of_step = np.searchsorted(bounds, extra_wait, side="right")
    counts = np.bincount(last_worker * buckets + bucket_of_step, minlength=workers * buckets)
    counts_per_worker = counts.reshape(workers, buckets)
    return [
        (worker, float(wait_sums[worker]), counts_per_worker[worker].tolist())
        for worker in np.flatnonzero(counts_per_worker.sum(axis=1)).tolist()
    ]


def stamps_within(stamps: Sequence[float | None], start: float, end: float) -> bool:
    """Whether every stamp lies in ``[start, end]``: replies stamped during a round trip the
    trainer timed from ``start`` to ``end`` prove the workers read the trainer's clock."""
    return all(stamp is None or start <= stamp <= end for stamp in stamps)

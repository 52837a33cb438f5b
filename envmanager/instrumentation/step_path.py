"""The ``step`` an env timed in place gets: the block ``env.step`` around the env's own, at the
least cost per call.

Every env call of a worker, and every env call of a ``SyncVectorEnv`` in the trainer, goes
through it, several per vector step, so which way a call is counted depends on what is in force,
read at each call:

* blocks that no companion watches, or whose only companion records the timeline
  (``timers.plain_blocks``, ``timers.span_blocks``: ``rlprof run``'s default), on the thread that
  built the env: the run is held, ``(start, end)``, and counted into the node (and its span
  added to the stack's timeline, packed: :mod:`profiler.recording.packed_spans`) in bulk, as a
  :class:`~profiler.timing.phased_block.PhasedBlock`'s runs are: at
  :data:`~profiler.timing.phased_block.FOLD_AT_RUNS` runs, whenever the open block around the
  call, the way of counting or the timeline changes, and before anything reads the tree or the
  timeline (the holder is one of its stack's deferred recorders, which
  :meth:`~profiler.timing.timer_stack.TimerStack.settle` folds). A run that raised, and a run on a
  clock that does not give floats (a test's fake), is counted at once, after the held runs;
* anything else (memory sampling, NVTX ranges, profiler scopes), a call on another thread than
  the one that built the env, or timing switched off: a ``with`` block (:func:`_with_block`), so
  every companion sees the call.

Both ways give the same tree and the same timeline (``tests/envmanager/instrumentation/test_step_path.py``).
In a worker (``shipping`` given) the env's CPU time is sampled (:class:`~envmanager.measurement.env_time.CpuSampler`),
each call's end is stamped for the critical path (the block's end is the stamp), and the shipping
is due once the stamp passes its ``quiet_until``.

Two implementations, the same results: :func:`timed_step` below, in Python, is the reference and
the fallback; ``_step_core.c``'s ``EnvStep`` does the same in C, and the env's ``step`` attribute
is that object itself: one call from the program's Python into C per env step, no Python frame
(the frame alone was most of what timing a worker's step cost it:
``benchmarks/instrumented_step_instructions.py``). It is used where the step path's C helper is
(:func:`envmanager.transport.timed_calls.compiled`), and hands every call it does not count
itself to :func:`_with_block`. The worker's finish stamps are held the same way:
:class:`FinishStamps` (a list) here, ``_step_core.FinishStamps`` (doubles) in C.
"""

from __future__ import annotations

import functools
import threading
from array import array
from itertools import chain
from typing import Any, Callable

from profiler.timing import timers
from profiler.timing.phased_block import FOLD_AT_RUNS, add_run, take_held_runs
from profiler.timing.timer_node import TimerNode
from profiler.timing.timer_stack import TimerStack

from envmanager.instrumentation.timed_method import TimedMethod
from envmanager.transport import timed_calls

__all__ = ["BLOCK", "FinishStamps", "HeldSteps", "finish_stamps", "timed_step"]

BLOCK = "env.step"


class FinishStamps(list):
    """A worker's finish stamps since its last shipment (the reference of ``_step_core.FinishStamps``):
    ``append`` one, ``take()`` them all as float64 bytes."""

    __slots__ = ()

    def take(self) -> bytes:
        """The stamps held, as float64 bytes, and hold none."""
        held = len(self)
        stamps = array("d", self[:held])
        del self[:held]
        return stamps.tobytes()


def finish_stamps() -> Any:
    """An empty holder of finish stamps: in C where the step path's helper is in force."""
    extension = timed_calls.extension()
    if timed_calls.compiled() and extension is not None:
        return extension.FinishStamps()
    return FinishStamps()


class HeldSteps:
    """The runs of ``env.step`` :func:`timed_step` holds for one env, as ``(start, end)``, not yet
    counted into :attr:`node` (nor their spans added to :attr:`timeline`, when it is not None):
    one of its stack's deferred recorders."""

    __slots__ = ("stack", "parent", "node", "timeline", "runs", "_fold_lock", "__weakref__")

    def __init__(self, stack: TimerStack) -> None:
        self.stack = stack
        # The block the node hangs under, as the step last found it (None: not yet), and the
        # timeline the runs held record their spans on (None: they record none).
        self.parent: TimerNode | None = None
        self.node: TimerNode | None = None
        self.timeline: Any = None
        self.runs: list[tuple[float, float]] = []
        self._fold_lock = threading.Lock()

    def __del__(self) -> None:
        # A worker's envs, and their steps with them, may go before its last payload is taken.
        self.fold()

    def attach(self, parent: TimerNode) -> None:
        """Fold the runs held, then find the node under ``parent``, the open block now, and
        have the stack's ``settle()`` fold and its ``reset()`` drop what is held."""
        with self._fold_lock:
            self._fold_held()
            node = parent.children.get(BLOCK)
            self.node = node if node is not None else parent.get_child(BLOCK)
            self.parent = parent
        self.stack.deferred.add(self)

    def record_on(self, timeline: Any) -> None:
        """Fold the runs held, then hold the next ones' spans for ``timeline`` (None: none)."""
        with self._fold_lock:
            self._fold_held()
            self.timeline = timeline

    def fold(self) -> None:
        """Count the runs held into the node and add their spans to the timeline, as as many
        ``with`` blocks would have; any thread may fold (a stack's settle() does)."""
        with self._fold_lock:
            self._fold_held()

    def _fold_held(self) -> None:
        taken = take_held_runs(self.runs)
        if not taken:
            return
        total = 0.0
        longest = shortest = taken[0][1] - taken[0][0]
        for start, end in taken:
            elapsed = end - start
            total += elapsed
            if elapsed > longest:
                longest = elapsed
            elif elapsed < shortest:
                shortest = elapsed
        self.node.add_runs(total, len(taken), 0, shortest, longest)  # type: ignore[union-attr]
        if self.timeline is not None:
            self.timeline.add_packed_spans(BLOCK, array("d", chain.from_iterable(taken)).tobytes())

    def discard(self, stack: TimerStack) -> None:
        """Drop the runs held if they ran in ``stack``: it was reset, and its tree with them."""
        if stack is self.stack:
            with self._fold_lock:
                del self.runs[:]

    def count_now(self, node: TimerNode, start: Any, end: Any, failed: bool) -> None:
        """Count a run of ``node`` at once, after the runs held (one that raised, with its error;
        one on a clock of other numbers than floats), its span on the stack's timeline while the
        runs record spans."""
        self.fold()
        if failed:
            node.errors += 1
        add_run(node, end - start)
        if self.timeline is not None:
            self.timeline.add_spans([(BLOCK, start, end)])


def timed_step(timing: Any, step: Callable[[Any], Any], shipping: Any | None) -> Callable[[Any], Any]:
    """``step`` timed as the block :data:`BLOCK` under the block open in the calling thread, while
    ``timing.active``; in a worker, ``shipping`` (its :class:`~envmanager.instrumentation.timed_env.WorkerShipping`)
    samples, stamps and ships; None in the trainer. In C (``_step_core.EnvStep``) where the step
    path's helper is in force, else the closure below as a
    :class:`~envmanager.instrumentation.timed_method.TimedMethod`: either is shown, copied and
    pickled as the env's ``step``."""
    owner = threading.get_ident()
    stack = timers.get_timer_stack_for_thread(threading.current_thread())
    clock = timers.current_clock()
    sampler = shipping.cpu_sampler if shipping is not None else None
    stamps = shipping.stamps if shipping is not None else None
    worker_timers = shipping.timers if shipping is not None else None
    ship = shipping.ship if shipping is not None else None
    watched = _with_block(timing, step, clock, sampler, stamps, worker_timers, ship)
    extension = timed_calls.extension()
    if timed_calls.compiled() and extension is not None:
        compiled = extension.EnvStep(timing, step, stack, clock, sampler, stamps, worker_timers, ship, watched, BLOCK)
        return functools.update_wrapper(compiled, step)  # shown as the env's step, as a TimedMethod is

    held = HeldSteps(stack)
    stamp = stamps.append if stamps is not None else None
    get_ident = threading.get_ident

    def timed(action: Any) -> Any:
        if not timing.active:
            return step(action)
        spans = timers.span_blocks
        if not (spans or timers.plain_blocks) or get_ident() != owner:
            if held.runs:
                held.fold()
            return watched(action)
        timeline = stack.timeline if spans else None
        if timeline is not held.timeline:
            held.record_on(timeline)
        if stack.current is not held.parent:
            held.attach(stack.current)
        node: TimerNode = held.node  # type: ignore[assignment]
        stack.current = node  # blocks in the env's own code nest under env.step
        node._start = start = clock()
        try:
            if sampler is None:
                result = step(action)
            elif sampler.countdown:
                sampler.countdown -= 1
                result = step(action)
            else:
                result = sampler.measure(step, action)
        except BaseException:
            stack.current = node.parent
            held.count_now(node, start, clock(), True)
            raise
        end = clock()
        stack.current = node.parent
        if type(start) is float and type(end) is float and node is held.node:
            runs = held.runs
            runs.append((start, end))
            if len(runs) >= FOLD_AT_RUNS:
                held.fold()
        else:
            # A clock of other numbers, or the node changed inside the call (the env stepped
            # through this step again under another block): counted at once.
            held.count_now(node, start, end, False)
        if stamp is not None:
            stamp(end)
            if end >= worker_timers.quiet_until:
                ship()
        return result

    return TimedMethod(timed, step)


def _with_block(
    timing: Any, step: Callable[[Any], Any], clock: Callable[[], Any], sampler: Any, stamps: Any,
    worker_timers: Any, ship: Callable[[], None] | None,
) -> Callable[[Any], Any]:
    """The step of every call :func:`timed_step` does not hold: a ``with hierarchical_timer``
    block, so that every companion sees it (or no block, while timing is off in the trainer)."""
    hierarchical_timer = timers.hierarchical_timer
    is_enabled = timers.is_enabled
    stamp = stamps.append if stamps is not None else None

    def watched(action: Any) -> Any:
        if not timing.active or (stamp is None and not is_enabled()):
            return step(action)
        with hierarchical_timer(BLOCK):
            if sampler is None:
                result = step(action)
            elif sampler.countdown:
                sampler.countdown -= 1
                result = step(action)
            else:
                result = sampler.measure(step, action)
        if stamp is None:
            return result
        end = clock()
        stamp(end)
        if end >= worker_timers.quiet_until:
            ship()
        return result

    return watched

"""An env call timed as a timer block, the way every env step of every worker is timed.

::

    timer = make_step_timer(stack, "env.step", clock, sampler)
    node = timer.open()          # env.step is the open block; its clock runs
    try:
        result = env.step(action)
    except BaseException:
        timer.fail(node)         # counted, with an error
        raise
    timer.close(node)            # counted

``open`` makes the block ``name`` (a child of the block open in ``stack``) the open block, so
blocks in the env's own code nest under it, and starts its clock; ``close`` stops it, makes the
parent the open block again and counts the run into the block's
:class:`~profiler.timing.timer_node.TimerNode` exactly as the node's ``__exit__`` counts it
(total, count, min, max; ``fail`` an error too). With a
:class:`~envmanager.measurement.env_time.CpuSampler`, a call at least ``exact_above`` seconds long
has the sampler measure the next one. The manager's worker step timing
(:mod:`envmanager.transport.env_calls`) counts its runs here, at a fraction of what a ``with
hierarchical_timer(...)`` costs (the zero-edit env timing has a C callable of its own in the same
helper, ``_step_core.EnvStep``: :mod:`envmanager.instrumentation.step_path`). A worker's env step is one call, ``timer.step_env(env,
action)``, which opens, steps the env (its CPU time measured when the sampler says so), and closes
or fails: in C, that is one call from the worker's Python where a Python function around
``open``/``close`` was three (see ``_step_core.c``).

``step_env`` does not count its runs into the node as they close: the timer holds them (in C, as
sums of doubles: total, count, shortest, longest; in Python, as a list of run lengths) and adds
them to the node when it folds: at :data:`~profiler.timing.phased_block.FOLD_AT_RUNS` runs held,
before anything reads the tree (the timer is one of its stack's deferred recorders, which
:meth:`~profiler.timing.timer_stack.TimerStack.settle` folds: payloads, dumps, readers), when
the open block around the call changes, and when the timer goes. A stack's reset drops them with
the tree. A failed call is counted at once (with its error), and so is a run on a clock that
does not give floats (a test's fake), after the held runs are folded. Making a float, an int and up to three slot
writes per figure per step was most of what timing a worker's step cost it
(``benchmarks/worker_step_instructions.py``). ``open``, ``close`` and ``fail`` count at once, as
before: their callers read the node.

Two implementations, the same results: :class:`PythonStepTimer` below is the reference and the
fallback; ``_step_core.c`` (built by ``setup.py`` as an optional extension) makes the same type
in C, and is used where it was built unless ``RLPROF_PURE_PYTHON=1`` is set (the variable that
keeps the timer's own accelerator off too). :func:`compiled` says which one
:func:`make_step_timer` gives; :func:`use_compiled` switches, for tests.
"""

from __future__ import annotations

import math
import threading
from types import ModuleType
from typing import Any, Callable, Protocol

from profiler.timing.accelerator import load_extension
from profiler.timing import timers
from profiler.timing.phased_block import FOLD_AT_RUNS, take_held_runs
from profiler.timing.timer_node import TimerNode
from profiler.timing.timer_stack import TimerStack

from envmanager.measurement.env_time import CpuSampler

__all__ = ["STEP_CORE_VERSION", "PythonStepTimer", "StepTimer", "compiled", "extension", "make_step_timer", "unavailable_reason", "use_compiled"]


class StepTimer(Protocol):
    """What :func:`make_step_timer` gives, in C or in Python."""

    def open(self) -> TimerNode: ...

    def close(self, node: TimerNode) -> None: ...

    def fail(self, node: TimerNode) -> None: ...

    def step_env(self, env: Any, action: Any) -> Any: ...

    def fold(self) -> None: ...

    def discard(self, stack: TimerStack) -> None: ...


STEP_CORE_VERSION = 12
"""The interface version ``_step_core.c`` must say (its ``STEP_CORE_VERSION``): raised with it. A
build that says another is stale (built from other sources) and is not used (see
:func:`profiler.timing.accelerator.load_extension`)."""


def _load() -> tuple[ModuleType | None, str]:
    module, reason = load_extension("envmanager.transport._step_core", STEP_CORE_VERSION, "the step path's C helper")
    if module is not None:
        module.configure(TimerNode, TimerStack, CpuSampler, timers, FOLD_AT_RUNS)
    return module, reason


_extension, unavailable_reason = _load()
_use_extension = _extension is not None


def extension() -> ModuleType | None:
    """The loaded C helper (``_step_core``), None where it is not: also the home of the trainer's
    step stamps (:mod:`envmanager.transport.step_stamps`) and of the zero-edit env step
    (:mod:`envmanager.instrumentation.step_path`)."""
    return _extension


def compiled() -> bool:
    """Whether :func:`make_step_timer` gives the C implementation."""
    return _use_extension


def use_compiled(flag: bool) -> None:
    """Have :func:`make_step_timer` give the C implementation (where it was built) or the Python
    one, from its next call on; timers made before keep theirs."""
    global _use_extension
    if flag and _extension is None:
        raise RuntimeError(f"the step path's C helper is not loaded: {unavailable_reason}")
    _use_extension = flag


def make_step_timer(
    stack: TimerStack,
    name: str,
    clock: Callable[[], Any],
    sampler: CpuSampler | None = None,
    exact_above: float = math.inf,
    watched: Callable[[Any, Any], Any] | None = None,
) -> StepTimer:
    """A timer of the block ``name`` under the block open in ``stack``, on ``clock`` (the timers'
    clock, read once as the block opens and once as it closes), that has ``sampler`` (if any)
    measure the call after one of ``exact_above`` seconds or more. Its ``step_env(env, action)``
    hands the call to ``watched`` (if any) while a companion watches blocks."""
    if _use_extension:
        return _extension.StepTimer(stack, name, clock, sampler, exact_above, watched)  # type: ignore[union-attr]
    return PythonStepTimer(stack, name, clock, sampler, exact_above, watched)


class PythonStepTimer:
    """The reference of ``_step_core.c``'s ``StepTimer``: the same steps in the same order."""

    __slots__ = ("stack", "name", "clock", "sampler", "exact_above", "watched", "parent", "node", "runs",
                 "_fold_lock", "__weakref__")

    def __init__(
        self,
        stack: TimerStack,
        name: str,
        clock: Callable[[], Any],
        sampler: CpuSampler | None = None,
        exact_above: float = math.inf,
        watched: Callable[[Any, Any], Any] | None = None,
    ) -> None:
        self.stack = stack
        self.name = name
        self.clock = clock
        self.sampler = sampler
        self.exact_above = exact_above
        self.watched = watched
        # step_env's node and the block it hangs under, as step_env last found them (None: not
        # yet), and its runs not counted into the node yet (their lengths, in order).
        self.parent: TimerNode | None = None
        self.node: TimerNode | None = None
        self.runs: list[float] = []
        self._fold_lock = threading.Lock()

    def __del__(self) -> None:
        # A worker's envs, and the timer with them, go before its last payload is taken.
        self.fold()

    def open(self) -> TimerNode:
        """Make the block the open one and start its clock; its node, for :meth:`close`."""
        stack = self.stack
        parent = stack.current
        try:
            node = parent.children[self.name]
        except KeyError:
            node = parent.get_child(self.name)
        stack.current = node
        node._start = self.clock()
        return node

    def close(self, node: TimerNode) -> None:
        """Stop the block :meth:`open` gave and count the run."""
        self._count(node, self.clock() - node._start)

    def _count(self, node: TimerNode, elapsed: Any) -> None:
        """The block closed after ``elapsed``: its parent open again, the sampler told of a slow
        call, the run counted into the node at once."""
        self.stack.current = node.parent
        if self.sampler is not None and elapsed >= self.exact_above:
            self.sampler.countdown = 0  # a slow call is measured from the next one on
        node.total += elapsed
        node.count += 1
        if elapsed > node.max:
            node.max = elapsed
        if elapsed < node.min:
            node.min = elapsed

    def fail(self, node: TimerNode) -> None:
        """:meth:`close`, the run counted as an exception leaving it."""
        node.errors += 1
        self.close(node)

    def step_env(self, env: Any, action: Any) -> Any:
        """``env.step(action)``, timed as the block, its CPU time measured when the sampler's
        countdown is out; while a companion watches blocks (``timers.plain_blocks`` false) the
        call goes to ``watched``, if there is one."""
        if self.watched is not None and not timers.plain_blocks:
            return self.watched(env, action)
        stack = self.stack
        if stack.current is not self.parent:
            self._attach(stack.current)
        node = self.node
        stack.current = node  # blocks in the env's own code nest under this one
        node._start = self.clock()
        try:
            sampler = self.sampler
            if sampler is None:
                result = env.step(action)
            elif sampler.countdown:
                sampler.countdown -= 1
                result = env.step(action)
            else:
                result = sampler.measure(env.step, action)
        except BaseException:
            self.fail(node)
            raise
        # close(node) with the run held, in this frame (a call more was a visible share of a step)
        end = self.clock()
        start = node._start
        if type(start) is not float or type(end) is not float or node is not self.node:
            # A clock of other numbers (a test's fake), or the timer moved to another node inside
            # the call (an env stepping another through this timer): the held runs first, then
            # this one counted at once, into its own node.
            self.fold()
            self._count(node, end - start)
            return result
        elapsed = end - start
        stack.current = node.parent
        if sampler is not None and elapsed >= self.exact_above:
            sampler.countdown = 0  # a slow call is measured from the next one on
        runs = self.runs
        runs.append(elapsed)
        if len(runs) >= FOLD_AT_RUNS:
            self.fold()
        return result

    def _attach(self, parent: TimerNode) -> None:
        """Find the block's node under ``parent``, the open block now, for step_env's runs (after
        folding those held for the node before), and have the stack's ``settle()`` fold what the
        timer holds and its ``reset()`` drop it."""
        self.fold()
        try:
            node = parent.children[self.name]
        except KeyError:
            node = parent.get_child(self.name)
        self.stack.deferred.add(self)
        self.node = node
        self.parent = parent

    def fold(self) -> None:
        """Add the runs step_env holds to the node, as as many ``TimerNode.__exit__`` would have
        counted them; any thread may fold (a stack's settle() does)."""
        with self._fold_lock:
            taken = take_held_runs(self.runs)
            if not taken:
                return
            total = 0.0
            for elapsed in taken:
                total += elapsed
            self.node.add_runs(total, len(taken), 0, min(taken), max(taken))  # type: ignore[union-attr]

    def discard(self, stack: TimerStack) -> None:
        """Drop the runs held if they ran in ``stack``: it was reset, and its tree with them."""
        if stack is self.stack:
            with self._fold_lock:
                del self.runs[:]


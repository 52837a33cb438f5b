"""The ``step`` an env timed in place gets: the block ``env.step`` around the env's own, at the
least cost per call.

Every env call of a worker, and every env call of a ``SyncVectorEnv`` in the trainer, goes
through it, several per vector step, so which way a call is counted depends on what is in force,
read at each call:

* the plain blocks (``timers.plain_blocks``: no companion watches blocks): a step timer
  (:mod:`envmanager.transport.timed_calls`, in C where it was built) counts the run;
* blocks whose only companion records the timeline (``timers.span_blocks``: ``rlprof run``'s
  default): the run is counted here, in this frame, as :meth:`TimerNode._exit_and_record` counts
  it (the node's figures, then the span ``("env.step", start, end)`` on the stack's timeline).
  A ``with hierarchical_timer(...)`` block cost a lookup, two method calls and a Python
  ``__exit__`` frame per call, and a worker's finish stamp a clock read of its own, where the
  block's end is the stamp;
* anything else (memory sampling, NVTX ranges, profiler scopes), a call on another thread than
  the one that built the env, or timing switched off: a ``with`` block, so every companion sees
  the call.

The three ways give the same tree and the same timeline (``tests/envmanager/instrumentation/test_step_path.py``).
In a worker (``shipping`` given) the env's CPU time is sampled (:class:`~envmanager.measurement.env_time.CpuSampler`),
each call's end is stamped for the critical path, and the shipping is due once the stamp passes
its ``quiet_until``.
"""

from __future__ import annotations

import threading
from typing import Any, Callable

from profiler.timing import timers
from profiler.timing.timer_node import TimerNode
from profiler.timing.timer_stack import TimerStack

from envmanager.transport.timed_calls import make_step_timer

__all__ = ["BLOCK", "timed_step"]

BLOCK = "env.step"


def timed_step(timing: Any, step: Callable[[Any], Any], shipping: Any | None) -> Callable[[Any], Any]:
    """``step`` timed as the block :data:`BLOCK` under the block open in the calling thread, while
    ``timing.active``; in a worker, ``shipping`` (its :class:`~envmanager.instrumentation.timed_env.WorkerShipping`)
    samples, stamps and ships; None in the trainer."""
    hierarchical_timer = timers.hierarchical_timer
    is_enabled = timers.is_enabled
    get_ident = threading.get_ident
    owner = get_ident()
    stack = timers.get_timer_stack_for_thread(threading.current_thread())
    clock = timers.current_clock()
    sampler = shipping.cpu_sampler if shipping is not None else None
    step_timer = make_step_timer(stack, BLOCK, clock)
    open_step, close_step, fail_step = step_timer.open, step_timer.close, step_timer.fail
    stamp = shipping.stamps.append if shipping is not None else None
    worker_timers = shipping.timers if shipping is not None else None

    def timed(action: Any) -> Any:
        if not timing.active or (stamp is None and not is_enabled()):
            return step(action)
        if timers.span_blocks and get_ident() == owner:
            parent = stack.current
            node = parent.children.get(BLOCK)
            if node is None:
                node = parent.get_child(BLOCK)
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
                node.errors += 1
                _count_run(node, stack, start, clock())
                raise
            end = clock()
            stack.current = parent
            elapsed = end - start
            node.total += elapsed
            node.count += 1
            if elapsed > node.max:
                node.max = elapsed
            if elapsed < node.min:
                node.min = elapsed
            timeline = stack.timeline
            if timeline is not None:
                timeline.spans.append((BLOCK, start, end))
                timeline.spans_recorded += 1
        elif timers.plain_blocks and get_ident() == owner:
            node = open_step()
            try:
                if sampler is None or sampler.countdown:
                    if sampler is not None:
                        sampler.countdown -= 1
                    result = step(action)
                else:
                    result = sampler.measure(step, action)
            except BaseException:
                fail_step(node)
                raise
            close_step(node)
            if stamp is None:
                return result
            end = clock()
        else:
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
        if stamp is not None:
            stamp(end)
            if end >= worker_timers.quiet_until:
                shipping.ship()
        return result

    return timed


def _count_run(node: TimerNode, stack: TimerStack, start: float, end: float) -> None:
    """Count a run of ``node`` that raised, from ``start`` to ``end``, as
    :meth:`TimerNode._exit_and_record` would (its ``errors`` already counted)."""
    stack.current = node.parent
    elapsed = end - start
    node.total += elapsed
    node.count += 1
    node.max = max(node.max, elapsed)
    node.min = min(node.min, elapsed)
    if stack.timeline is not None:
        stack.timeline.spans.append((node.name, start, end))
        stack.timeline.spans_recorded += 1

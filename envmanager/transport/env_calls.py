"""How a worker calls its envs' ``reset`` and ``step``: inside a ``max_concurrency`` permit,
timed as ``env.reset`` / ``env.step``, a sample of calls on the CPU clock too.

Each combination is its own pair of functions, built once per worker, so that a worker pays for
nothing it does not do (see :func:`make_env_calls`).
"""

from __future__ import annotations

import threading
from typing import Any, Callable

from gymnasium import Env

from profiler.timing import timers

from envmanager.lifetime.permits import ConcurrencyPermits
from envmanager.measurement.env_time import EXACT_ABOVE_SECONDS, CpuSampler

__all__ = ["make_env_calls"]


def make_env_calls(
    permits: ConcurrencyPermits | None, profiling: bool, cpu_sampler: CpuSampler
) -> tuple[Callable, Callable]:
    """The functions through which every env reset/step goes, built once per worker.

    They hold a ``max_concurrency`` permit while the env runs, and time the env's own
    work (not the wait for a permit) as ``env.reset`` / ``env.step``, on the wall clock and,
    on a sample of calls, on the CPU clock too (see :mod:`envmanager.measurement.env_time`).  Each is
    built for its case, so that a worker pays for nothing it does not do: without permits no
    ``with`` is entered for them (even an empty context manager costs two Python calls a
    step), and without profiling nothing is timed.
    """
    if not profiling:
        if permits is None:
            return _plain_reset, _plain_step

        def guard_reset(env: Env, seed: Any, options: Any) -> tuple[Any, dict]:
            with permits:
                return env.reset(seed=seed, options=options)

        def guard_step(env: Env, action: Any) -> tuple:
            with permits:
                return env.step(action)

        return guard_reset, guard_step

    hierarchical_timer = timers.hierarchical_timer
    # The guards run on the thread that builds the envs (the worker's main thread, a Ray
    # actor's one thread), so its stack is looked up once.
    stack = timers.get_timer_stack_for_thread(threading.current_thread())
    clock = timers.current_clock()
    exact_above = EXACT_ABOVE_SECONDS

    def sampled_step(env: Env, action: Any) -> tuple:
        if cpu_sampler.countdown:
            cpu_sampler.countdown -= 1
            return env.step(action)
        return cpu_sampler.measure(env.step, action)

    def timed_reset(env: Env, seed: Any, options: Any) -> tuple[Any, dict]:
        with hierarchical_timer("env.reset"):
            if cpu_sampler.countdown:
                cpu_sampler.countdown -= 1
                return env.reset(seed=seed, options=options)
            return cpu_sampler.measure(env.reset, seed=seed, options=options)

    def timed_step(env: Env, action: Any) -> tuple:
        # Every env call of every step goes through here, so the ``env.step`` block is timed
        # inline, as TimerNode.__enter__ and __exit__ would time it, at half the cost of a
        # ``with``; while a companion watches blocks (timers.plain_blocks false) it is a ``with``.
        if not timers.plain_blocks:
            with hierarchical_timer("env.step"):
                return sampled_step(env, action)
        parent = stack.current
        try:
            node = parent.children["env.step"]
        except KeyError:
            node = parent.get_child("env.step")
        stack.current = node  # blocks in the env's own code nest under env.step
        node._start = start = clock()
        try:
            if cpu_sampler.countdown:
                cpu_sampler.countdown -= 1
                result = env.step(action)
            else:
                result = cpu_sampler.measure(env.step, action)
        except BaseException:
            node.errors += 1
            raise
        finally:
            elapsed = clock() - start
            stack.current = parent
            if elapsed >= exact_above:
                cpu_sampler.countdown = 0  # a slow env is measured from its next call on
            node.total += elapsed
            node.count += 1
            if elapsed > node.max:
                node.max = elapsed
            if elapsed < node.min:
                node.min = elapsed
        return result

    if permits is None:
        return timed_reset, timed_step

    def timed_reset_with_permit(env: Env, seed: Any, options: Any) -> tuple[Any, dict]:
        with permits:
            return timed_reset(env, seed, options)

    def timed_step_with_permit(env: Env, action: Any) -> tuple:
        with permits:
            return timed_step(env, action)

    return timed_reset_with_permit, timed_step_with_permit


def _plain_reset(env: Env, seed: Any, options: Any) -> tuple[Any, dict]:
    return env.reset(seed=seed, options=options)


def _plain_step(env: Env, action: Any) -> tuple:
    return env.step(action)

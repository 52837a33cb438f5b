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
from envmanager.transport.timed_calls import make_step_timer

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

    def watched_step(env: Env, action: Any) -> tuple:
        with hierarchical_timer("env.step"):
            return sampled_step(env, action)

    # Every env call of every step goes through here, so it is the step timer's step_env
    # (envmanager.transport.timed_calls: one call into C where the helper was built), at a
    # fraction of the cost of a ``with``; while a companion watches blocks (timers.plain_blocks
    # false) it hands the call to watched_step, a ``with``.
    timed_step = make_step_timer(stack, "env.step", clock, cpu_sampler, EXACT_ABOVE_SECONDS, watched_step).step_env

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

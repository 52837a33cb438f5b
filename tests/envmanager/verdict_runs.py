"""Real short runs built to show one verdict each: real worker processes, pipes and envs.

Each builder runs a training-like loop over a :class:`SubprocessEnvManager` (a ``policy.act``
block, then ``envs.step``) and returns the dumped tree, loaded back as a file would be. The
effects are planted large (sleeps, CPU burnt by the process clock, quarter-megabyte
observations) so that the verdict they call for holds with margin on a loaded, shared machine;
none of the assertions built on them depends on how fast the machine is.

The timers are reset once the workers are up and the envs reset, as a user resets them after
warm-up: spawning processes is start-up, not what the verdicts are about.
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
import time
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import gymnasium as gym
import numpy as np
from envmanager_testenvs import CountingEnv, CpuBurningEnv
from gymnasium import spaces

import profiler
import profiler.recording.memory
from envmanager.subprocess_env_manager import SubprocessEnvManager
from profiler.tree.timer_json import normalize_timing_tree

__all__ = [
    "COMPUTING_STRAGGLER_CPU_SECONDS",
    "LEAK_BYTES_PER_STEP",
    "LEAK_STEPS",
    "PLANTED_DELAYS",
    "PLANTED_STEPS",
    "LargeObservationEnv",
    "LeakingEnv",
    "cheap_envs_on_fewer_cores_run",
    "computing_straggler_run",
    "cpu_oversubscribed_run",
    "identical_cartpoles_run",
    "large_observations_run",
    "leaking_worker_run",
    "planted_straggler_run",
    "run_vector_steps",
    "slow_policy_run",
]

PINNED_CORES = 2
"""The CPU-bound run is pinned to this many cores (this machine's count), so it oversubscribes
them on a machine of any size."""


class LargeObservationEnv(CountingEnv):
    """Returns the same quarter-megabyte image every step: no work in the env, all in the pipe."""

    def __init__(self, shape: tuple[int, ...] = (4, 256, 256)) -> None:
        super().__init__(episode_length=10_000)
        self.observation_space = spaces.Box(0, 255, shape=shape, dtype=np.uint8)
        self.image = np.zeros(shape, dtype=np.uint8)

    def _obs(self) -> np.ndarray:
        return self.image


LEAK_BYTES_PER_STEP = 256 * 1024
"""What the leaking env keeps from every step: 50 MiB over the run, several times the threshold."""
LEAK_STEPS = 200


class LeakingEnv(CountingEnv):
    """With ``leak``, keeps a quarter megabyte of written memory from every step in a list that is
    never emptied, as an env that logs every step's data forever; without, the same env, keeping
    nothing."""

    def __init__(self, leak: bool) -> None:
        super().__init__(episode_length=10_000)
        self.leak = leak
        self.kept: list[bytes] = []

    def step(self, action: Any) -> tuple:
        if self.leak:
            self.kept.append(b"\x01" * LEAK_BYTES_PER_STEP)  # written, so resident, unlike calloc'd pages
        return super().step(action)


def run_vector_steps(
    env_fns: Sequence[Callable[[], gym.Env]],
    steps: int,
    *,
    policy_seconds: float = 0.0,
    manager: Callable[..., Any] = SubprocessEnvManager,
    **manager_options: Any,
) -> dict[str, Any]:
    """Step ``env_fns`` in the workers of ``manager`` ``steps`` times; the dumped tree, loaded back.

    ``policy_seconds`` is slept inside a ``policy.act`` block before each step: a slow policy.
    """
    profiler.reset_timers()
    envs = manager(env_fns, **manager_options)
    try:
        envs.reset(seed=0)
        profiler.reset_timers()
        actions = np.zeros(envs.num_envs, dtype=np.int64)
        with profiler.hierarchical_timer("train"):
            for _ in range(steps):
                with profiler.hierarchical_timer("policy.act"):
                    if policy_seconds:
                        time.sleep(policy_seconds)
                envs.step(actions)
    finally:
        envs.close()
    return normalize_timing_tree(json.loads(json.dumps(profiler.get_timer_tree())))


@contextlib.contextmanager
def pinned_to_cores(count: int) -> Iterator[None]:
    """Run (and start worker processes) on at most ``count`` of the cores this process may use."""
    allowed = sorted(os.sched_getaffinity(0))
    os.sched_setaffinity(0, allowed[:count])
    try:
        yield
    finally:
        os.sched_setaffinity(0, allowed)


def cpu_oversubscribed_run() -> dict[str, Any]:
    """6 identical envs burning 1.5 ms of CPU a step on 2 cores: 9 ms of CPU for each step."""
    with pinned_to_cores(PINNED_CORES):
        return run_vector_steps([lambda: CpuBurningEnv(0.0015)] * 6, steps=60)


PLANTED_DELAYS = (0.003, 0.003, 0.003, 0.018)
"""Seconds each env of the planted-straggler run sleeps a step: worker 3 is 6x slower, by 15 ms,
more than a loaded machine delays waking the others."""
PLANTED_STEPS = 30


def planted_straggler_run(**manager_options: Any) -> dict[str, Any]:
    """4 envs sleeping 3 ms a step, but worker 3's sleeps 18 ms: 6x slower."""
    return run_vector_steps(
        [_counting_env(delay) for delay in PLANTED_DELAYS], steps=PLANTED_STEPS, **manager_options
    )


COMPUTING_STRAGGLER_CPU_SECONDS = 0.010
"""CPU seconds worker 3's env burns a step in the computing-straggler run; the others' envs burn none."""


def computing_straggler_run() -> dict[str, Any]:
    """4 envs, worker 3's burning 10 ms of CPU a step and the others' nothing: slow by computing,
    where the planted straggler is slow by sleeping."""
    env_fns = [_counting_env(0.0)] * 3 + [lambda: CpuBurningEnv(COMPUTING_STRAGGLER_CPU_SECONDS)]
    return run_vector_steps(env_fns, steps=PLANTED_STEPS)


def large_observations_run() -> dict[str, Any]:
    """4 envs that compute nothing and return 256 KiB images, sent through the pipe."""
    return run_vector_steps([LargeObservationEnv] * 4, steps=40, shared_memory=False)


def slow_policy_run() -> dict[str, Any]:
    """A policy that takes 20 ms a step over 2 workers sleeping 1 ms."""
    return run_vector_steps([_counting_env(0.001)] * 2, steps=30, policy_seconds=0.020)


def cheap_envs_on_fewer_cores_run() -> dict[str, Any]:
    """4 envs computing a few microseconds a step on 2 cores: more workers than cores, but the
    cores' floor on a step (their CPU time shared out) is a few percent of the step's wall time on
    a machine of any speed. (4 CartPoles are not that on every machine: on a slow 2-core one their
    38 us of CPU a step each put the floor at 10-11% of the step, and the verdict is then true.)"""
    with pinned_to_cores(PINNED_CORES):
        return run_vector_steps([_counting_env(0.0)] * 4, steps=1500)


def identical_cartpoles_run(steps: int = 1500) -> dict[str, Any]:
    """CleanRL's PPO setting: 4 identical CartPole envs, many steps, no env slower than another."""
    return run_vector_steps([lambda: gym.make("CartPole-v1")] * 4, steps=steps,
                            autoreset_mode="same_step")


def leaking_worker_run(leaking: Sequence[bool]) -> dict[str, Any]:
    """One worker per entry of ``leaking``, a :class:`LeakingEnv` that leaks where it is true; every
    process samples its memory every 4 blocks."""
    profiler.recording.memory.start_sampling(every_blocks=4)
    try:
        return run_vector_steps([functools.partial(LeakingEnv, leak) for leak in leaking], steps=LEAK_STEPS)
    finally:
        profiler.recording.memory.stop_sampling()


def _counting_env(delay: float) -> Callable[[], gym.Env]:
    return lambda: CountingEnv(episode_length=10_000, delay=delay)

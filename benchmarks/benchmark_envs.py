"""The envs every throughput benchmark steps, and how a round counts steps per second.

Shared by ``vector_throughput.py``, ``profiling_overhead.py``, ``step_floor.py`` and
``ray_throughput.py``, so that their rows are the same envs and none of them imports another.
"""

from __future__ import annotations

import time
from typing import Any, Callable

import gymnasium as gym
import numpy as np
from gymnasium import spaces

__all__ = ["ENVS", "BusyEnv", "SleepingEnv", "steps_per_second"]


class BusyEnv(gym.Env):
    """Burns ``work_seconds`` of CPU per step: a stand-in for a physics simulator."""

    def __init__(self, work_seconds: float) -> None:
        self.observation_space = spaces.Box(-1, 1, shape=(8,), dtype=np.float32)
        self.action_space = spaces.Discrete(2)
        self.work_seconds = work_seconds
        self.t = 0

    def reset(self, *, seed: int | None = None, options: dict | None = None) -> tuple:
        super().reset(seed=seed)
        self.t = 0
        return np.zeros(8, dtype=np.float32), {}

    def step(self, action: Any) -> tuple:
        end = time.perf_counter() + self.work_seconds
        while time.perf_counter() < end:
            pass
        self.t += 1
        return np.full(8, self.t % 2, dtype=np.float32), 1.0, False, self.t >= 500, {}


class SleepingEnv(BusyEnv):
    """Waits ``work_seconds`` off the CPU per step: a stand-in for an env whose simulator runs in
    another process or on another machine (a game engine, a robot), the worker idle meanwhile."""

    def step(self, action: Any) -> tuple:
        time.sleep(self.work_seconds)
        self.t += 1
        return np.full(8, self.t % 2, dtype=np.float32), 1.0, False, self.t >= 500, {}


ENVS: dict[str, Callable[[], gym.Env]] = {
    "CartPole-v1": lambda: gym.make("CartPole-v1"),
    "busy-50us": lambda: BusyEnv(50e-6),
    "busy-1ms": lambda: BusyEnv(1e-3),
    "sleep-1ms": lambda: SleepingEnv(1e-3),
}


def steps_per_second(envs: Any, num_envs: int, steps: int) -> float:
    actions = np.zeros(num_envs, dtype=np.int64)
    started = time.perf_counter()
    for _ in range(steps):
        envs.step(actions)
    return steps * num_envs / (time.perf_counter() - started)

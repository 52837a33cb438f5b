"""Env-steps per second: Gymnasium's AsyncVectorEnv against SubprocessEnvManager.

    python benchmarks/vector_throughput.py            # the full table (a few minutes)
    python benchmarks/vector_throughput.py --quick    # a rough table in well under a minute

For CartPole-v1 and a synthetic env doing ~50 us and ~1 ms of CPU work per step, with 2, 4
and 8 envs, it measures AsyncVectorEnv and our manager in several settings.  All variants of
one row are alive at once and measured in alternating rounds, so a burst of noise from the
machine hits every variant alike; the figure is the median round.  "ours" is the manager at
default settings (profiling on, shared memory, one env per worker); "ours epw=k" runs k envs
per worker process.

Goals (printed, never asserted, since they depend on the machine):
  * ours with profiling on, default settings: ratio to AsyncVectorEnv >= 1.0
  * profiling overhead (on vs off): <= 3 %
  * ours with envs_per_worker > 1 on CartPole: >= 2x AsyncVectorEnv
"""

from __future__ import annotations

import argparse
import statistics
import time
from typing import Any, Callable

import gymnasium as gym
import numpy as np
from gymnasium import spaces
from gymnasium.vector import AsyncVectorEnv

from envmanager import SubprocessEnvManager


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


ENVS: dict[str, Callable[[], gym.Env]] = {
    "CartPole-v1": lambda: gym.make("CartPole-v1"),
    "busy-50us": lambda: BusyEnv(50e-6),
    "busy-1ms": lambda: BusyEnv(1e-3),
}


def variants(num_envs: int) -> dict[str, Callable[[list], Any]]:
    """The vector envs compared in one row, by label; ours at default settings but for the label."""
    per_worker = max(2, num_envs // 2)
    return {
        ASYNC: lambda fns: AsyncVectorEnv(fns),
        OURS: lambda fns: SubprocessEnvManager(fns),
        OURS_OFF: lambda fns: SubprocessEnvManager(fns, profiling=False),
        f"ours epw={per_worker}": lambda fns: SubprocessEnvManager(fns, envs_per_worker=per_worker),
    }


ASYNC, OURS, OURS_OFF = "async", "ours", "ours profiling off"


def steps_per_second(envs: Any, num_envs: int, steps: int) -> float:
    actions = np.zeros(num_envs, dtype=np.int64)
    started = time.perf_counter()
    for _ in range(steps):
        envs.step(actions)
    return steps * num_envs / (time.perf_counter() - started)


def measure_row(env_name: str, num_envs: int, steps: int, rounds: int) -> dict[str, float]:
    env_fns = [ENVS[env_name]] * num_envs
    built = {label: make(env_fns) for label, make in variants(num_envs).items()}
    samples: dict[str, list[float]] = {label: [] for label in built}
    try:
        for envs in built.values():
            envs.reset(seed=0)
            steps_per_second(envs, num_envs, max(10, steps // 10))  # warm up
        labels = list(built)
        for round_index in range(rounds):
            # Rotate who goes first, so no variant always runs right after the same neighbour.
            shift = round_index % len(labels)
            for label in labels[shift:] + labels[:shift]:
                samples[label].append(steps_per_second(built[label], num_envs, steps))
    finally:
        for envs in built.values():
            envs.close()
    return {label: statistics.median(values) for label, values in samples.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer steps and rounds: rough figures, fast")
    args = parser.parse_args()
    rounds = 3 if args.quick else 7
    rows = []
    print(f"{'env':<12} {'n':>2}  {'variant':<20} {'steps/s':>9}  {'vs async':>8}")
    for env_name in ENVS:
        steps = {"CartPole-v1": 2000, "busy-50us": 1000, "busy-1ms": 100}[env_name]
        if args.quick:
            steps //= 5
        for num_envs in (2, 4, 8):
            row = measure_row(env_name, num_envs, steps, rounds)
            rows.append((env_name, num_envs, row))
            for label, rate in row.items():
                print(
                    f"{env_name:<12} {num_envs:>2}  {label:<20} {rate:>9.0f}  {rate / row[ASYNC]:>8.2f}",
                    flush=True,
                )
    print_goals(rows)


def print_goals(rows: list[tuple[str, int, dict[str, float]]]) -> None:
    """The three goals, as measured in this run (medians over the rows)."""
    ratio = statistics.median(row[OURS] / row[ASYNC] for _, _, row in rows)
    overhead = statistics.median(row[OURS_OFF] / row[OURS] - 1 for _, _, row in rows)
    per_worker = statistics.median(
        next(rate for label, rate in row.items() if label.startswith("ours epw")) / row[ASYNC]
        for env_name, _, row in rows
        if env_name == "CartPole-v1"
    )
    print()
    print(f"ours (profiling on) / async, median over rows:      {ratio:.2f}   goal >= 1.00")
    print(f"profiling overhead (off vs on), median over rows:   {overhead:+.1%}   goal <= 3%")
    print(f"ours envs_per_worker>1 / async on CartPole, median: {per_worker:.2f}   goal >= 2.00")


if __name__ == "__main__":
    main()

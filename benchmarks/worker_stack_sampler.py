"""What sampling each env worker's stack costs the workers' steps.

    python benchmarks/worker_stack_sampler.py [--rounds 7] [--steps 3000] [--envs 4]

An ``AsyncVectorEnv`` (fork) timed in place, as ``rlprof run`` times it
(``envmanager.instrumentation``), steps its envs with and without the workers' stack samplers
(``profiler.automatic.stack_sampler.StackSampler`` in worker mode, one look every
``WORKER_INTERVAL``), in alternating rounds (who goes first rotates). The trainer's own sampler is
off in both, so the difference is the workers' samplers alone. Two kinds of env:

* ``cartpole``: CartPole, a few microseconds a step: the workers mostly wait on their pipes, with
  the GIL released, which is where a sampler's look costs least;
* ``python-cpu``: 1 ms of pure Python a step: the worker holds the GIL, and each look must take it
  from the env's step (the costliest case).

Printed per kind: the median time per vector step of each and the median of the per-round
ratios (sampled / not sampled), next to the goal (<= 1.02x), for the wall time of the trainer's
loop and for the CPU time of the worker processes (user + system, from their start to their end,
read once they are joined: on a machine other work keeps busy, a steadier figure than the wall
time, and the one the samplers' looks add to directly).
"""

from __future__ import annotations

import argparse
import resource
import statistics
import time

import gymnasium as gym
import numpy as np

from profiler.automatic import stack_sampler
from profiler.timing import timers

from envmanager.instrumentation import instrument_environments

GOAL = 1.02


class PythonCpuEnv(gym.Env):
    """Burns about a millisecond of pure Python per step (the GIL held throughout)."""

    observation_space = gym.spaces.Box(-1.0, 1.0, (4,), np.float32)
    action_space = gym.spaces.Discrete(2)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        return np.zeros(4, np.float32), {}

    def step(self, action):
        end = time.perf_counter() + 0.001
        total = 0
        while time.perf_counter() < end:
            total += 1
        return np.zeros(4, np.float32), 0.0, False, False, {}


MAKERS = {"cartpole": lambda: gym.make("CartPole-v1"), "python-cpu": PythonCpuEnv}


def workers_cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def seconds_per_step(kind: str, envs_count: int, steps: int, sampled: bool) -> tuple[float, float]:
    """One round: build the vector env timed in place, step it, close it; the mean step time and
    the workers' CPU time per step."""
    timers.reset_timers()
    cpu_before = workers_cpu_seconds()
    instrumentation = instrument_environments()
    original = stack_sampler.is_sampled
    stack_sampler.is_sampled = lambda stack: sampled  # the workers sample as if the trainer were
    try:
        envs = gym.vector.AsyncVectorEnv([MAKERS[kind]] * envs_count, context="fork")
    finally:
        stack_sampler.is_sampled = original
    try:
        envs.reset(seed=0)
        actions = np.zeros(envs_count, dtype=np.int64)
        for _ in range(100):  # warm-up
            envs.step(actions)
        start = time.perf_counter()
        for _ in range(steps):
            envs.step(actions)
        elapsed = time.perf_counter() - start
    finally:
        envs.close()
        instrumentation.finish()
    return elapsed / steps, (workers_cpu_seconds() - cpu_before) / steps


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--steps", type=int, default=3000)
    parser.add_argument("--envs", type=int, default=4)
    args = parser.parse_args()
    print(f"worker stack sampler: one look every {stack_sampler.WORKER_INTERVAL * 1e3:.0f} ms per worker, "
          f"{args.envs} workers, {args.steps} vector steps a round, {args.rounds} rounds")
    for kind in MAKERS:
        walls: dict[bool, list[float]] = {False: [], True: []}
        cpus: dict[bool, list[float]] = {False: [], True: []}
        for round_number in range(args.rounds):
            for sampled in ((False, True) if round_number % 2 == 0 else (True, False)):
                wall, cpu = seconds_per_step(kind, args.envs, args.steps, sampled)
                walls[sampled].append(wall)
                cpus[sampled].append(cpu)
        for what, figures in (("wall per step", walls), ("workers' CPU per step", cpus)):
            ratios = [on / off for on, off in zip(figures[True], figures[False])]
            print(f"  {kind:<10} {what:<22} not sampled {statistics.median(figures[False]) * 1e6:8.1f} us   "
                  f"sampled {statistics.median(figures[True]) * 1e6:8.1f} us   ratio "
                  f"{statistics.median(ratios):.3f}x (goal <= {GOAL:.2f}x; rounds {min(ratios):.3f}-{max(ratios):.3f})")

if __name__ == "__main__":
    main()

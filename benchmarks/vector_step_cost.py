"""What timing a program's own vector env in place costs the trainer per vector step.

    python benchmarks/vector_step_cost.py [--rounds 7] [--steps 2000] [--envs 4] [--vector sb3|async]

A ``SubprocVecEnv`` (Stable-Baselines3) or ``AsyncVectorEnv`` (Gymnasium) of CartPole envs (fork)
is stepped with fixed actions, in alternating rounds (who goes first rotates), as the program
builds it (``plain``) and built while ``envmanager.instrumentation`` times it in place as
``rlprof run`` does (the timeline recorded; no stack sampler, which ``benchmarks/worker_stack_sampler.py``
measures). Printed per way: the median over rounds of the trainer thread's CPU time per vector
step (``time.thread_time``: the machine's other work does not count in it) and of the workers' CPU
time per vector step (user + system of the worker processes, read as they end), and the median
per-round difference to ``plain``. On a shared machine these CPU figures hold up where wall time
does not; the wall time per step is printed too, with the load average.
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import time
from typing import Any

import gymnasium as gym
import numpy as np

from profiler.recording import events
from profiler.timing import timers

from envmanager.instrumentation import instrument_environments

WAYS = ("plain", "in place")


def children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def build(vector: str, envs: int) -> Any:
    factories = [lambda: gym.make("CartPole-v1") for _ in range(envs)]
    if vector == "sb3":
        from stable_baselines3.common.vec_env import SubprocVecEnv

        return SubprocVecEnv(factories, start_method="fork")
    return gym.vector.AsyncVectorEnv(factories, context="fork")


def one_round(vector: str, envs: int, steps: int, in_place: bool) -> tuple[float, float, float]:
    """(trainer CPU, workers' CPU, wall) per vector step."""
    instrumentation = instrument_environments() if in_place else None
    try:
        workers_before = children_cpu()
        venv = build(vector, envs)
        actions = np.array([index % 2 for index in range(envs)])
        venv.reset()
        for _ in range(50):
            venv.step(actions)
        cpu, wall = time.thread_time(), time.perf_counter()
        for _ in range(steps):
            venv.step(actions)
        cpu, wall = time.thread_time() - cpu, time.perf_counter() - wall
        venv.close()
        workers = children_cpu() - workers_before
    finally:
        if instrumentation is not None:
            instrumentation.finish()
    return cpu / steps, workers / steps, wall / steps


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--steps", type=int, default=2000)
    parser.add_argument("--envs", type=int, default=4)
    parser.add_argument("--vector", choices=("sb3", "async"), default="sb3")
    arguments = parser.parse_args()
    events.start_recording()  # as rlprof run records the timeline
    figures: dict[str, list[tuple[float, float, float]]] = {way: [] for way in WAYS}
    for round_number in range(arguments.rounds):
        order = WAYS if round_number % 2 == 0 else WAYS[::-1]
        for way in order:
            timers.reset_timers()
            figures[way].append(one_round(arguments.vector, arguments.envs, arguments.steps, way == "in place"))
    print(f"{arguments.vector}: {arguments.envs} CartPole envs, {arguments.steps} vector steps a round, "
          f"{arguments.rounds} rounds; load average {os.getloadavg()[0]:.2f} on {os.cpu_count()} cores")
    for way in WAYS:
        trainer, workers, wall = (statistics.median(round_[part] for round_ in figures[way]) for part in range(3))
        line = (f"{way:>9}: trainer {trainer * 1e6:7.1f} us CPU/step, workers {workers * 1e6:7.1f} us CPU/step, "
                f"wall {wall * 1e6:7.1f} us/step")
        if way != "plain":
            over = [[(mine[part] - base[part]) * 1e6 for mine, base in zip(figures[way], figures["plain"])]
                    for part in range(2)]
            line += f"   (+{statistics.median(over[0]):.1f} trainer, +{statistics.median(over[1]):.1f} workers)"
        print(line)


if __name__ == "__main__":
    main()

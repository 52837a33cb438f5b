"""Real short runs built to show what the machine does to a run: real worker processes, pipes,
envs, and a real busy program outside the run.

Like verdict_runs.py, each builder runs a training-like loop over a :class:`SubprocessEnvManager`
and returns the dumped tree loaded back; the effects are planted large (CPU burnt by the process
clock, a busy loop holding a core) so the verdicts hold with margin on a loaded, shared machine.
Beside the tree, a builder returns what the kernel itself counted, read by the test's side from
``/proc/<pid>/task/<tid>/schedstat``, to check the dump against.
"""

from __future__ import annotations

import json
import os
from typing import Any

import numpy as np
from envmanager_testenvs import CountingEnv, CpuBurningEnv
from kernel_counts import kernel_run_queue_seconds
from verdict_runs import PINNED_CORES, pinned_to_cores

import profiler
from envmanager.subprocess_env_manager import SubprocessEnvManager
from profiler.tree.timer_json import normalize_timing_tree

__all__ = ["sleeping_run", "stepped_run"]


def stepped_run(workers: int, cpu_seconds: float, steps: int) -> tuple[dict[str, Any], list[float]]:
    """``workers`` envs burning ``cpu_seconds`` of CPU a step, ``steps`` vector steps, on 2 cores.

    Returns the dumped tree and, per worker, the run-queue delay the kernel counted for it between
    the end of the warm-up (the timers' reset) and the last step, read from its schedstat here.
    """
    tree, workers_counted, _ = _run([lambda: CpuBurningEnv(cpu_seconds)] * workers, steps)
    return tree, workers_counted


def sleeping_run(workers: int, sleep_seconds: float, steps: int) -> tuple[dict[str, Any], float]:
    """``workers`` envs sleeping ``sleep_seconds`` a step, ``steps`` vector steps, on 2 cores: a
    run that needs a core only for moments, so that others' load costs it little.

    Returns the dumped tree and the run-queue delay the kernel counted for the whole run (every
    worker and the trainer's process) over the same interval.
    """
    tree, workers_counted, trainer_counted = _run(
        [lambda: CountingEnv(episode_length=10_000, delay=sleep_seconds)] * workers, steps)
    return tree, sum(workers_counted) + trainer_counted


def _run(env_fns: list[Any], steps: int) -> tuple[dict[str, Any], list[float], float]:
    with pinned_to_cores(PINNED_CORES):
        profiler.reset_timers()
        envs = SubprocessEnvManager(env_fns)
        try:
            envs.reset(seed=0)
            pids = [handle.process.pid for handle in envs._pool.workers]
            profiler.reset_timers()
            before = [kernel_run_queue_seconds(pid) for pid in pids]
            trainer_before = kernel_run_queue_seconds(os.getpid())
            actions = np.zeros(envs.num_envs, dtype=np.int64)
            with profiler.hierarchical_timer("train"):
                for _ in range(steps):
                    envs.step(actions)
            counted = [kernel_run_queue_seconds(pid) - start for pid, start in zip(pids, before)]
            trainer_counted = kernel_run_queue_seconds(os.getpid()) - trainer_before
        finally:
            envs.close()
    tree = normalize_timing_tree(json.loads(json.dumps(profiler.get_timer_tree())))
    return tree, counted, trainer_counted

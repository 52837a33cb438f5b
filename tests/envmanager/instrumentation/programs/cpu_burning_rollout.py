"""A rollout whose envs burn CPU, pinned to two cores, knowing nothing of rlprof.

``python cpu_burning_rollout.py COUNTED.json --vec async --envs 6 --cpu 0.003 --steps 40`` pins
itself (and so its workers) to two cores, steps envs that each burn ``--cpu`` seconds of their
process's CPU time a step, in a Gymnasium ``AsyncVectorEnv`` or an SB3 ``SubprocVecEnv`` (fork),
and writes the run-queue delay the kernel counted over the steps for the thread that steps its
envs (``trainer``) and, per worker, for the thread that steps its env (``workers``), read from
``/proc/<pid>/task/<pid>/schedstat`` beside the run: what the dump's figures are checked against.
"""

import argparse
import json
import os
import time

import gymnasium as gym
import numpy as np


class CpuBurningEnv(gym.Env):
    observation_space = gym.spaces.Box(-1.0, 1.0, (1,), np.float32)
    action_space = gym.spaces.Discrete(2)

    def __init__(self, cpu_seconds):
        self.cpu_seconds = cpu_seconds

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        return np.zeros(1, np.float32), {}

    def step(self, action):
        end = time.process_time() + self.cpu_seconds
        while time.process_time() < end:
            pass
        return np.zeros(1, np.float32), 0.0, False, False, {}


def run_queue_seconds(pid):
    """The run-queue delay of the process's main thread, the one that steps its env (or envs)."""
    with open(f"/proc/{pid}/task/{pid}/schedstat") as file:
        return int(file.read().split()[1]) * 1e-9


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("counted")
    parser.add_argument("--vec", choices=("async", "subproc"), default="async")
    parser.add_argument("--envs", type=int, default=6)
    parser.add_argument("--cpu", type=float, default=0.003)
    parser.add_argument("--steps", type=int, default=40)
    args = parser.parse_args()
    os.sched_setaffinity(0, sorted(os.sched_getaffinity(0))[:2])
    makers = [lambda: CpuBurningEnv(args.cpu)] * args.envs
    if args.vec == "async":
        envs = gym.vector.AsyncVectorEnv(makers, context="fork")
        pids = [process.pid for process in envs.processes]
        envs.reset(seed=0)
        step = envs.step
    else:
        from stable_baselines3.common.vec_env import SubprocVecEnv

        envs = SubprocVecEnv(makers, start_method="fork")
        pids = [process.pid for process in envs.processes]
        envs.reset()
        step = envs.step
    before = [run_queue_seconds(pid) for pid in pids]
    trainer_before = run_queue_seconds(os.getpid())
    actions = np.zeros(args.envs, dtype=np.int64)
    for _ in range(args.steps):
        step(actions)
    counted = {"trainer": run_queue_seconds(os.getpid()) - trainer_before,
               "workers": [run_queue_seconds(pid) - start for pid, start in zip(pids, before)]}
    envs.close()
    with open(args.counted, "w") as file:
        json.dump(counted, file)


if __name__ == "__main__":
    main()

"""A vector step whose second worker can only finish once the trainer has unpickled the first
worker's reply: it runs as under python only where the trainer reads each reply as soon as it is
there, while the other workers still step (it knows nothing of rlprof).

``python overlapped_replies.py --vector async|sb3 [--steps N] [--sleep S] [--direct]``: worker 0's
step answers at once, with an info whose unpickling in the trainer sets an event; worker 1's step
waits for that event (for WAIT_SECONDS at most: plenty on a loaded machine), then sleeps S seconds
(a planted slow worker), and says whether its wait timed out. ``--direct``: the program calls
``step_async`` and ``step_wait`` itself. Prints what the steps gave, as JSON.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import time

import gymnasium as gym
import numpy as np

WAIT_SECONDS = 10.0
UNPICKLED = multiprocessing.get_context("fork").Event()  # shared with the forked workers


def unpickled_in_the_trainer() -> str:
    UNPICKLED.set()
    return "unpickled"


class SetsTheEventWhenUnpickled:
    def __reduce__(self):
        return unpickled_in_the_trainer, ()


class Handshake(gym.Env):
    observation_space = gym.spaces.Box(-1.0, 1.0, (1,), np.float32)
    action_space = gym.spaces.Discrete(2)

    def __init__(self, index: int, sleep: float) -> None:
        self.index, self.sleep = index, sleep

    def reset(self, seed=None, options=None):
        super().reset(seed=seed)
        return np.zeros(1, np.float32), {}

    def step(self, action):
        if self.index == 0:
            info = {"handshake": SetsTheEventWhenUnpickled()}
        else:
            info = {"timed_out": not UNPICKLED.wait(WAIT_SECONDS)}
            UNPICKLED.clear()  # before the reply: the next step's handshake comes after it was read
            time.sleep(self.sleep)
        return np.full(1, float(action), np.float32), 1.0, False, False, info


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--vector", choices=("async", "sb3"), required=True)
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument("--sleep", type=float, default=0.0)
    parser.add_argument("--direct", action="store_true")
    args = parser.parse_args()
    factories = [lambda index=index: Handshake(index, args.sleep) for index in range(2)]
    if args.vector == "async":
        envs = gym.vector.AsyncVectorEnv(factories, context="fork")
        envs.reset(seed=0)
    else:
        from stable_baselines3.common.vec_env import SubprocVecEnv

        envs = SubprocVecEnv(factories, start_method="fork")
        envs.reset()
    steps = []
    for step in range(args.steps):
        actions = np.array([step % 2, 1 - step % 2])
        if args.direct:
            envs.step_async(actions)
            result = envs.step_wait()
        else:
            result = envs.step(actions)
        observations, rewards, *_, infos = result
        if args.vector == "async":
            timed_out, handshake = infos["timed_out"][1], infos["handshake"][0]
        else:
            timed_out, handshake = infos[1]["timed_out"], infos[0]["handshake"]
        steps.append({"observations": observations.tolist(), "rewards": rewards.tolist(),
                      "timed_out": bool(timed_out), "handshake": handshake})
    envs.close()
    print(json.dumps({"steps": steps}))


if __name__ == "__main__":
    main()

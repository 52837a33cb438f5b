"""A step_wait(timeout=...) whose reply comes after the timeout but before twice it: the program
gets the class's TimeoutError, under rlprof as without it. Prints what step_wait gave, as JSON."""

from __future__ import annotations

import json
import multiprocessing
import sys
import time

import gymnasium as gym
import numpy as np

TIMEOUT, LATE = 1.0, 1.5  # the reply comes half a timeout after the timeout: robust to a loaded machine


class LateEnv(gym.Env):
    """Answers a step with action 1 LATE seconds after it was sent."""

    observation_space = gym.spaces.Box(-1.0, 1.0, (1,), np.float32)
    action_space = gym.spaces.Discrete(2)

    def reset(self, seed=None, options=None):
        return np.zeros(1, np.float32), {}

    def step(self, action):
        if action == 1:
            time.sleep(LATE)
        return np.zeros(1, np.float32), 0.0, False, False, {}


if __name__ == "__main__":
    envs = gym.vector.AsyncVectorEnv([LateEnv, LateEnv], context=sys.argv[1])
    envs.reset(seed=0)
    envs.step(np.array([0, 0]))
    envs.step_async(np.array([0, 1]))
    try:
        envs.step_wait(timeout=TIMEOUT)
        outcome = "stepped"
    except multiprocessing.TimeoutError as error:
        outcome = f"{type(error).__name__}: {error}"
    envs.close(terminate=True)
    print(json.dumps({"outcome": outcome}))

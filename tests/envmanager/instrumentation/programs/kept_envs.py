"""Keeps an env of a vector env that runs its envs in the trainer, drops the vector env unclosed,
and steps the env it kept, as a program may keep one to evaluate or render with.

``python kept_envs.py OUT.json``: a ``SyncVectorEnv`` and a ``DummyVecEnv`` of two CartPoles each;
for each, the program keeps its first env, deletes the vector env, then resets the kept env once
and steps it ten times; it writes each kept env's observations, as JSON, so a run under
``rlprof run`` can be compared with a plain one.
"""

import json
import sys

import gymnasium as gym
import numpy as np
from gymnasium.vector import SyncVectorEnv
from stable_baselines3.common.vec_env import DummyVecEnv

KEPT_STEPS = 10


def make():
    return gym.make("CartPole-v1")


def step_kept(env, seed):
    observation, _ = env.reset(seed=seed)
    observations = [observation.tolist()]
    for _ in range(KEPT_STEPS):
        observation, *_ = env.step(0)
        observations.append(observation.tolist())
    return observations


def main():
    seen = {}
    vector = SyncVectorEnv([make, make])
    vector.reset(seed=0)
    vector.step(np.array([0, 1]))
    kept = vector.envs[0]
    del vector
    seen["sync"] = step_kept(kept, 1)

    vector = DummyVecEnv([make, make])
    vector.reset()
    kept = vector.envs[0]
    del vector
    seen["dummy"] = step_kept(kept, 2)
    with open(sys.argv[1], "w") as file:
        json.dump(seen, file)


if __name__ == "__main__":
    main()

"""Copies, pickles and looks at its envs, as a program may, knowing nothing of rlprof.

``python env_copies.py OUT.json --context spawn --steps 12`` copies CartPole envs (``copy.copy``,
``copy.deepcopy``, ``pickle``, cloudpickle of a closure holding one) in this process and, through
``AsyncVectorEnv.call``, in the vector env's worker processes; steps each copy and checks whether
the original moved; reads the names, docs and signatures of the envs' ``step`` and ``reset``, of ``gymnasium.make``
and of the vector env classes' methods (and pickles those by name); steps vector
envs built from ``functools.partial(gymnasium.make, ...)`` and from a closure holding an env made
here; and writes all it saw as JSON, so a run under ``rlprof run`` can be compared with a plain one.
"""

import argparse
import functools
import json

import gymnasium as gym
import numpy as np

from copied_envs import Snapshots, classes_report, report


def rollout(envs, steps):
    """The observations of a seeded reset and ``steps`` steps of alternating actions."""
    observation, _ = envs.reset(seed=9)
    observations = [observation.tolist()]
    for step in range(steps):
        observation, *_ = envs.step(np.full(envs.num_envs, step % 2))
        observations.append(observation.tolist())
    envs.close()
    return observations


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("out")
    parser.add_argument("--context", default="fork")
    parser.add_argument("--steps", type=int, default=12)
    args = parser.parse_args()
    seen = {"classes": classes_report(),
            "trainer": report(gym.make("CartPole-v1")),
            "trainer wrapped": report(Snapshots(gym.make("CartPole-v1")))}
    envs = gym.vector.AsyncVectorEnv([lambda: Snapshots(gym.make("CartPole-v1"))] * 2, context=args.context)
    seen["workers"] = list(envs.call("copies_report"))
    seen["workers rollout"] = rollout(envs, args.steps)
    made = functools.partial(gym.make, "CartPole-v1")
    seen["partial make rollout"] = rollout(gym.vector.AsyncVectorEnv([made] * 2, context=args.context), args.steps)
    template = gym.make("CartPole-v1")
    seen["made env rollout"] = rollout(gym.vector.AsyncVectorEnv([lambda: template] * 2, context=args.context),
                                       args.steps)
    with open(args.out, "w") as file:
        json.dump(seen, file)


if __name__ == "__main__":
    main()

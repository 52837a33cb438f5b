"""A short run that starts slowly: a few seconds of start-up, then a short loop over Gymnasium's
``AsyncVectorEnv`` of 4 CartPole envs. It knows nothing of rlprof, but for the block of
``--timed-policy-ms``.

``--start-up-seconds S`` sleeps S seconds before building the envs (loading a dataset or a
checkpoint, say); ``--slow-worker-ms M`` makes the last env's steps M milliseconds longer (a
slower level, a slow disk: a straggler); ``--timed-policy-ms M`` chooses each step's actions in M
milliseconds, in a ``policy.act`` block its author added (a policy slower than the envs, timed);
``--untimed-ms M`` spends M milliseconds of the program's own code between steps, in no block
(choosing actions, storing the rollout); ``--steps N`` vector steps.
"""

import argparse
import time

import gymnasium as gym
import numpy as np
from slow_steps import SlowStep


def make_env(index, slow_seconds):
    def thunk():
        env = gym.make("CartPole-v1")
        return SlowStep(env, slow_seconds) if index == 3 and slow_seconds else env

    return thunk


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--start-up-seconds", type=float, default=0.0)
    parser.add_argument("--slow-worker-ms", type=float, default=0.0)
    parser.add_argument("--timed-policy-ms", type=float, default=None)
    parser.add_argument("--untimed-ms", type=float, default=0.0)
    parser.add_argument("--steps", type=int, default=100)
    args = parser.parse_args()
    if args.timed_policy_ms is not None:
        from profiler import hierarchical_timer
    time.sleep(args.start_up_seconds)
    envs = gym.vector.AsyncVectorEnv([make_env(index, args.slow_worker_ms / 1000) for index in range(4)])
    envs.reset(seed=0)
    actions = np.zeros(4, dtype=np.int64)
    for _ in range(args.steps):
        if args.timed_policy_ms is not None:
            with hierarchical_timer("policy.act"):
                time.sleep(args.timed_policy_ms / 1000)
        if args.untimed_ms:
            time.sleep(args.untimed_ms / 1000)
        envs.step(actions)
    envs.close()
    print("steps:", args.steps)

"""A rollout that asks its workers for something slow between steps, knowing nothing of rlprof.

``python slow_worker_call.py --context spawn --envs 2`` steps CartPole envs in an
``AsyncVectorEnv`` and, every 10 steps, calls the envs' ``planted_slow_render`` through
``AsyncVectorEnv.call``: it runs in each worker process, outside ``step`` and ``reset``, and burns
a quarter of a second of the worker's CPU time. Before closing the envs the trainer thinks for a
fifth of a second (its own work, with the workers waiting for their next call).
"""

import argparse
import time

import gymnasium as gym
import numpy as np

BURN_SECONDS = 0.25


class SlowRender(gym.Wrapper):
    def planted_slow_render(self):
        end = time.process_time() + BURN_SECONDS
        while time.process_time() < end:
            pass
        return 0


def make_env():
    return SlowRender(gym.make("CartPole-v1"))


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--context", default=None)
    parser.add_argument("--envs", type=int, default=2)
    parser.add_argument("--steps", type=int, default=40)
    args = parser.parse_args()
    envs = gym.vector.AsyncVectorEnv([make_env] * args.envs, context=args.context)
    rng = np.random.default_rng(3)
    envs.reset(seed=5)
    for step in range(args.steps):
        envs.step(rng.integers(0, 2, size=args.envs))
        if step % 10 == 9:
            envs.call("planted_slow_render")
    time.sleep(0.2)
    envs.close()


if __name__ == "__main__":
    main()

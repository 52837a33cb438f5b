"""Two envs in Gymnasium's ``AsyncVectorEnv`` workers, stepped with random actions: no policy, no
learning, so the loop is the envs and their pipe (two workers: no more than the cores of the
machine the tests run on, so that the CPU's contention is not what limits it). The envs are
:class:`wide_cartpole.WideCartPole` (12 kB observations, which ``shared_memory=False`` sends
through the pipe), or CartPole's own (16 bytes) with ``--narrow``. It knows nothing of rlprof."""

import argparse

import gymnasium as gym
from wide_cartpole import WideCartPole

if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=1500)
    parser.add_argument("--narrow", action="store_true")
    args = parser.parse_args()

    make = (lambda: gym.make("CartPole-v1")) if args.narrow else WideCartPole
    envs = gym.vector.AsyncVectorEnv([make] * 2, shared_memory=False)
    envs.reset(seed=0)
    envs.action_space.seed(0)
    for _ in range(args.steps):
        envs.step(envs.action_space.sample())
    envs.close()

"""Stable-Baselines3's DQN whose replay buffer is large enough to see fill: CartPole behind a
3,072-number observation (24 kB a transition, observation and next), 4,000 steps into a buffer of
4,000. It knows nothing of rlprof.

``keeps`` as its argument: the env also keeps 50 kB of every step, a leak beside the buffer.
"""

import sys

import gymnasium as gym
import numpy as np
import torch
from stable_baselines3 import DQN

WIDTH = 3072


class WideCartPole(gym.Env):
    observation_space = gym.spaces.Box(-np.inf, np.inf, (WIDTH,), np.float32)
    action_space = gym.spaces.Discrete(2)

    def __init__(self, keeps):
        self.inner = gym.make("CartPole-v1")
        self.keeps = keeps
        self.kept = []

    def wide(self, observation):
        return np.resize(observation.astype(np.float32), WIDTH)

    def reset(self, *, seed=None, options=None):
        observation, info = self.inner.reset(seed=seed)
        return self.wide(observation), info

    def step(self, action):
        observation, reward, terminated, truncated, info = self.inner.step(action)
        if self.keeps:
            self.kept.append(b"x" * 50_000)  # written, so resident
        return self.wide(observation), reward, terminated, truncated, info


if __name__ == "__main__":
    torch.set_num_threads(1)
    model = DQN("MlpPolicy", WideCartPole(keeps=sys.argv[1:] == ["keeps"]), buffer_size=4000,
                learning_starts=2000, seed=0, device="cpu", policy_kwargs={"net_arch": [32]})
    model.learn(total_timesteps=4000)
    print("timesteps:", model.num_timesteps)

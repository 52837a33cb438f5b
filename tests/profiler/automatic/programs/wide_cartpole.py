"""CartPole behind a 3,072-number observation, for the replay-buffer programs beside it: a
transition (observation and next) takes 24 kB of a replay buffer. ``keeps``: the env also keeps
50 kB of every step, a leak beside the buffer."""

import gymnasium as gym
import numpy as np

WIDTH = 3072


class WideCartPole(gym.Env):
    observation_space = gym.spaces.Box(-np.inf, np.inf, (WIDTH,), np.float32)
    action_space = gym.spaces.Discrete(2)

    def __init__(self, keeps=False):
        self.inner = gym.make("CartPole-v1")
        self.keeps = keeps
        self.kept = []

    def wide(self, observation):
        # np.resize's values (the observation repeated), at a twentieth of its 80 us: the env's
        # compute is CartPole's, and the pipe's verdict is not left to a thin margin over it.
        return np.tile(observation.astype(np.float32), -(-WIDTH // observation.size))[:WIDTH]

    def reset(self, *, seed=None, options=None):
        observation, info = self.inner.reset(seed=seed)
        return self.wide(observation), info

    def step(self, action):
        observation, reward, terminated, truncated, info = self.inner.step(action)
        if self.keeps:
            self.kept.append(b"x" * 50_000)  # written, so resident
        return self.wide(observation), reward, terminated, truncated, info

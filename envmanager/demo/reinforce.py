"""A linear-softmax policy trained with REINFORCE, in numpy: the agent ``rlprof demo`` profiles.

Small on purpose: it must learn CartPole visibly within seconds on a laptop CPU, and read in one
sitting. Episodes are collected from a vectorized environment in ``SAME_STEP`` autoreset mode, so
every step's transition belongs to the episode that produced it.
"""

from __future__ import annotations

import numpy as np

from profiler import timed

__all__ = ["LinearSoftmaxPolicy", "EpisodeBuffers"]


class LinearSoftmaxPolicy:
    """Action probabilities ``softmax([observation, 1] @ weights)`` for a discrete action space."""

    def __init__(self, observation_size: int, action_count: int, learning_rate: float, seed: int) -> None:
        self.weights = np.zeros((observation_size + 1, action_count))
        self.learning_rate = learning_rate
        self.random = np.random.default_rng(seed)

    def probabilities(self, observations: np.ndarray) -> np.ndarray:
        features = _with_bias(observations)
        logits = features @ self.weights
        logits -= logits.max(axis=1, keepdims=True)
        exponentials = np.exp(logits)
        return exponentials / exponentials.sum(axis=1, keepdims=True)

    @timed(name="policy.act")
    def act(self, observations: np.ndarray) -> np.ndarray:
        """Sample one action per row of ``observations``."""
        probabilities = self.probabilities(observations)
        cumulative = probabilities.cumsum(axis=1)
        draws = self.random.random((len(observations), 1))
        return (draws > cumulative).sum(axis=1).clip(max=probabilities.shape[1] - 1)

    @timed(name="policy.update")
    def update(self, episodes: list[tuple[np.ndarray, np.ndarray, np.ndarray]], discount: float) -> None:
        """One REINFORCE step over finished episodes, with returns normalized across them."""
        observations = np.concatenate([episode[0] for episode in episodes])
        actions = np.concatenate([episode[1] for episode in episodes])
        returns = np.concatenate([discounted_returns(episode[2], discount) for episode in episodes])
        advantages = (returns - returns.mean()) / (returns.std() + 1e-8)
        probabilities = self.probabilities(observations)
        # Gradient of log softmax: features x (one_hot(action) - probabilities).
        chosen = np.zeros_like(probabilities)
        chosen[np.arange(len(actions)), actions] = 1.0
        gradient = _with_bias(observations).T @ ((chosen - probabilities) * advantages[:, None])
        self.weights += self.learning_rate * gradient / len(episodes)


class EpisodeBuffers:
    """The steps of each environment's episode in progress, handed out when the episode ends."""

    def __init__(self, num_envs: int) -> None:
        self.steps: list[list[tuple[np.ndarray, int, float]]] = [[] for _ in range(num_envs)]

    def add(
        self, observations: np.ndarray, actions: np.ndarray, rewards: np.ndarray, done: np.ndarray
    ) -> list[tuple[np.ndarray, np.ndarray, np.ndarray]]:
        """Record one vector step; return the episodes it finished as (observations, actions, rewards)."""
        finished = []
        for index, steps in enumerate(self.steps):
            steps.append((observations[index], int(actions[index]), float(rewards[index])))
            if done[index]:
                finished.append((
                    np.array([step[0] for step in steps]),
                    np.array([step[1] for step in steps]),
                    np.array([step[2] for step in steps]),
                ))
                steps.clear()
        return finished


def discounted_returns(rewards: np.ndarray, discount: float) -> np.ndarray:
    returns = np.empty_like(rewards, dtype=float)
    running = 0.0
    for index in range(len(rewards) - 1, -1, -1):
        running = rewards[index] + discount * running
        returns[index] = running
    return returns


def _with_bias(observations: np.ndarray) -> np.ndarray:
    return np.hstack([observations, np.ones((len(observations), 1))])

"""A CleanRL-style off-policy loop that fills Stable-Baselines3's ``ReplayBuffer`` itself, as
CleanRL's DQN, SAC and TD3 scripts do (no SB3 algorithm): 4,000 steps of
:class:`wide_cartpole.WideCartPole` (24 kB a transition) into a buffer of 4,000, random actions, a
batch sampled every 4 steps once 1,000 are in. It knows nothing of rlprof.
"""

import gymnasium as gym
import numpy as np
from stable_baselines3.common.buffers import ReplayBuffer

from wide_cartpole import WideCartPole

if __name__ == "__main__":
    envs = gym.vector.SyncVectorEnv([WideCartPole])
    buffer = ReplayBuffer(4000, envs.single_observation_space, envs.single_action_space, "cpu",
                          handle_timeout_termination=False)
    rng = np.random.default_rng(0)
    observations, _ = envs.reset(seed=0)
    sampled = 0.0
    for step in range(4000):
        actions = rng.integers(0, 2, size=1)
        next_observations, rewards, terminations, truncations, infos = envs.step(actions)
        buffer.add(observations, next_observations, actions, rewards, terminations, [{}])
        observations = next_observations
        if step >= 1000 and step % 4 == 0:
            sampled += float(buffer.sample(32).rewards.sum())
    print("sampled reward:", sampled)

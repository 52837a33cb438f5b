"""Stable-Baselines3's DQN on CartPole, as its docs show it, over ``DummyVecEnv``. It knows nothing
of rlprof.

``--timesteps N``; ``--gradient-steps G`` optimizer steps each time it trains (every 4 env steps
of each env, after 200 steps of collecting alone).
"""

import argparse

import torch
from stable_baselines3 import DQN
from stable_baselines3.common.env_util import make_vec_env

if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--timesteps", type=int, default=2000)
    parser.add_argument("--gradient-steps", type=int, default=1)
    args = parser.parse_args()

    torch.set_num_threads(1)
    env = make_vec_env("CartPole-v1", n_envs=2, seed=0)
    model = DQN("MlpPolicy", env, learning_starts=200, train_freq=4, gradient_steps=args.gradient_steps,
                target_update_interval=250, seed=0, device="cpu")
    model.learn(total_timesteps=args.timesteps)
    print("timesteps:", model.num_timesteps)

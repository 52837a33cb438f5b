"""Stable-Baselines3's A2C over 8 CartPole envs in ``SubprocVecEnv`` workers, on the CPU, as its
docs show it. It knows nothing of rlprof.

``--torch-threads N`` calls ``torch.set_num_threads(N)`` first (torch's own count unless told);
``--cores N`` runs the program, and so its workers, on the first N cores it may use (all unless
told); ``--timesteps N``: how long it learns (8,000 steps unless told).
"""

import argparse
import os

import torch
from stable_baselines3 import A2C
from stable_baselines3.common.env_util import make_vec_env
from stable_baselines3.common.vec_env import SubprocVecEnv

if __name__ == "__main__":  # SubprocVecEnv's workers start by forkserver: they import this file
    parser = argparse.ArgumentParser()
    parser.add_argument("--torch-threads", type=int, default=None)
    parser.add_argument("--cores", type=int, default=None)
    parser.add_argument("--timesteps", type=int, default=8000)
    args = parser.parse_args()

    if args.cores:
        os.sched_setaffinity(0, sorted(os.sched_getaffinity(0))[:args.cores])
    if args.torch_threads:
        torch.set_num_threads(args.torch_threads)
    env = make_vec_env("CartPole-v1", n_envs=8, seed=0, vec_env_cls=SubprocVecEnv)
    model = A2C("MlpPolicy", env, seed=0, device="cpu")
    model.learn(total_timesteps=args.timesteps)
    env.close()
    print("torch threads:", torch.get_num_threads())

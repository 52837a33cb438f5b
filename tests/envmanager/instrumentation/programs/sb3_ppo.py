"""A ten-line Stable-Baselines3 PPO run, knowing nothing of rlprof.

``python sb3_ppo.py OUT.npy --vec subproc --start-method spawn --envs 2 --timesteps 256`` trains a
tiny PPO on CartPole over ``make_vec_env`` and saves the policy's final parameters, so a run under
``rlprof run`` can be compared with a plain one.
"""

import argparse

import numpy as np
import torch
from stable_baselines3 import PPO
from stable_baselines3.common.env_util import make_vec_env
from stable_baselines3.common.vec_env import DummyVecEnv, SubprocVecEnv, VecNormalize


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("out")
    parser.add_argument("--vec", choices=("dummy", "subproc"), default="dummy")
    parser.add_argument("--start-method", default=None)
    parser.add_argument("--envs", type=int, default=2)
    parser.add_argument("--timesteps", type=int, default=256)
    parser.add_argument("--normalize", action="store_true", help="wrap the vector env in VecNormalize")
    args = parser.parse_args()
    torch.set_num_threads(1)
    if args.vec == "dummy":
        env = make_vec_env("CartPole-v1", n_envs=args.envs, seed=3, vec_env_cls=DummyVecEnv)
    else:
        env = make_vec_env("CartPole-v1", n_envs=args.envs, seed=3, vec_env_cls=SubprocVecEnv,
                           vec_env_kwargs={"start_method": args.start_method})
    if args.normalize:
        env = VecNormalize(env)
    model = PPO("MlpPolicy", env, n_steps=32, batch_size=32, n_epochs=1, seed=5, device="cpu")
    model.learn(total_timesteps=args.timesteps)
    env.close()
    parameters = torch.cat([parameter.detach().flatten() for parameter in model.policy.parameters()])
    np.save(args.out, parameters.numpy())


if __name__ == "__main__":
    main()

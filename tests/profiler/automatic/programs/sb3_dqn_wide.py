"""Stable-Baselines3's DQN whose replay buffer is large enough to see fill: 4,000 steps of
:class:`wide_cartpole.WideCartPole` (24 kB a transition) into a buffer of 4,000. It knows nothing
of rlprof.

``keeps`` as its argument: the env also keeps 50 kB of every step, a leak beside the buffer.
"""

import sys

import torch
from stable_baselines3 import DQN

from wide_cartpole import WideCartPole

if __name__ == "__main__":
    torch.set_num_threads(1)
    model = DQN("MlpPolicy", WideCartPole(keeps=sys.argv[1:] == ["keeps"]), buffer_size=4000,
                learning_starts=2000, seed=0, device="cpu", policy_kwargs={"net_arch": [32]})
    model.learn(total_timesteps=4000)
    print("timesteps:", model.num_timesteps)

"""Behaviour cloning from a fixed dataset, as offline RL learns: a small policy network fitted to
recorded observations and actions, no environment stepped. It knows nothing of rlprof.

``--epochs N`` passes over the 4,096 recorded steps, in minibatches of 64; ``--load-seconds S``
sleeps that long before each minibatch, outside any block, as a slow data loader would.
"""

import argparse
import time

import numpy as np
import torch
from torch import nn

if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--load-seconds", type=float, default=0.0)
    args = parser.parse_args()

    torch.set_num_threads(1)
    torch.manual_seed(0)
    rng = np.random.default_rng(0)
    observations = torch.as_tensor(rng.normal(size=(4096, 4)), dtype=torch.float32)
    actions = torch.as_tensor((observations[:, 2] > 0).long())
    policy = nn.Sequential(nn.Linear(4, 64), nn.Tanh(), nn.Linear(64, 2))
    optimizer = torch.optim.Adam(policy.parameters(), lr=1e-3)
    for epoch in range(args.epochs):
        for start in range(0, len(observations), 64):
            if args.load_seconds:
                time.sleep(args.load_seconds)
            logits = policy(observations[start:start + 64])
            loss = nn.functional.cross_entropy(logits, actions[start:start + 64])
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
    print("loss:", loss.item())

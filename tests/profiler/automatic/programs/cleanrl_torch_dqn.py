"""CleanRL's ``dqn.py``, shortened: a Q-network over a ``SyncVectorEnv`` of one CartPole, a replay
buffer, a target network, an optimizer step every ``--train-frequency`` env steps.

It knows nothing of rlprof. As in CleanRL, the rollout's Q-network call runs with grad enabled;
``--policy-no-grad`` runs it under ``torch.no_grad()``. ``--counts FILE`` writes, as JSON, how many
rollout calls of the Q-network it made (the others were random actions) and how many optimizer
steps it took, for the tests to set rlprof's phases against.
"""

import argparse
import json
import random

import gymnasium as gym
import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.optim as optim


class QNetwork(nn.Module):
    def __init__(self, observations, actions):
        super().__init__()
        self.network = nn.Sequential(nn.Linear(observations, 64), nn.ReLU(), nn.Linear(64, actions))

    def forward(self, x):
        return self.network(x)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--total-timesteps", type=int, default=1500)
    parser.add_argument("--learning-starts", type=int, default=200)
    parser.add_argument("--train-frequency", type=int, default=10)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--policy-no-grad", action="store_true")
    parser.add_argument("--counts", default=None)
    args = parser.parse_args()
    random.seed(1)
    np.random.seed(1)
    torch.manual_seed(1)
    torch.set_num_threads(1)
    envs = gym.vector.SyncVectorEnv([lambda: gym.make("CartPole-v1")])
    observations, actions = envs.single_observation_space.shape[0], envs.single_action_space.n
    q_network = QNetwork(observations, actions)
    target_network = QNetwork(observations, actions)
    target_network.load_state_dict(q_network.state_dict())
    optimizer = optim.Adam(q_network.parameters(), lr=2.5e-4)
    buffer_obs, buffer_next, buffer_actions, buffer_rewards, buffer_dones = [], [], [], [], []
    policy_calls = optimizer_steps = 0
    obs, _ = envs.reset(seed=1)
    for global_step in range(args.total_timesteps):
        epsilon = max(1.0 - global_step / (0.5 * args.total_timesteps), 0.05)
        if random.random() < epsilon:
            chosen = np.array([envs.single_action_space.sample()])
        else:
            policy_calls += 1
            if args.policy_no_grad:
                with torch.no_grad():
                    q_values = q_network(torch.Tensor(obs))
            else:
                q_values = q_network(torch.Tensor(obs))
            chosen = torch.argmax(q_values, dim=1).numpy()
        next_obs, rewards, terminations, truncations, _ = envs.step(chosen)
        buffer_obs.append(obs[0])
        buffer_next.append(next_obs[0])
        buffer_actions.append(chosen[0])
        buffer_rewards.append(rewards[0])
        buffer_dones.append(float(terminations[0]))
        obs = next_obs
        if global_step > args.learning_starts and global_step % args.train_frequency == 0:
            picked = np.random.randint(0, len(buffer_obs), size=args.batch_size)
            batch_obs = torch.Tensor(np.array(buffer_obs)[picked])
            batch_next = torch.Tensor(np.array(buffer_next)[picked])
            batch_actions = torch.LongTensor(np.array(buffer_actions)[picked]).unsqueeze(1)
            batch_rewards = torch.Tensor(np.array(buffer_rewards)[picked])
            batch_dones = torch.Tensor(np.array(buffer_dones)[picked])
            with torch.no_grad():
                target_max, _ = target_network(batch_next).max(dim=1)
                td_target = batch_rewards + 0.99 * target_max * (1 - batch_dones)
            old_val = q_network(batch_obs).gather(1, batch_actions).squeeze()
            loss = F.mse_loss(td_target, old_val)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            optimizer_steps += 1
    envs.close()
    if args.counts:
        with open(args.counts, "w") as file:
            json.dump({"policy_calls": policy_calls, "optimizer_steps": optimizer_steps}, file)


if __name__ == "__main__":
    main()

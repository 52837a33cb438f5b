"""CleanRL's ``sac_continuous_action.py``, shortened: an actor and two soft Q-networks with their
targets over a ``SyncVectorEnv`` of one ``Pendulum-v1``, a replay buffer, and after
``--learning-starts`` random steps one critic update per env step, an actor and entropy update
every ``--policy-frequency`` steps.

It knows nothing of rlprof. As in CleanRL, the rollout's actor call runs with grad enabled, and
the entropy update's actor call under ``torch.no_grad()`` comes after the actor's optimizer step.
``--counts FILE`` writes, as JSON, how many rollout calls of the actor it made and how many
optimizer steps it took, for the tests to set rlprof's phases against.
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

HIDDEN = 64


class SoftQNetwork(nn.Module):
    def __init__(self, observations, actions):
        super().__init__()
        self.fc1 = nn.Linear(observations + actions, HIDDEN)
        self.fc2 = nn.Linear(HIDDEN, HIDDEN)
        self.fc3 = nn.Linear(HIDDEN, 1)

    def forward(self, x, a):
        return self.fc3(F.relu(self.fc2(F.relu(self.fc1(torch.cat([x, a], 1))))))


class Actor(nn.Module):
    def __init__(self, observations, actions, low, high):
        super().__init__()
        self.fc1 = nn.Linear(observations, HIDDEN)
        self.fc2 = nn.Linear(HIDDEN, HIDDEN)
        self.fc_mean = nn.Linear(HIDDEN, actions)
        self.fc_logstd = nn.Linear(HIDDEN, actions)
        self.register_buffer("action_scale", torch.tensor((high - low) / 2.0, dtype=torch.float32))
        self.register_buffer("action_bias", torch.tensor((high + low) / 2.0, dtype=torch.float32))

    def forward(self, x):
        x = F.relu(self.fc2(F.relu(self.fc1(x))))
        log_std = torch.tanh(self.fc_logstd(x))
        return self.fc_mean(x), -5 + 0.5 * 7 * (log_std + 1)

    def get_action(self, x):
        mean, log_std = self(x)
        normal = torch.distributions.Normal(mean, log_std.exp())
        x_t = normal.rsample()
        y_t = torch.tanh(x_t)
        log_prob = normal.log_prob(x_t) - torch.log(self.action_scale * (1 - y_t.pow(2)) + 1e-6)
        return y_t * self.action_scale + self.action_bias, log_prob.sum(1, keepdim=True)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--total-timesteps", type=int, default=600)
    parser.add_argument("--learning-starts", type=int, default=100)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--policy-frequency", type=int, default=2)
    parser.add_argument("--counts", default=None)
    args = parser.parse_args()

    random.seed(1)
    np.random.seed(1)
    torch.manual_seed(1)
    envs = gym.vector.SyncVectorEnv([lambda: gym.make("Pendulum-v1")])
    envs.single_action_space.seed(1)
    observations = int(np.prod(envs.single_observation_space.shape))
    actions = int(np.prod(envs.single_action_space.shape))
    space = envs.single_action_space
    actor = Actor(observations, actions, space.low, space.high)
    qf1, qf2 = SoftQNetwork(observations, actions), SoftQNetwork(observations, actions)
    qf1_target, qf2_target = SoftQNetwork(observations, actions), SoftQNetwork(observations, actions)
    qf1_target.load_state_dict(qf1.state_dict())
    qf2_target.load_state_dict(qf2.state_dict())
    q_optimizer = optim.Adam(list(qf1.parameters()) + list(qf2.parameters()), lr=1e-3)
    actor_optimizer = optim.Adam(actor.parameters(), lr=3e-4)
    target_entropy = -float(actions)
    log_alpha = torch.zeros(1, requires_grad=True)
    alpha = log_alpha.exp().item()
    a_optimizer = optim.Adam([log_alpha], lr=1e-3)

    size = args.total_timesteps
    stored_obs = np.zeros((size, observations), np.float32)
    stored_next = np.zeros((size, observations), np.float32)
    stored_actions = np.zeros((size, actions), np.float32)
    stored_rewards = np.zeros(size, np.float32)
    stored_dones = np.zeros(size, np.float32)
    policy_calls = optimizer_steps = 0

    obs, _ = envs.reset(seed=1)
    for global_step in range(args.total_timesteps):
        if global_step < args.learning_starts:
            chosen = np.array([space.sample()])
        else:
            chosen, _ = actor.get_action(torch.Tensor(obs))
            chosen = chosen.detach().numpy()
            policy_calls += 1
        next_obs, rewards, terminations, _, _ = envs.step(chosen)
        stored_obs[global_step], stored_next[global_step] = obs[0], next_obs[0]
        stored_actions[global_step], stored_rewards[global_step] = chosen[0], rewards[0]
        stored_dones[global_step] = terminations[0]
        obs = next_obs

        if global_step > args.learning_starts:
            batch = np.random.randint(0, global_step + 1, size=args.batch_size)
            b_obs, b_next = torch.tensor(stored_obs[batch]), torch.tensor(stored_next[batch])
            b_actions = torch.tensor(stored_actions[batch])
            b_rewards, b_dones = torch.tensor(stored_rewards[batch]), torch.tensor(stored_dones[batch])
            with torch.no_grad():
                next_actions, next_log_pi = actor.get_action(b_next)
                min_next = torch.min(qf1_target(b_next, next_actions), qf2_target(b_next, next_actions))
                next_q = b_rewards + (1 - b_dones) * 0.99 * (min_next - alpha * next_log_pi).view(-1)
            q_loss = (F.mse_loss(qf1(b_obs, b_actions).view(-1), next_q)
                      + F.mse_loss(qf2(b_obs, b_actions).view(-1), next_q))
            q_optimizer.zero_grad()
            q_loss.backward()
            q_optimizer.step()
            optimizer_steps += 1
            if global_step % args.policy_frequency == 0:
                for _ in range(args.policy_frequency):
                    pi, log_pi = actor.get_action(b_obs)
                    actor_loss = (alpha * log_pi - torch.min(qf1(b_obs, pi), qf2(b_obs, pi))).mean()
                    actor_optimizer.zero_grad()
                    actor_loss.backward()
                    actor_optimizer.step()
                    with torch.no_grad():
                        _, log_pi = actor.get_action(b_obs)
                    alpha_loss = (-log_alpha.exp() * (log_pi + target_entropy)).mean()
                    a_optimizer.zero_grad()
                    alpha_loss.backward()
                    a_optimizer.step()
                    alpha = log_alpha.exp().item()
                    optimizer_steps += 2
            for network, target in ((qf1, qf1_target), (qf2, qf2_target)):
                for parameter, target_parameter in zip(network.parameters(), target.parameters()):
                    target_parameter.data.copy_(0.005 * parameter.data + 0.995 * target_parameter.data)
    envs.close()
    if args.counts:
        with open(args.counts, "w") as file:
            json.dump({"policy_calls": policy_calls, "optimizer_steps": optimizer_steps}, file)


if __name__ == "__main__":
    main()

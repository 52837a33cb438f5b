"""REINFORCE on one CartPole env stepped in the trainer, no vector env: each episode's policy calls
run with grad, their log-probabilities kept for the loss, one optimizer step per episode. It knows
nothing of rlprof.

``--episodes N`` episodes; ``--recompute`` runs the rollout under ``torch.no_grad()`` and
recomputes the log-probabilities in one batched forward over the episode's observations at the
update (one call with grad per episode, not one per step); ``--env-seconds S`` makes each env step
S seconds longer (a costly simulator); ``--counts FILE`` writes the env steps, policy calls and
optimizer steps it made, as JSON.
"""

import argparse
import json

import gymnasium as gym
import numpy as np
import torch
from slow_steps import SlowStep
from torch import nn

if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--episodes", type=int, default=60)
    parser.add_argument("--recompute", action="store_true")
    parser.add_argument("--env-seconds", type=float, default=0.0)
    parser.add_argument("--counts", default=None)
    args = parser.parse_args()

    torch.set_num_threads(1)
    torch.manual_seed(0)
    if args.env_seconds:  # a slower env, registered as a simulator's would be
        gym.register("SlowCartPole-v1", entry_point=lambda: SlowStep(gym.make("CartPole-v1"), args.env_seconds))
    env = gym.make("SlowCartPole-v1" if args.env_seconds else "CartPole-v1")
    policy = nn.Sequential(nn.Linear(4, 64), nn.Tanh(), nn.Linear(64, 2))
    optimizer = torch.optim.Adam(policy.parameters(), lr=1e-2)
    env_steps = policy_calls = 0
    for episode in range(args.episodes):
        observation, _ = env.reset(seed=episode)
        observations, actions, log_probs, rewards = [], [], [], []
        done = False
        while not done:
            observation_tensor = torch.as_tensor(observation, dtype=torch.float32)
            with torch.set_grad_enabled(not args.recompute):
                distribution = torch.distributions.Categorical(logits=policy(observation_tensor))
                action = distribution.sample()
            policy_calls += 1
            if args.recompute:
                observations.append(observation_tensor)
                actions.append(action)
            else:
                log_probs.append(distribution.log_prob(action))
            observation, reward, terminated, truncated, _ = env.step(action.item())
            env_steps += 1
            rewards.append(reward)
            done = terminated or truncated
        returns = torch.as_tensor(np.cumsum(rewards[::-1])[::-1].copy(), dtype=torch.float32)
        if args.recompute:
            logits = policy(torch.stack(observations))
            log_probs = torch.distributions.Categorical(logits=logits).log_prob(torch.stack(actions))
        else:
            log_probs = torch.stack(log_probs)
        loss = -(log_probs * (returns - returns.mean())).sum()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    env.close()
    if args.counts:
        with open(args.counts, "w") as counts:
            json.dump({"env_steps": env_steps, "policy_calls": policy_calls, "optimizer_steps": args.episodes}, counts)

"""CleanRL's ``ppo.py``, shortened: a torch actor-critic over ``SyncVectorEnv``, PPO updates.

It knows nothing of rlprof. ``--async-envs`` builds ``AsyncVectorEnv`` instead of
``SyncVectorEnv``; ``--env-seconds S`` makes each env step S seconds longer (a costly simulator).
``--slow-logging S`` plants a function that sleeps S seconds after
each update, outside anything the framework hooks time, for the stack sampler to find.
``--hand-timers FILE`` writes, as JSON, the time measured by hand (``time.perf_counter()``) around
its policy calls (the ``agent.get_action_and_value`` call of the rollout), its env steps (the
``envs.step`` call), its updates (the epochs' loop, whole) and its whole training loop — what a
user would time, for ``benchmarks/run_overhead.py`` to set rlprof's blocks against.
"""

import argparse
import json
import random
import time

import gymnasium as gym
import numpy as np
import torch
import torch.nn as nn
import torch.optim as optim
from slow_steps import SlowStep
from torch.distributions.categorical import Categorical


def parse_args():
    parser = argparse.ArgumentParser()
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--num-envs", type=int, default=4)
    parser.add_argument("--num-steps", type=int, default=16)
    parser.add_argument("--total-timesteps", type=int, default=128)
    parser.add_argument("--update-epochs", type=int, default=2)
    parser.add_argument("--learning-rate", type=float, default=2.5e-4)
    parser.add_argument("--num-minibatches", type=int, default=2)
    parser.add_argument("--slow-logging", type=float, default=0.0)
    parser.add_argument("--env-seconds", type=float, default=0.0)
    parser.add_argument("--async-envs", action="store_true")
    parser.add_argument("--hand-timers", type=str, default=None)
    args = parser.parse_args()
    args.batch_size = args.num_envs * args.num_steps
    args.minibatch_size = args.batch_size // args.num_minibatches
    args.num_iterations = args.total_timesteps // args.batch_size
    return args


def make_env(env_id, env_seconds=0.0):
    def thunk():
        env = gym.wrappers.RecordEpisodeStatistics(gym.make(env_id))
        return SlowStep(env, env_seconds) if env_seconds else env

    return thunk


def layer_init(layer, std=np.sqrt(2), bias_const=0.0):
    torch.nn.init.orthogonal_(layer.weight, std)
    torch.nn.init.constant_(layer.bias, bias_const)
    return layer


class Agent(nn.Module):
    def __init__(self, envs):
        super().__init__()
        size = np.array(envs.single_observation_space.shape).prod()
        self.critic = nn.Sequential(layer_init(nn.Linear(size, 64)), nn.Tanh(),
                                    layer_init(nn.Linear(64, 64)), nn.Tanh(),
                                    layer_init(nn.Linear(64, 1), std=1.0))
        self.actor = nn.Sequential(layer_init(nn.Linear(size, 64)), nn.Tanh(),
                                   layer_init(nn.Linear(64, 64)), nn.Tanh(),
                                   layer_init(nn.Linear(64, envs.single_action_space.n), std=0.01))

    def get_value(self, x):
        return self.critic(x)

    def get_action_and_value(self, x, action=None):
        logits = self.actor(x)
        probs = Categorical(logits=logits)
        if action is None:
            action = probs.sample()
        return action, probs.log_prob(action), probs.entropy(), self.critic(x)


def write_logs(seconds):
    """Stands for logging and checkpoints: time the framework hooks cannot see."""
    time.sleep(seconds)


if __name__ == "__main__":
    args = parse_args()
    random.seed(args.seed)
    np.random.seed(args.seed)
    torch.manual_seed(args.seed)
    torch.set_num_threads(1)
    vector_env = gym.vector.AsyncVectorEnv if args.async_envs else gym.vector.SyncVectorEnv
    envs = vector_env([make_env("CartPole-v1", args.env_seconds) for _ in range(args.num_envs)])
    agent = Agent(envs)
    optimizer = optim.Adam(agent.parameters(), lr=args.learning_rate, eps=1e-5)

    obs = torch.zeros((args.num_steps, args.num_envs) + envs.single_observation_space.shape)
    actions = torch.zeros((args.num_steps, args.num_envs) + envs.single_action_space.shape)
    logprobs = torch.zeros((args.num_steps, args.num_envs))
    rewards = torch.zeros((args.num_steps, args.num_envs))
    dones = torch.zeros((args.num_steps, args.num_envs))
    values = torch.zeros((args.num_steps, args.num_envs))

    hand = {"policy": 0.0, "update": 0.0, "env_step": 0.0, "training": 0.0}
    global_step = 0
    start_time = time.time()
    training_started = time.perf_counter()
    next_obs, _ = envs.reset(seed=args.seed)
    next_obs = torch.Tensor(next_obs)
    next_done = torch.zeros(args.num_envs)
    for iteration in range(1, args.num_iterations + 1):
        for step in range(0, args.num_steps):
            global_step += args.num_envs
            obs[step] = next_obs
            dones[step] = next_done
            with torch.no_grad():
                started = time.perf_counter()
                action, logprob, _, value = agent.get_action_and_value(next_obs)
                hand["policy"] += time.perf_counter() - started
                values[step] = value.flatten()
            actions[step] = action
            logprobs[step] = logprob
            chosen = action.cpu().numpy()
            started = time.perf_counter()
            next_obs, reward, terminations, truncations, infos = envs.step(chosen)
            hand["env_step"] += time.perf_counter() - started
            next_done = np.logical_or(terminations, truncations)
            rewards[step] = torch.tensor(reward).view(-1)
            next_obs, next_done = torch.Tensor(next_obs), torch.Tensor(next_done)

        with torch.no_grad():
            next_value = agent.get_value(next_obs).reshape(1, -1)
            advantages = torch.zeros_like(rewards)
            lastgaelam = 0
            for t in reversed(range(args.num_steps)):
                nextnonterminal = 1.0 - (next_done if t == args.num_steps - 1 else dones[t + 1])
                nextvalues = next_value if t == args.num_steps - 1 else values[t + 1]
                delta = rewards[t] + 0.99 * nextvalues * nextnonterminal - values[t]
                advantages[t] = lastgaelam = delta + 0.99 * 0.95 * nextnonterminal * lastgaelam
            returns = advantages + values

        b_obs = obs.reshape((-1,) + envs.single_observation_space.shape)
        b_logprobs = logprobs.reshape(-1)
        b_actions = actions.reshape((-1,) + envs.single_action_space.shape)
        b_advantages = advantages.reshape(-1)
        b_returns = returns.reshape(-1)
        b_inds = np.arange(args.batch_size)
        started = time.perf_counter()
        for epoch in range(args.update_epochs):
            np.random.shuffle(b_inds)
            for start in range(0, args.batch_size, args.minibatch_size):
                mb_inds = b_inds[start:start + args.minibatch_size]
                _, newlogprob, entropy, newvalue = agent.get_action_and_value(b_obs[mb_inds], b_actions.long()[mb_inds])
                ratio = (newlogprob - b_logprobs[mb_inds]).exp()
                mb_advantages = b_advantages[mb_inds]
                pg_loss = torch.max(-mb_advantages * ratio,
                                    -mb_advantages * torch.clamp(ratio, 0.8, 1.2)).mean()
                v_loss = 0.5 * ((newvalue.view(-1) - b_returns[mb_inds]) ** 2).mean()
                loss = pg_loss - 0.01 * entropy.mean() + v_loss * 0.5
                optimizer.zero_grad()
                loss.backward()
                nn.utils.clip_grad_norm_(agent.parameters(), 0.5)
                optimizer.step()
        hand["update"] += time.perf_counter() - started
        if args.slow_logging:
            write_logs(args.slow_logging)

    hand["training"] = time.perf_counter() - training_started
    envs.close()
    if args.hand_timers:
        with open(args.hand_timers, "w") as file:
            json.dump(hand, file)
    print("SPS:", int(global_step / (time.time() - start_time)))
    print("final loss:", float(loss))

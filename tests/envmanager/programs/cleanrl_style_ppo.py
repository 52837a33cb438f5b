"""A training script in CleanRL's style (after ``cleanrl/ppo.py``), with a numpy policy.

It knows nothing of rlprof: ``rlprof run --vector-env=all`` profiles it as it is. Like CleanRL's,
it parses its own arguments, builds ``gym.vector.SyncVectorEnv`` from ``make_env`` thunks wrapped
in ``RecordEpisodeStatistics``, collects ``num_steps`` steps per iteration, reads episode returns
from the infos, updates its policy and prints the steps per second.
"""

import argparse
import random
import time

import gymnasium as gym
import numpy as np


def parse_args():
    parser = argparse.ArgumentParser()
    parser.add_argument("--env-id", type=str, default="CartPole-v1")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--num-envs", type=int, default=4)
    parser.add_argument("--num-steps", type=int, default=32)
    parser.add_argument("--total-timesteps", type=int, default=512)
    parser.add_argument("--learning-rate", type=float, default=0.01)
    parser.add_argument("--gamma", type=float, default=0.99)
    args = parser.parse_args()
    args.batch_size = int(args.num_envs * args.num_steps)
    args.num_iterations = args.total_timesteps // args.batch_size
    return args


def make_env(env_id, idx, capture_video, run_name):
    def thunk():
        env = gym.make(env_id)
        env = gym.wrappers.RecordEpisodeStatistics(env)
        return env

    return thunk


class Agent:
    def __init__(self, observation_size, action_count, rng):
        self.weights = np.zeros((observation_size, action_count))
        self.rng = rng

    def get_action_and_probs(self, observations):
        logits = observations @ self.weights
        logits -= logits.max(axis=1, keepdims=True)
        probs = np.exp(logits) / np.exp(logits).sum(axis=1, keepdims=True)
        draws = self.rng.random((len(observations), 1))
        actions = (draws > probs.cumsum(axis=1)).sum(axis=1).clip(max=probs.shape[1] - 1)
        return actions, probs


if __name__ == "__main__":
    args = parse_args()
    run_name = f"{args.env_id}__cleanrl_style_ppo__{args.seed}__{int(time.time())}"
    random.seed(args.seed)
    np.random.seed(args.seed)
    rng = np.random.default_rng(args.seed)

    envs = gym.vector.SyncVectorEnv(
        [make_env(args.env_id, i, False, run_name) for i in range(args.num_envs)],
    )
    assert isinstance(envs.single_action_space, gym.spaces.Discrete), "only discrete action space is supported"
    agent = Agent(envs.single_observation_space.shape[0], envs.single_action_space.n, rng)

    obs = np.zeros((args.num_steps, args.num_envs) + envs.single_observation_space.shape)
    actions = np.zeros((args.num_steps, args.num_envs), dtype=np.int64)
    rewards = np.zeros((args.num_steps, args.num_envs))
    dones = np.zeros((args.num_steps, args.num_envs))

    global_step = 0
    start_time = time.time()
    next_obs, _ = envs.reset(seed=args.seed)
    next_done = np.zeros(args.num_envs)
    episodic_returns = []
    for iteration in range(1, args.num_iterations + 1):
        for step in range(0, args.num_steps):
            global_step += args.num_envs
            obs[step] = next_obs
            dones[step] = next_done
            action, _ = agent.get_action_and_probs(next_obs)
            actions[step] = action
            next_obs, reward, terminations, truncations, infos = envs.step(action)
            next_done = np.logical_or(terminations, truncations)
            rewards[step] = reward
            if "episode" in infos:
                finished = infos["_episode"]
                episodic_returns.extend(infos["episode"]["r"][finished].tolist())

        returns = np.zeros_like(rewards)
        running = np.zeros(args.num_envs)
        for step in reversed(range(args.num_steps)):
            running = rewards[step] + args.gamma * running * (1.0 - dones[step])
            returns[step] = running
        advantages = (returns - returns.mean()) / (returns.std() + 1e-8)
        flat_obs = obs.reshape(-1, obs.shape[-1])
        _, probs = agent.get_action_and_probs(flat_obs)
        chosen = np.zeros_like(probs)
        chosen[np.arange(len(flat_obs)), actions.reshape(-1)] = 1.0
        agent.weights += args.learning_rate * flat_obs.T @ ((chosen - probs) * advantages.reshape(-1, 1))

    envs.close()
    print(f"episodes: {len(episodic_returns)}")
    print("SPS:", int(global_step / (time.time() - start_time)))

"""A rollout over a Gymnasium vector env, as a training script writes it, knowing nothing of rlprof.

``python vector_rollout.py OUT.npz --vector async --context spawn --envs 3 --steps 200`` steps
CartPole envs (wrapped in RecordEpisodeStatistics, built by ``make_env`` thunks) with seeded random
actions and saves every observation, reward, termination, truncation and episode return, so a run
under ``rlprof run`` can be compared with a plain one. ``--leave-open`` leaves the vector env open,
still referenced as the program ends; ``--drop-open`` leaves it open and drops it, so that
Gymnasium's ``__del__`` closes it, terminating its workers.
"""

import argparse

import gymnasium as gym
import numpy as np

HELD = []


def make_env(env_id):
    def thunk():
        env = gym.make(env_id)
        return gym.wrappers.RecordEpisodeStatistics(env)

    return thunk


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("out")
    parser.add_argument("--vector", choices=("sync", "async"), default="sync")
    parser.add_argument("--context", default=None)
    parser.add_argument("--envs", type=int, default=3)
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--leave-open", action="store_true")
    parser.add_argument("--drop-open", action="store_true")
    parser.add_argument("--no-shared-memory", action="store_true", help="AsyncVectorEnv(shared_memory=False)")
    args = parser.parse_args()
    thunks = [make_env("CartPole-v1") for _ in range(args.envs)]
    if args.vector == "sync":
        envs = gym.vector.SyncVectorEnv(thunks)
    else:
        envs = gym.vector.AsyncVectorEnv(thunks, context=args.context, shared_memory=not args.no_shared_memory)
    rng = np.random.default_rng(7)
    observation, _ = envs.reset(seed=11)
    observations, rewards, terminations, truncations, returns = [observation], [], [], [], []
    for _ in range(args.steps):
        observation, reward, terminated, truncated, infos = envs.step(rng.integers(0, 2, size=args.envs))
        observations.append(observation)
        rewards.append(reward)
        terminations.append(terminated)
        truncations.append(truncated)
        if "episode" in infos:
            returns.extend(infos["episode"]["r"][infos["_episode"]].tolist())
    if args.leave_open:
        HELD.append(envs)
    elif not args.drop_open:
        envs.close()
    np.savez(args.out, observations=np.array(observations), rewards=np.array(rewards),
             terminations=np.array(terminations), truncations=np.array(truncations), returns=np.array(returns))


if __name__ == "__main__":
    main()

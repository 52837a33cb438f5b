"""Evaluation over a ``multiprocessing.Pool``, as training scripts write it, knowing nothing of rlprof.

``python pool_evaluation.py OUT.json --context fork --workers 2 --tasks 6 [--episodes 5] [--env-per-worker]``
maps an evaluation over seeds: each task builds a CartPole with ``gymnasium.make``, plays seeded
random episodes and closes it, so a pool worker builds a new env for every task it takes. With
``--env-per-worker`` the pool's initializer builds each worker's env once instead, every task steps
it, and none closes it. The pool is a context manager, whose exit terminates its workers. The
program saves each task's return and how many steps and resets it took, so a run under ``rlprof
run`` can be compared with a plain one.
"""

import argparse
import json
import multiprocessing

import gymnasium as gym
import numpy as np

WORKERS_ENV = None  # with --env-per-worker, built by the pool's initializer


def build_workers_env():
    global WORKERS_ENV
    WORKERS_ENV = gym.make("CartPole-v1")


def evaluate(seed, episodes):
    env = WORKERS_ENV or gym.make("CartPole-v1")
    rng = np.random.default_rng(seed)
    total, steps = 0.0, 0
    for episode in range(episodes):
        env.reset(seed=seed * 100 + episode)
        done = False
        while not done:
            _, reward, terminated, truncated, _ = env.step(int(rng.integers(0, 2)))
            total += reward
            steps += 1
            done = terminated or truncated
    if env is not WORKERS_ENV:
        env.close()
    return {"return": total / episodes, "steps": steps, "resets": episodes}


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("out")
    parser.add_argument("--context", default="fork")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--tasks", type=int, default=6)
    parser.add_argument("--episodes", type=int, default=5)
    parser.add_argument("--env-per-worker", action="store_true")
    args = parser.parse_args()
    initializer = build_workers_env if args.env_per_worker else None
    with multiprocessing.get_context(args.context).Pool(args.workers, initializer=initializer) as pool:
        results = pool.starmap(evaluate, [(seed, args.episodes) for seed in range(args.tasks)], chunksize=1)
    with open(args.out, "w") as out:
        json.dump(results, out)


if __name__ == "__main__":
    main()

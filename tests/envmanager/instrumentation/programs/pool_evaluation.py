"""Evaluation over a ``multiprocessing.Pool``, as training scripts write it, knowing nothing of rlprof.

``python pool_evaluation.py OUT.json --context fork --workers 2 --tasks 6`` maps an evaluation
over seeds: each task builds a CartPole with ``gymnasium.make``, plays seeded random episodes and
closes it, so a pool worker builds a new env for every task it takes. The pool is a context
manager, whose exit terminates its workers. The program saves each task's return and how many
steps and resets it took, so a run under ``rlprof run`` can be compared with a plain one.
"""

import argparse
import json
import multiprocessing

import gymnasium as gym
import numpy as np

EPISODES = 5


def evaluate(seed):
    env = gym.make("CartPole-v1")
    rng = np.random.default_rng(seed)
    total, steps = 0.0, 0
    for episode in range(EPISODES):
        env.reset(seed=seed * 100 + episode)
        done = False
        while not done:
            _, reward, terminated, truncated, _ = env.step(int(rng.integers(0, 2)))
            total += reward
            steps += 1
            done = terminated or truncated
    env.close()
    return {"return": total / EPISODES, "steps": steps, "resets": EPISODES}


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("out")
    parser.add_argument("--context", default="fork")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--tasks", type=int, default=6)
    args = parser.parse_args()
    with multiprocessing.get_context(args.context).Pool(args.workers) as pool:
        results = pool.map(evaluate, range(args.tasks), chunksize=1)
    with open(args.out, "w") as out:
        json.dump(results, out)


if __name__ == "__main__":
    main()

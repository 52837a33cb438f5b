"""Training envs and evaluation envs of two vector env classes in one program, knowing nothing of
rlprof: every ``--eval-every`` training steps, an evaluation rollout over the other vector env.

``python train_and_eval.py OUT.npz --train async --eval sync --steps 120 --eval-every 40
[--eval-first]`` steps the training envs with seeded random actions and evaluates with a fixed
policy until every evaluation env ended an episode, saving every observation of both; with
``--eval-first`` the evaluation envs are built before the training envs.
"""

import argparse

import gymnasium as gym
import numpy as np

TRAIN_ENVS, EVAL_ENVS = 3, 2


def vector_env(kind, count, seed):
    factories = [lambda index=index: gym.make("CartPole-v1") for index in range(count)]
    envs = gym.vector.AsyncVectorEnv(factories, context="fork") if kind == "async" else gym.vector.SyncVectorEnv(factories)
    envs.reset(seed=seed)
    return envs


def evaluate(envs, seen):
    observation, _ = envs.reset(seed=99)
    ended = np.zeros(envs.num_envs, dtype=bool)
    while not ended.all():
        observation, _, terminated, truncated, _ = envs.step((observation[:, 2] > 0).astype(np.int64))
        seen.append(observation)
        ended |= terminated | truncated


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("out")
    parser.add_argument("--train", choices=("sync", "async"), default="async")
    parser.add_argument("--eval", choices=("sync", "async"), default="sync")
    parser.add_argument("--steps", type=int, default=120)
    parser.add_argument("--eval-every", type=int, default=40)
    parser.add_argument("--eval-first", action="store_true")
    args = parser.parse_args()
    if args.eval_first:
        eval_envs = vector_env(args.eval, EVAL_ENVS, 5)
        train_envs = vector_env(args.train, TRAIN_ENVS, 1)
    else:
        train_envs = vector_env(args.train, TRAIN_ENVS, 1)
        eval_envs = vector_env(args.eval, EVAL_ENVS, 5)
    rng = np.random.default_rng(3)
    trained, evaluated = [], []
    for step in range(1, args.steps + 1):
        observation, *_ = train_envs.step(rng.integers(0, 2, size=TRAIN_ENVS))
        trained.append(observation)
        if step % args.eval_every == 0:
            evaluate(eval_envs, evaluated)
    train_envs.close()
    eval_envs.close()
    np.savez(args.out, trained=np.stack(trained), evaluated=np.stack(evaluated),
             evaluation_steps=len(evaluated))
    print("evaluation steps", len(evaluated))


if __name__ == "__main__":
    main()

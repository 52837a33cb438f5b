"""A hand-written env worker pool, as older training code writes one, knowing nothing of rlprof.

``python own_worker_pool.py OUT.npy --context fork --workers 3 --steps 200 [--close-envs] [--leave-running]
[--subclass]`` starts one ``multiprocessing.Process`` per worker (with ``--subclass``, a ``Process``
subclass whose own ``run`` is the worker loop, under that default start method); each builds a
CartPole with ``gymnasium.make`` and steps it on command over its own ``Pipe`` (resetting it when an
episode ends). The trainer sends seeded random actions and saves every observation, so a run under
``rlprof run`` can be compared with a plain one. Without ``--close-envs`` a worker returns without
closing its env, as many such loops do. With ``--leave-running`` the trainer neither stops nor joins
its workers, daemons which ``multiprocessing`` terminates at the exit.
"""

import argparse
import multiprocessing

import gymnasium as gym
import numpy as np


LEFT_RUNNING = []


def worker(remote, seed, close_env):
    env = gym.make("CartPole-v1")
    observation, _ = env.reset(seed=seed)
    remote.send(observation)
    while True:
        command, action = remote.recv()
        if command == "close":
            break
        observation, _, terminated, truncated, _ = env.step(action)
        if terminated or truncated:
            observation, _ = env.reset()
        remote.send(observation)
    if close_env:
        env.close()
    remote.close()


class EnvWorker(multiprocessing.Process):
    """The worker loop as a ``Process`` subclass's own ``run`` (started by the default start method)."""

    def __init__(self, remote, seed, close_env):
        super().__init__(daemon=True)
        self.remote, self.seed, self.close_env = remote, seed, close_env

    def run(self):
        worker(self.remote, self.seed, self.close_env)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("out")
    parser.add_argument("--context", default="fork")
    parser.add_argument("--workers", type=int, default=3)
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--close-envs", action="store_true")
    parser.add_argument("--leave-running", action="store_true")
    parser.add_argument("--subclass", action="store_true")
    args = parser.parse_args()
    if args.subclass:
        multiprocessing.set_start_method(args.context)
    context = multiprocessing.get_context(args.context)
    remotes, processes = [], []
    for seed in range(args.workers):
        parent, child = context.Pipe()
        if args.subclass:
            process = EnvWorker(child, seed, args.close_envs)
        else:
            process = context.Process(target=worker, args=(child, seed, args.close_envs), daemon=True)
        process.start()
        child.close()
        remotes.append(parent)
        processes.append(process)
    rng = np.random.default_rng(7)
    observations = [np.stack([remote.recv() for remote in remotes])]
    for _ in range(args.steps):
        for remote, action in zip(remotes, rng.integers(0, 2, size=args.workers)):
            remote.send(("step", int(action)))
        observations.append(np.stack([remote.recv() for remote in remotes]))
    np.save(args.out, np.stack(observations))
    if args.leave_running:
        LEFT_RUNNING.extend(remotes)  # kept open: the workers wait on them until terminated
        return
    for remote in remotes:
        remote.send(("close", None))
    for process in processes:
        process.join()


if __name__ == "__main__":
    main()

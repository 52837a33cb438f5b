"""Every way a program steps a vector env whose envs run in workers, for ``rlprof run`` to time.

``python vector_step_paths.py --vector async --context spawn [--with-blocks]`` (or ``--vector sb3``)
steps Gymnasium ``AsyncVectorEnv``s (or Stable-Baselines3 ``SubprocVecEnv``s) of CartPole envs:

* two vector envs stepped alternately, the second through a wrapper (Gymnasium's vector
  ``RecordEpisodeStatistics``, SB3's ``VecMonitor``);
* the first one's ``step_async`` and ``step_wait`` called by the program itself;
* the first one stepped from another thread;
* (Gymnasium) a vector env stepped inside the step of another one: a ``SyncVectorEnv`` whose env
  steps an ``AsyncVectorEnv``;
* failures: an env that raises (Gymnasium then shuts its worker down, so the next step fails as it
  sends; SB3's worker dies), a worker that dies (``os._exit``), and (Gymnasium) a ``step_wait``
  that times out.

It prints, as JSON, the number of steps of each kind and the exceptions each failure raised.
``--with-blocks`` installs a companion that watches every block (an exit hook), so rlprof times every
vector step with ``with`` blocks: the reference the other run is compared with.
"""

import argparse
import json
import os
import threading
import time

import gymnasium as gym
import numpy as np

STEPS, DIRECT, IN_THREAD, NESTED = 30, 5, 7, 4


class Failing(gym.Env):
    """CartPole's spaces; action 1 of ``--fail`` kind: ``raise`` raises, ``die`` ends the worker
    process at once, ``slow`` sleeps half a second."""

    observation_space = gym.spaces.Box(-1.0, 1.0, (4,), np.float32)
    action_space = gym.spaces.Discrete(2)

    def __init__(self, kind):
        self.kind = kind

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        return np.zeros(4, np.float32), {}

    def step(self, action):
        if action == 1:
            if self.kind == "raise":
                raise ValueError("bad action")
            if self.kind == "die":
                os._exit(3)
            time.sleep(0.5)
        return np.zeros(4, np.float32), 0.0, False, False, {}


class Batched(gym.Env):
    """One env that steps a whole vector env: a vector env inside another one's step."""

    observation_space = gym.spaces.Box(-np.inf, np.inf, (4,), np.float32)
    action_space = gym.spaces.Discrete(2)

    def __init__(self, inner):
        self.inner = inner

    def reset(self, *, seed=None, options=None):
        observations, _ = self.inner.reset(seed=seed)
        return observations[0], {}

    def step(self, action):
        observations, rewards, _, _, _ = self.inner.step(np.full(self.inner.num_envs, action))
        return observations[0], float(rewards.sum()), False, False, {}


def failure(step):
    """The name of the exception ``step()`` raised (None: none)."""
    try:
        step()
    except Exception as error:  # noqa: BLE001 - the program reports whatever it was
        return type(error).__name__
    return None


def step_every_way(first, second):
    """``first`` (2 envs) and ``second`` (3 envs) stepped alternately; then ``first``'s
    ``step_async`` and ``step_wait`` called here, ``first`` stepped from another thread and once
    more from this one."""
    for step in range(STEPS):
        first.step(np.full(2, step % 2))
        second.step(np.full(3, step % 2))
    for step in range(DIRECT):
        first.step_async(np.full(2, step % 2))
        first.step_wait()
    thread = threading.Thread(target=lambda: [first.step(np.zeros(2, np.int64)) for _ in range(IN_THREAD)])
    thread.start()
    thread.join()
    first.step(np.ones(2, np.int64))


def gymnasium_paths(context):
    def cartpoles(count):
        return gym.vector.AsyncVectorEnv([lambda: gym.make("CartPole-v1")] * count, context=context)

    def failing(kind, count=2):
        return gym.vector.AsyncVectorEnv([lambda: Failing(kind)] * count, context=context)

    first = cartpoles(2)
    second = gym.wrappers.vector.RecordEpisodeStatistics(cartpoles(3))
    first.reset(seed=1)
    second.reset(seed=2)
    step_every_way(first, second)
    inner = cartpoles(2)
    outer = gym.vector.SyncVectorEnv([lambda: Batched(inner)])
    outer.reset(seed=3)
    for _ in range(NESTED):
        outer.step(np.zeros(1, np.int64))
    outer.close()
    inner.close()
    first.close()
    second.close()
    raising, dying, slow = failing("raise"), failing("die"), failing("slow")
    for envs in (raising, slow):  # not the dying one: its workers then time no call, whenever they die
        envs.reset(seed=0)
    failures = {
        "raise": failure(lambda: raising.step(np.ones(2, np.int64))),
        "send to a worker shut down": failure(lambda: raising.step(np.zeros(2, np.int64))),
        "die": failure(lambda: dying.step(np.ones(2, np.int64))),
    }
    slow.step_async(np.ones(2, np.int64))
    failures["timeout"] = failure(lambda: slow.step_wait(timeout=0.05))
    for envs in (raising, slow):
        envs.close(terminate=True)
    _forget(dying)
    return {"alternate": STEPS, "direct": DIRECT, "in thread": IN_THREAD, "nested": NESTED}, failures


def sb3_paths(start_method):
    from stable_baselines3.common.vec_env import SubprocVecEnv, VecMonitor

    def cartpoles(count):
        return SubprocVecEnv([lambda: gym.make("CartPole-v1")] * count, start_method=start_method)

    first = cartpoles(2)
    second = VecMonitor(cartpoles(3))
    first.seed(1)
    first.reset()
    second.seed(2)
    second.reset()
    step_every_way(first, second)
    first.close()
    second.close()
    dying = SubprocVecEnv([lambda: Failing("raise")] * 2, start_method=start_method)  # not reset, as above
    failures = {"die": failure(lambda: dying.step(np.ones(2, np.int64))),
                "send to a dead worker": failure(lambda: dying.step(np.zeros(2, np.int64)))}
    _forget(dying)
    return {"alternate": STEPS, "direct": DIRECT, "in thread": IN_THREAD}, failures


def _forget(envs):
    """Leave a vector env with a dead worker closed without closing it (its close would wait for
    the dead worker's reply): its workers ended or terminated."""
    for process in envs.processes:
        process.join(5)
        if process.is_alive():
            process.terminate()
    envs.closed = True


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--vector", choices=("async", "sb3"), default="async")
    parser.add_argument("--context", default="fork")
    parser.add_argument("--with-blocks", action="store_true")
    args = parser.parse_args()
    if args.with_blocks:
        from profiler.timing import block_hooks

        block_hooks.set_exit_hook(lambda node: None)
    steps, failures = gymnasium_paths(args.context) if args.vector == "async" else sb3_paths(args.context)
    print(json.dumps({"steps": steps, "failures": failures}))


if __name__ == "__main__":
    main()

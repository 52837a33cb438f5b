"""Drops its envs and notes which were freed before any garbage collection, as a program whose envs
hold resources (a window, a simulator, a file) may rely on, knowing nothing of rlprof.

``python env_lifetimes.py OUT.json`` turns the garbage collector off, then builds CartPole envs whose
``__del__`` notes their label in a file: one through ``gymnasium.make``, closed and deleted; another
whose ``step`` the program takes out before closing and deleting the env, steps through it, then
deletes it; a ``SyncVectorEnv`` of two, closed and deleted; another deleted without being closed
(its envs go with it); an ``AsyncVectorEnv`` of two (forked
workers, whose envs go when the worker's loop returns), closed. Under plain python each env is freed
at once, by reference counting; it writes the labels freed after each, as JSON, so a run under
``rlprof run`` can be compared with a plain one.

Last, one made env deleted without being closed: under ``rlprof run`` that env is freed at the next
garbage collection, not at ``del`` (docs/environments-in-place.md says why); the program notes
whether it was freed at ``del``, and after ``gc.collect()``.
"""

import gc
import json
import sys
from pathlib import Path

import gymnasium as gym
import numpy as np
from gymnasium.envs.classic_control.cartpole import CartPoleEnv


class FreedCartPole(CartPoleEnv):
    """CartPole that notes, in ``FreedCartPole.notes``, that it was freed."""

    notes = None  # the file every process appends its freed labels to

    def __init__(self, label, **kwargs):
        super().__init__(**kwargs)
        self.label = label

    def __del__(self):
        with open(FreedCartPole.notes, "a") as file:
            file.write(self.label + "\n")


NOT_CLOSED = ("sync, not closed 0", "sync, not closed 1", "made, not closed")


def freed():
    return sorted(Path(FreedCartPole.notes).read_text().splitlines())


def stepped(vector_class, label, **options):
    """A vector env of two envs labelled ``label 0`` and ``label 1``, reset and stepped once."""
    factories = [lambda i=i: gym.make("FreedCartPole-v1", label=f"{label} {i}") for i in range(2)]
    envs = vector_class(factories, **options)
    envs.reset(seed=2)
    envs.step(np.array([0, 1]))
    return envs


def main():
    out = Path(sys.argv[1])
    FreedCartPole.notes = str(out.with_suffix(".freed"))
    Path(FreedCartPole.notes).write_text("")
    gc.disable()
    gym.register("FreedCartPole-v1", entry_point=FreedCartPole, max_episode_steps=500)
    seen = {}

    env = gym.make("FreedCartPole-v1", label="made")
    env.reset(seed=1)
    env.step(0)
    env.close()
    del env
    seen["made, closed and deleted"] = freed()

    env = gym.make("FreedCartPole-v1", label="made, step kept")
    env.reset(seed=1)
    step = env.step
    env.close()
    del env
    seen["made, step kept, env closed and deleted"] = freed()
    seen["the step kept steps"] = step(1)[0].tolist()
    del step
    seen["the step kept, deleted"] = freed()

    envs = stepped(gym.vector.SyncVectorEnv, "sync")
    envs.close()
    del envs
    seen["sync, closed and deleted"] = freed()

    stepped(gym.vector.AsyncVectorEnv, "async", context="fork").close()
    seen["async, closed"] = freed()

    envs = stepped(gym.vector.SyncVectorEnv, "sync, not closed")
    del envs
    env = gym.make("FreedCartPole-v1", label="made, not closed")
    env.reset(seed=1)
    env.step(0)
    del env
    seen["not closed: freed at del"] = [label for label in NOT_CLOSED if label in freed()]
    gc.collect()
    seen["not closed: freed by a collection"] = [label for label in NOT_CLOSED if label in freed()]
    out.write_text(json.dumps(seen))


if __name__ == "__main__":
    main()

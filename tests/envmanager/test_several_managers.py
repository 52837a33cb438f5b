"""Several managers in one thread (train and eval): each one's workers are its own."""

from __future__ import annotations

import json

import numpy as np
from envmanager_testenvs import CountingEnv
from tree_paths import count_of

import profiler
from envmanager import SubprocessEnvManager


def counting_envs(workers: int, run_id: str, **kwargs) -> SubprocessEnvManager:
    envs = SubprocessEnvManager(
        [lambda: CountingEnv(episode_length=1000)] * workers, context="fork", flush_every=1, run_id=run_id,
        **kwargs,
    )
    envs.reset(seed=0)
    return envs


def managers_and_workers(tree: dict) -> list[tuple[str, int]]:
    return [(worker["manager"], worker["worker_id"]) for worker in tree["workers"]]


def test_a_managers_dump_lists_only_its_own_workers_each_labelled_with_the_manager(tmp_path):
    train = counting_envs(2, "train", summaries_dir=tmp_path)
    evaluation = counting_envs(3, "eval")
    train.step(np.ones(2, dtype=np.int64))
    evaluation.step(np.ones(3, dtype=np.int64))
    train.close()
    evaluation.close()
    tree = json.loads((tmp_path / "train_timers.json").read_text())
    assert managers_and_workers(tree) == [("train", 0), ("train", 1)]


def test_a_closed_managers_workers_stay_in_the_threads_dumps_until_one_of_the_same_name_starts():
    evaluation = counting_envs(3, "eval")
    evaluation.step(np.ones(3, dtype=np.int64))
    evaluation.close()
    train = counting_envs(2, "train")
    train.step(np.ones(2, dtype=np.int64))
    # Closing before dumping, as scripts do, keeps the workers; each says whose it is.
    assert managers_and_workers(profiler.get_timer_tree()) == [
        ("eval", 0), ("eval", 1), ("eval", 2), ("train", 0), ("train", 1)
    ]
    next_evaluation = counting_envs(1, "eval")  # the next round: the closed round's workers leave
    tree = profiler.get_timer_tree()
    next_evaluation.close()
    train.close()
    assert managers_and_workers(tree) == [("train", 0), ("train", 1), ("eval", 0)]
    assert count_of(tree, "env.step") == 3 + 2  # what the closed manager merged stays merged


def test_live_managers_of_the_same_name_are_told_apart_by_their_id():
    first, second = counting_envs(1, "envmanager"), counting_envs(1, "envmanager")
    tree = profiler.get_timer_tree()
    first.close()
    second.close()
    manager_ids = [worker["manager_id"] for worker in tree["workers"]]
    assert len(set(manager_ids)) == 2

"""Worker time is merged under the trainer block that caused it: reset under reset, step under step."""

from __future__ import annotations

import numpy as np
from envmanager_testenvs import CountingEnv
from tree_paths import count_of

import profiler
from envmanager import SubprocessEnvManager
from profiler.analysis.step_time import step_breakdowns


def top_block(tree: dict, name: str) -> dict:
    return next(child for child in tree["children"] if child["name"] == name)


def test_the_workers_reset_time_is_merged_under_the_reset_block_with_default_flushing():
    envs = SubprocessEnvManager([lambda: CountingEnv(episode_length=100)] * 2, context="fork")
    envs.reset(seed=0)
    for _ in range(3):
        envs.step(np.array([1, 1]))
    envs.reset(seed=1)  # a reset after steps: the steps' time must not move under it
    envs.step(np.array([1, 1]))
    envs.close()
    tree = profiler.get_timer_tree()
    reset, step = top_block(tree, "env_manager.reset"), top_block(tree, "env_manager.step")
    assert (count_of(reset, "env.reset"), count_of(reset, "env.step")) == (4, 0)
    assert (count_of(step, "env.step"), count_of(step, "env.reset")) == (8, 0)


def test_the_reset_breakdown_sees_the_workers_time():
    envs = SubprocessEnvManager([CountingEnv] * 2, context="fork")
    envs.reset(seed=0)
    envs.step(np.array([1, 1]))
    envs.close()
    breakdown = next(b for b in step_breakdowns(profiler.get_timer_tree()) if b.block == "env_manager.reset")
    assert breakdown.worker_calls == 2

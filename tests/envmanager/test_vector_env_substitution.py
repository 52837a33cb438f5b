"""Specification of ``rlprof run --vector-env``: Gymnasium's vector envs built as SubprocessEnvManager.

The end-to-end test runs an unmodified CleanRL-style training script (programs/) under
``rlprof run --vector-env=all`` as a real subprocess and reads the per-worker trees it dumped.
The others build vector envs in this process while the substitution is in place.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from functools import partial
from pathlib import Path

import gymnasium as gym
import pytest
from gymnasium.vector import AutoresetMode

import profiler
from envmanager import SubprocessEnvManager
from envmanager.vector_env_substitution import VectorEnvSubstitution
from envmanager_testenvs import CountingEnv

CLEANRL_STYLE_SCRIPT = Path(__file__).parent / "programs" / "cleanrl_style_ppo.py"
NUM_ENVS, NUM_STEPS, ITERATIONS = 3, 16, 2


def counting_envs(count: int = 2) -> list:
    return [partial(CountingEnv, episode_length=4)] * count


@pytest.fixture
def substitution_all() -> Iterator[VectorEnvSubstitution]:
    substitution = VectorEnvSubstitution("all")
    try:
        yield substitution
    finally:
        substitution.close_managers()
        substitution.restore()


def sum_counts(node: dict, names: tuple[str, ...]) -> int:
    own = node["count"] if node["name"] in names else 0
    return own + sum(sum_counts(child, names) for child in node["children"])


def test_an_unmodified_cleanrl_style_script_gets_per_worker_timers(tmp_path):
    result = subprocess.run(
        [sys.executable, "-m", "profiler", "run", "--vector-env=all", "--summaries-dir", "out",
         str(CLEANRL_STYLE_SCRIPT), "--num-envs", str(NUM_ENVS), "--num-steps", str(NUM_STEPS),
         "--total-timesteps", str(NUM_ENVS * NUM_STEPS * ITERATIONS)],
        cwd=tmp_path, capture_output=True, text=True, timeout=300,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines()[-1].startswith("SPS: ")
    tree = json.loads((tmp_path / "out" / "cleanrl_style_ppo_timers.json").read_text())
    steps = NUM_STEPS * ITERATIONS
    (manager_step,) = [child for child in tree["children"] if child["name"] == "env_manager.step"]
    assert manager_step["count"] == steps
    workers = tree["workers"]
    assert [worker["worker_id"] for worker in workers] == list(range(NUM_ENVS))
    for worker in workers:  # each step is an env.step, or an autoreset's env.reset
        assert sum_counts(worker, ("env.step", "env.reset")) == steps + 1
    assert "Per worker (env.step)" in result.stderr


def test_async_vector_env_is_built_as_a_manager_with_the_same_arguments():
    substitution = VectorEnvSubstitution("async")
    try:
        envs = gym.vector.AsyncVectorEnv(counting_envs(), shared_memory=False, copy=False,
                                         autoreset_mode=AutoresetMode.SAME_STEP)
        assert type(envs) is SubprocessEnvManager
        assert (envs.num_envs, envs.shared_memory, envs.copy, envs.autoreset_mode) == (
            2, False, False, AutoresetMode.SAME_STEP)
        assert isinstance(envs, gym.vector.AsyncVectorEnv)
        assert list(substitution.managers) == [envs]
    finally:
        substitution.close_managers()
        substitution.restore()


def test_a_substituted_manager_records_the_class_the_script_built(substitution_all):
    envs = gym.vector.SyncVectorEnv(counting_envs())
    metadata = profiler.get_timer_tree()["metadata"]
    assert metadata["vector_env_substituted_for"] == "SyncVectorEnv"
    assert metadata["env_manager_class"] == "SubprocessEnvManager"
    envs.close()


def test_envs_per_worker_is_given_to_every_manager_built():
    substitution = VectorEnvSubstitution("async", envs_per_worker=2)
    try:
        envs = gym.vector.AsyncVectorEnv(counting_envs(3))
        assert envs.worker_env_ranges == (range(0, 2), range(2, 3))
    finally:
        substitution.close_managers()
        substitution.restore()


def test_a_bad_envs_per_worker_is_refused_before_anything_is_replaced():
    original = gym.vector.AsyncVectorEnv
    with pytest.raises(ValueError, match="`envs_per_worker` must be a whole number >= 1 or 'auto'"):
        VectorEnvSubstitution("async", envs_per_worker="all")
    assert gym.vector.AsyncVectorEnv is original


def test_an_unmodified_script_runs_with_auto_envs_per_worker(tmp_path):
    script = tmp_path / "train.py"
    script.write_text(
        "import gymnasium as gym\n"
        "envs = gym.vector.AsyncVectorEnv([lambda: gym.make('CartPole-v1')] * 3)\n"
        "envs.reset(seed=0)\n"
        "for _ in range(5):\n"
        "    envs.step(envs.action_space.sample())\n"
        "print(len(envs.worker_env_ranges), sum(len(r) for r in envs.worker_env_ranges))\n"
    )
    result = subprocess.run(
        [sys.executable, "-m", "profiler", "run", "--vector-env", "--envs-per-worker", "auto",
         "--summaries-dir", "out", str(script)],
        cwd=tmp_path, capture_output=True, text=True, timeout=120,
    )
    assert result.returncode == 0, result.stderr
    workers, envs = map(int, result.stdout.split())
    assert envs == 3
    assert workers == min(3, len(os.sched_getaffinity(0)))


def test_sync_vector_env_is_left_alone_unless_all_are_asked_for():
    substitution = VectorEnvSubstitution("async")
    try:
        envs = gym.vector.SyncVectorEnv(counting_envs())
        assert type(envs) is gym.vector.sync_vector_env.SyncVectorEnv
        envs.close()
    finally:
        substitution.restore()


def test_sync_vector_env_positional_arguments_keep_their_meaning(substitution_all):
    envs = gym.vector.SyncVectorEnv(counting_envs(), False)  # SyncVectorEnv's second is copy
    assert type(envs) is SubprocessEnvManager
    assert envs.copy is False


def test_make_vec_builds_a_manager_too(substitution_all):
    envs = gym.make_vec("CartPole-v1", num_envs=2, vectorization_mode="async")
    assert isinstance(envs, SubprocessEnvManager)
    envs.close()


def test_a_class_the_program_derives_from_async_vector_env_is_built_as_written(substitution_all):
    class LoggingVectorEnv(gym.vector.AsyncVectorEnv):
        pass

    envs = LoggingVectorEnv(counting_envs(), context="fork")
    try:
        assert type(envs) is LoggingVectorEnv
        assert not isinstance(SubprocessEnvManager.__new__(SubprocessEnvManager), LoggingVectorEnv)
    finally:
        envs.close()


def test_managers_the_program_left_open_are_closed(substitution_all):
    envs = gym.vector.AsyncVectorEnv(counting_envs())
    substitution_all.close_managers()
    assert envs.closed


def test_restore_puts_gymnasiums_classes_back():
    original_async, original_sync = gym.vector.AsyncVectorEnv, gym.vector.SyncVectorEnv
    substitution = VectorEnvSubstitution("all")
    assert gym.vector.AsyncVectorEnv is not original_async
    substitution.restore()
    assert (gym.vector.AsyncVectorEnv, gym.vector.SyncVectorEnv) == (original_async, original_sync)
    assert gym.vector.async_vector_env.AsyncVectorEnv is original_async


def test_an_unknown_mode_is_refused_with_the_valid_ones():
    with pytest.raises(ValueError, match="unknown vector env mode 'threads'; choose one of: async, all"):
        VectorEnvSubstitution("threads")


def test_an_argument_the_manager_does_not_take_is_an_error_naming_it(substitution_all):
    with pytest.raises(ValueError, match="custom `worker`"):
        gym.vector.AsyncVectorEnv(counting_envs(), worker=lambda *arguments: None)

"""Same seeds and actions through SyncVectorEnv and SubprocessEnvManager give identical results."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
import side_by_side
from envmanager_testenvs import CountingEnv, DictObsEnv
from gymnasium.vector import AutoresetMode
from side_by_side import STEPS

from envmanager import SubprocessEnvManager

NUM_ENVS = 4


def run_side_by_side(env_fns, mode: AutoresetMode, steps: int = STEPS, **ours_kwargs) -> int:
    return side_by_side.run_side_by_side(
        lambda fns, **kwargs: SubprocessEnvManager(fns, context="fork", **kwargs), env_fns, mode, steps, **ours_kwargs
    )


@pytest.mark.parametrize("mode", list(AutoresetMode))
@pytest.mark.parametrize("shared_memory", [True, False])
def test_cartpole_matches_sync_vector_env_in_every_autoreset_mode(mode, shared_memory):
    env_fns = [lambda: gym.make("CartPole-v1")] * NUM_ENVS
    episodes = run_side_by_side(env_fns, mode, shared_memory=shared_memory)
    assert episodes > 0, "the run must cross episode boundaries to test autoreset"


@pytest.mark.parametrize("mode", list(AutoresetMode))
def test_several_envs_per_worker_match_sync_vector_env(mode):
    env_fns = [lambda: gym.make("CartPole-v1")] * 5
    assert run_side_by_side(env_fns, mode, shared_memory=False, envs_per_worker=2) > 0


@pytest.mark.parametrize("mode", list(AutoresetMode))
def test_auto_envs_per_worker_matches_sync_vector_env(mode):
    env_fns = [lambda: gym.make("CartPole-v1")] * 5  # 3 and 2 envs on 2 cores, all 5 in one on 1
    assert run_side_by_side(env_fns, mode, envs_per_worker="auto") > 0


@pytest.mark.parametrize("mode", list(AutoresetMode))
def test_workers_of_uneven_sizes_in_shared_memory_match_sync_vector_env(mode):
    env_fns = [lambda i=i: CountingEnv(episode_length=3 + i, info_every=2 + i % 2) for i in range(8)]
    assert run_side_by_side(env_fns, mode, steps=30, envs_per_worker=3) > 0  # workers of 3, 3, 2


@pytest.mark.parametrize("mode", list(AutoresetMode))
def test_partial_and_nested_infos_match_sync_vector_env_field_for_field(mode):
    env_fns = [lambda i=i: CountingEnv(episode_length=3 + i, info_every=2 + i % 2) for i in range(NUM_ENVS)]
    assert run_side_by_side(env_fns, mode, steps=30, shared_memory=False, envs_per_worker=3) > 0


@pytest.mark.parametrize("shared_memory", [True, False])
def test_dict_observations_match_sync_vector_env(shared_memory):
    env_fns = [lambda: DictObsEnv(episode_length=4)] * 3
    run_side_by_side(env_fns, AutoresetMode.SAME_STEP, steps=20, shared_memory=shared_memory)


def test_infos_are_an_empty_dict_when_no_env_reports_anything():
    with SubprocessEnvManager([lambda: gym.make("CartPole-v1")] * 2, context="fork") as envs:
        _, infos = envs.reset(seed=0)
        assert infos == {}
        *_, infos = envs.step(np.array([0, 1]))
        assert infos == {}

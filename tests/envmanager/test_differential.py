"""Same seeds and actions through SyncVectorEnv and SubprocessEnvManager give identical results."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
from envmanager_testenvs import CountingEnv, DictObsEnv
from gymnasium.vector import AutoresetMode, SyncVectorEnv

from envmanager import SubprocessEnvManager

NUM_ENVS = 4
STEPS = 100


def assert_same_obs(ours, theirs) -> None:
    if isinstance(theirs, dict):
        assert ours.keys() == theirs.keys()
        for key in theirs:
            assert_same_obs(ours[key], theirs[key])
    else:
        ours, theirs = np.asarray(ours), np.asarray(theirs)
        assert ours.dtype == theirs.dtype
        np.testing.assert_array_equal(ours, theirs)


def assert_same_infos(ours: dict, theirs: dict) -> None:
    assert ours.keys() == theirs.keys()
    for key in theirs:
        if isinstance(theirs[key], dict):
            assert_same_infos(ours[key], theirs[key])
        elif key == "final_obs":  # an object array of per-env observations (or None)
            for a, b in zip(ours[key], theirs[key]):
                if b is None:
                    assert a is None
                else:
                    assert_same_obs(a, b)
        else:
            assert ours[key].dtype == theirs[key].dtype, key
            np.testing.assert_array_equal(ours[key], theirs[key])


def run_side_by_side(env_fns, mode: AutoresetMode, steps: int = STEPS, **ours_kwargs) -> int:
    """Drive both vector envs with the same seeds and actions; return how many episodes ended."""
    theirs = SyncVectorEnv(env_fns, autoreset_mode=mode)
    ours = SubprocessEnvManager(env_fns, autoreset_mode=mode, context="fork", **ours_kwargs)
    try:
        obs_a, info_a = ours.reset(seed=123)
        obs_b, info_b = theirs.reset(seed=123)
        assert_same_obs(obs_a, obs_b)
        assert_same_infos(info_a, info_b)
        theirs.action_space.seed(7)
        episodes_ended = 0
        for _ in range(steps):
            actions = theirs.action_space.sample()
            result_a, result_b = ours.step(actions), theirs.step(actions)
            for a, b in zip(result_a[:4], result_b[:4]):
                assert_same_obs(a, b)
            assert_same_infos(result_a[4], result_b[4])
            done = result_b[2] | result_b[3]
            episodes_ended += int(done.sum())
            if mode is AutoresetMode.DISABLED and done.any():
                obs_a, info_a = ours.reset(options={"reset_mask": done})
                obs_b, info_b = theirs.reset(options={"reset_mask": done})
                assert_same_obs(obs_a, obs_b)
                assert_same_infos(info_a, info_b)
        return episodes_ended
    finally:
        ours.close()
        theirs.close()


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

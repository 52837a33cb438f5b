"""The constructor takes AsyncVectorEnv's arguments, plus ours, and checks them as it does."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
from envmanager_testenvs import CountingEnv, CustomSpaceEnv, SequenceSpaceEnv, worker_children
from gymnasium import spaces
from gymnasium.envs.classic_control import CartPoleEnv
from gymnasium.vector import AutoresetMode, SyncVectorEnv

from envmanager import SubprocessEnvManager


def cartpole():
    return gym.make("CartPole-v1")


def test_env_fns_can_be_passed_by_keyword_as_make_vec_does():
    envs = SubprocessEnvManager(env_fns=[cartpole, cartpole], context="fork")
    assert envs.num_envs == 2
    envs.close()


def test_spaces_equal_those_of_sync_vector_env():
    env_fns = [cartpole] * 3
    reference = SyncVectorEnv(env_fns)
    envs = SubprocessEnvManager(env_fns, context="fork")
    assert envs.single_observation_space == reference.single_observation_space
    assert envs.single_action_space == reference.single_action_space
    assert envs.observation_space == reference.observation_space
    assert envs.action_space == reference.action_space
    assert isinstance(envs.action_space, spaces.MultiDiscrete)
    envs.close()
    reference.close()


@pytest.mark.parametrize("context", ["spawn", "forkserver"])
def test_lambdas_and_closures_cross_to_spawned_workers_with_cloudpickle(context):
    length = 4
    env_fns = [lambda: CountingEnv(episode_length=length), lambda: gym.make("CartPole-v1")]
    with pytest.raises(RuntimeError):  # and they really run remotely: the spaces differ
        SubprocessEnvManager(env_fns, context=context)
    envs = SubprocessEnvManager([lambda: CountingEnv(episode_length=length)] * 2, context=context)
    envs.reset(seed=0)
    assert envs.get_attr("episode_length") == (4, 4)
    envs.close()


@pytest.mark.parametrize("context", [None, "fork"])
def test_the_same_factory_may_repeat(context):
    envs = SubprocessEnvManager([cartpole] * 2, context=context)
    observations, _ = envs.reset(seed=1)
    assert observations.shape == (2, 4)
    envs.close()


def test_envs_per_worker_runs_several_envs_in_one_process_and_num_envs_stays_the_total():
    envs = SubprocessEnvManager([cartpole] * 5, context="fork", envs_per_worker=2)
    assert envs.num_envs == 5
    assert len(worker_children()) == 3
    observations, _ = envs.reset(seed=0)
    assert observations.shape == (5, 4)
    envs.close()


def test_observation_mode_different_batches_differing_spaces():
    env_fns = [lambda: gym.make("Pendulum-v1"), lambda: gym.make("Pendulum-v1", max_episode_steps=10)]
    low_high = [lambda: gym.make("MountainCarContinuous-v0")] * 2
    envs = SubprocessEnvManager(low_high, context="fork", observation_mode="different")
    assert envs.single_observation_space == gym.make("MountainCarContinuous-v0").observation_space
    envs.close()
    envs = SubprocessEnvManager(env_fns, context="fork", observation_mode="different")
    assert envs.observation_space.shape == (2, 3)
    envs.close()


def test_observation_mode_tuple_is_batched_then_single_space():
    single = spaces.Box(-np.inf, np.inf, shape=(4,), dtype=np.float32)
    batched = spaces.Box(-np.inf, np.inf, shape=(2, 4), dtype=np.float32)
    envs = SubprocessEnvManager(
        [cartpole] * 2, context="fork", observation_mode=(batched, single), shared_memory=False
    )
    assert envs.observation_space is batched
    assert envs.single_observation_space is single
    envs.close()


def test_invalid_observation_mode_raises_value_error():
    with pytest.raises(ValueError, match="observation_mode"):
        SubprocessEnvManager([cartpole], context="fork", observation_mode="bogus")


def test_different_observation_shapes_raise():
    env_fns = [cartpole, lambda: gym.make("Pendulum-v1")]
    with pytest.raises((AssertionError, RuntimeError, ValueError)):
        SubprocessEnvManager(env_fns, context="fork", observation_mode="different")


def test_unequal_sub_env_spaces_raise_runtime_error_from_the_constructor():
    with pytest.raises(RuntimeError):
        SubprocessEnvManager([cartpole, lambda: gym.make("FrozenLake-v1")], context="fork")


@pytest.mark.parametrize("mode", [AutoresetMode.SAME_STEP, "SameStep", "same_step"])
def test_autoreset_mode_accepts_the_enum_its_value_or_its_name(mode):
    envs = SubprocessEnvManager([cartpole], context="fork", autoreset_mode=mode)
    assert envs.autoreset_mode is AutoresetMode.SAME_STEP
    envs.close()


def test_invalid_autoreset_mode_raises_value_error():
    with pytest.raises(ValueError, match="autoreset_mode"):
        SubprocessEnvManager([cartpole], context="fork", autoreset_mode="sometimes")


@pytest.mark.parametrize("bad", [0, -2, 1.5])
def test_max_concurrency_must_be_a_positive_int(bad):
    with pytest.raises(ValueError, match="max_concurrency"):
        SubprocessEnvManager([cartpole], context="fork", max_concurrency=bad)


def test_max_concurrency_above_num_envs_is_fine_and_results_are_unchanged():
    reference = SyncVectorEnv([cartpole] * 3)
    envs = SubprocessEnvManager([cartpole] * 3, context="fork", max_concurrency=5)
    limited = SubprocessEnvManager([cartpole] * 3, context="fork", max_concurrency=1)
    expected, _ = reference.reset(seed=3)
    for vec in (envs, limited):
        observations, _ = vec.reset(seed=3)
        np.testing.assert_array_equal(observations, expected)
        vec.step(np.array([0, 1, 0]))
        vec.close()
    reference.close()


def test_metadata_is_a_copy_with_the_autoreset_mode_and_the_class_metadata_is_untouched():
    envs = SubprocessEnvManager([cartpole], context="fork", autoreset_mode="Disabled")
    assert envs.metadata["autoreset_mode"] is AutoresetMode.DISABLED
    assert envs.metadata["render_fps"] == CartPoleEnv.metadata["render_fps"]
    assert "autoreset_mode" not in CartPoleEnv.metadata
    envs.close()


def test_render_mode_comes_from_the_sub_env():
    envs = SubprocessEnvManager([lambda: gym.make("CartPole-v1", render_mode="rgb_array")], context="fork")
    assert envs.render_mode == "rgb_array"
    envs.close()


def test_shared_memory_with_a_custom_space_raises_value_error():
    with pytest.raises(ValueError, match="shared_memory"):
        SubprocessEnvManager([CustomSpaceEnv] * 2, context="fork", shared_memory=True)


def test_custom_space_without_shared_memory_batches_observations_in_a_tuple():
    envs = SubprocessEnvManager([CustomSpaceEnv] * 2, context="fork", shared_memory=False)
    observations, _ = envs.reset()
    assert observations == ("reset", "reset")
    observations, *_ = envs.step(("a", "b"))
    assert observations == ("step(a)", "step(b)")
    envs.close()


def test_shared_memory_with_a_dynamic_shape_space_raises_gymnasiums_type_error():
    with pytest.raises(
        TypeError, match="has a dynamic shape so its not possible to make a static shared memory."
    ):
        SubprocessEnvManager([SequenceSpaceEnv] * 2, context="fork", shared_memory=True)


def test_dynamic_shape_space_works_without_shared_memory():
    envs = SubprocessEnvManager([SequenceSpaceEnv] * 2, context="fork", shared_memory=False)
    envs.reset()
    observations, *_ = envs.step(np.array([0, 1]))
    assert [list(o) for o in observations] == [[0], [0, 1]]
    envs.close()


def test_float16_observations_survive_shared_memory():
    space = spaces.Box(0, 1, shape=(3,), dtype=np.float16)

    class HalfEnv(CountingEnv):
        def __init__(self):
            super().__init__()
            self.observation_space = space

        def _obs(self):
            return np.full(3, 0.25, dtype=np.float16)

    envs = SubprocessEnvManager([HalfEnv] * 2, context="fork", shared_memory=True)
    observations, _ = envs.reset()
    assert observations.dtype == np.float16
    np.testing.assert_array_equal(observations, np.full((2, 3), 0.25, dtype=np.float16))
    envs.close()


def test_a_custom_worker_is_refused_with_a_clear_error():
    with pytest.raises(ValueError, match="custom `worker`"):
        SubprocessEnvManager([cartpole], context="fork", worker=lambda *args: None)


def test_daemon_and_copy_are_accepted():
    envs = SubprocessEnvManager([cartpole], context="fork", daemon=False, copy=False)
    observations, _ = envs.reset(seed=0)
    again, *_ = envs.step(np.array([0]))
    assert again is observations  # copy=False hands out the manager's own buffer
    envs.close()


def test_copy_true_returns_observations_the_manager_never_overwrites():
    with SubprocessEnvManager([cartpole] * 2, context="fork", copy=True) as envs:
        first, _ = envs.reset(seed=0)
        kept = first.copy()
        envs.step(np.array([0, 1]))
        np.testing.assert_array_equal(first, kept)


def test_mixed_space_types_raise_in_different_mode():
    env_fns = [cartpole, lambda: gym.make("FrozenLake-v1")]
    with pytest.raises((AssertionError, RuntimeError, TypeError)):
        SubprocessEnvManager(env_fns, context="fork", observation_mode="different")


def test_the_timeout_bounds_calls_not_the_start_up_of_spawned_workers():
    # Starting an interpreter takes far longer than a millisecond, loaded machine or not.
    envs = SubprocessEnvManager([CountingEnv] * 2, context="spawn", timeout=0.001)
    assert envs.timeout == 0.001
    envs.close()

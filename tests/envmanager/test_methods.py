"""reset, step, the split calls, call/get_attr/set_attr/render and close, as AsyncVectorEnv has them."""

from __future__ import annotations

import multiprocessing
import time
import warnings

import gymnasium as gym
import numpy as np
import pytest
from envmanager_testenvs import CountingEnv
from gymnasium.error import AlreadyPendingCallError, ClosedEnvironmentError, NoAsyncCallError

from envmanager import SubprocessEnvManager


def counting_envs(n: int = 4, **kwargs) -> SubprocessEnvManager:
    kwargs.setdefault("context", "fork")
    return SubprocessEnvManager([lambda i=i: CountingEnv(episode_length=5) for i in range(n)], **kwargs)


@pytest.fixture
def envs():
    vector_env = counting_envs(envs_per_worker=2)
    yield vector_env
    vector_env.close(terminate=True)


def test_np_random_seed_is_a_tuple_read_from_the_workers(envs):
    seeds = envs.np_random_seed
    assert isinstance(seeds, tuple) and len(seeds) == 4
    envs.reset(seed=42)
    assert envs.np_random_seed == (42, 43, 44, 45)
    envs.reset(seed=None)
    assert envs.np_random_seed == (42, 43, 44, 45)
    envs.reset(seed=[5, None, 7, None])
    assert envs.np_random_seed[0] == 5 and envs.np_random_seed[2] == 7


def test_np_random_seed_before_any_reset_reflects_what_the_factories_did():
    def seeded(seed):
        def make():
            env = CountingEnv()
            env.reset(seed=seed)
            return env

        return make

    envs = SubprocessEnvManager([seeded(i) for i in range(4)], context="fork")
    assert envs.np_random_seed == (0, 1, 2, 3)
    envs.close()


def test_seed_list_of_the_wrong_length_raises_value_error(envs):
    with pytest.raises(ValueError, match="num_envs=4"):
        envs.reset(seed=[1, 2])


def test_reset_mask_resets_only_the_masked_envs_and_keeps_the_others_observations(envs):
    envs.reset(seed=0)
    for _ in range(3):
        observations, *_ = envs.step(np.array([1, 1, 1, 1]))
    mask = np.array([True, False, True, False])
    again, _ = envs.reset(options={"reset_mask": mask})
    np.testing.assert_array_equal(again[:, 0], [0, 3, 0, 3])
    np.testing.assert_array_equal(again[~mask], observations[~mask])


@pytest.mark.parametrize(
    "mask, error",
    [
        (np.array([True, False]), ValueError),
        (np.array([1, 0, 1, 0]), TypeError),
        (np.zeros(4, dtype=bool), ValueError),
        ([True, False, True, False], TypeError),
    ],
)
def test_invalid_reset_mask_raises(envs, mask, error):
    with pytest.raises(error, match="reset_mask"):
        envs.reset(options={"reset_mask": mask})


def test_step_returns_float64_rewards_and_bool_flags(envs):
    envs.reset(seed=0)
    observations, rewards, terminations, truncations, _ = envs.step(np.array([0, 1, 2, 0]))
    assert observations.shape == (4, 2) and observations.dtype == np.float32
    assert rewards.dtype == np.float64 and rewards.shape == (4,)
    np.testing.assert_array_equal(rewards, [0.5, 1.5, 2.5, 0.5])
    assert terminations.dtype == np.bool_ and truncations.dtype == np.bool_


def test_step_accepts_a_plain_list_of_actions(envs):
    envs.reset(seed=0)
    _, rewards, *_ = envs.step([2, 2, 1, 0])
    np.testing.assert_array_equal(rewards, [2.5, 2.5, 1.5, 0.5])


@pytest.mark.parametrize("actions", [np.array([0, 1]), [0, 1, 2, 0, 1]])
def test_the_wrong_number_of_actions_raises_value_error(envs, actions):
    envs.reset()
    with pytest.raises(ValueError):
        envs.step(actions)
    envs.step(np.zeros(4, dtype=np.int64))  # nothing was sent: the manager is still usable


@pytest.mark.parametrize("actions", [1, np.int64(1), np.array(1)])
def test_a_scalar_action_raises_type_error(envs, actions):
    envs.reset()
    with pytest.raises(TypeError):
        envs.step(actions)


def test_step_and_reset_can_be_split_into_async_and_wait(envs):
    envs.reset_async(seed=1)
    observations, infos = envs.reset_wait(timeout=5)
    assert observations.shape == (4, 2) and infos == {}
    envs.step_async(np.array([0, 0, 0, 0]))
    results = envs.step_wait(timeout=5)
    assert len(results) == 5


@pytest.mark.parametrize("wait", ["reset_wait", "step_wait", "call_wait"])
def test_a_wait_without_its_async_call_raises_no_async_call_error(envs, wait):
    with pytest.raises(NoAsyncCallError) as caught:
        getattr(envs, wait)()
    assert caught.value.name == wait.removesuffix("_wait")


def test_a_second_async_call_while_one_is_pending_raises_already_pending_call_error(envs):
    envs.reset_async()
    with pytest.raises(AlreadyPendingCallError) as caught:
        envs.step_async(np.zeros(4, dtype=np.int64))
    assert caught.value.name == "reset"
    with pytest.raises(AlreadyPendingCallError):
        envs.reset_async()
    with pytest.raises(AlreadyPendingCallError):
        envs.call("render")
    with pytest.raises(AlreadyPendingCallError):
        envs.set_attr("x", 1)
    envs.reset_wait()


def test_call_returns_one_result_per_env_for_methods_and_attributes(envs):
    envs.reset(seed=0)
    envs.step(np.array([1, 1, 1, 1]))
    assert envs.call("_obs")[0][0] == 1
    assert envs.call("episode_length") == (5, 5, 5, 5)


def test_get_attr_returns_a_tuple(envs):
    assert envs.get_attr("episode_length") == (5, 5, 5, 5)


def test_set_attr_sets_one_value_per_env_or_one_for_all_and_can_create_attributes(envs):
    envs.set_attr("episode_length", [1, 2, 3, 4])
    assert envs.get_attr("episode_length") == (1, 2, 3, 4)
    envs.set_attr("max_count", 9)
    assert envs.get_attr("max_count") == (9, 9, 9, 9)
    with pytest.raises(ValueError, match="Values must be a list or tuple"):
        envs.set_attr("max_count", [1, 2])


def test_render_returns_one_frame_per_env():
    with SubprocessEnvManager([lambda: CountingEnv(render_mode="rgb_array")] * 2, context="fork") as envs:
        envs.reset(seed=0)
        frames = envs.render()
    assert isinstance(frames, tuple) and len(frames) == 2
    assert frames[0].shape == (4, 4, 3)


def test_a_normal_reset_and_step_emit_no_warnings():
    envs = SubprocessEnvManager([lambda: gym.make("CartPole-v1")] * 2, context="fork")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        envs.reset(seed=0)
        envs.step(np.array([0, 1]))
        envs.close()
    assert caught == []


def test_any_use_after_close_raises_closed_environment_error(envs):
    envs.close()
    for use in (
        lambda: envs.reset(),
        lambda: envs.step(np.zeros(4, dtype=np.int64)),
        lambda: envs.get_attr("t"),
    ):
        with pytest.raises(ClosedEnvironmentError):
            use()


def test_close_is_idempotent(envs):
    envs.close()
    envs.close()
    envs.close(terminate=True)
    assert envs.closed


def test_close_with_a_pending_call_warns_and_still_closes(envs):
    envs.reset()
    envs.step_async(np.zeros(4, dtype=np.int64))
    with pytest.warns(
        UserWarning, match="Calling `close` while waiting for a pending call to `step` to complete."
    ):
        envs.close()
    assert envs.closed


def test_close_terminate_returns_promptly_while_workers_are_busy():
    envs = SubprocessEnvManager([lambda: CountingEnv(delay=30)] * 2, context="fork")
    envs.reset_async()
    started = time.monotonic()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        envs.close(terminate=True)
    assert time.monotonic() - started < 5


def test_wait_timeout_raises_multiprocessing_timeout_error():
    envs = SubprocessEnvManager([lambda: CountingEnv(delay=0.5)] * 2, context="fork")
    envs.reset_async()
    with pytest.raises(multiprocessing.TimeoutError):
        envs.reset_wait(timeout=0.05)
    envs.close(terminate=True)


def test_late_replies_after_a_timeout_are_dropped_and_the_manager_keeps_working():
    envs = SubprocessEnvManager([lambda: CountingEnv(delay=0.2)] * 2, context="fork")
    envs.reset_async(seed=0)
    with pytest.raises(multiprocessing.TimeoutError):
        envs.reset_wait(timeout=0.01)
    observations, _ = envs.reset(seed=0)
    _, rewards, *_ = envs.step(np.array([2, 1]))
    np.testing.assert_array_equal(rewards, [2.5, 1.5])
    envs.close()


def test_the_timeout_option_is_the_default_for_every_wait():
    envs = SubprocessEnvManager([lambda: CountingEnv(delay=0.5)] * 2, context="fork", timeout=0.05)
    with pytest.raises(multiprocessing.TimeoutError):
        envs.reset()
    envs.close(terminate=True)


def test_the_manager_is_a_context_manager_that_closes_on_exit():
    with counting_envs(2) as envs:
        envs.reset()
    assert envs.closed

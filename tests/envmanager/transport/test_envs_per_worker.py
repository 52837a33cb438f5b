"""envs_per_worker: a whole number of envs per worker, or "auto" (one worker per usable core)."""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager

import gymnasium as gym
import numpy as np
import pytest
from envmanager_testenvs import BadRewardEnv, worker_children

from envmanager import SubprocessEnvManager
from envmanager.transport.envs_per_worker import worker_env_ranges
from profiler.recording.cpu_cores import cores_available

# A failed step is logged through gymnasium.logger.error, which warns; that is not under test here.
pytestmark = pytest.mark.filterwarnings("ignore:.*ERROR:")


def cartpole():
    return gym.make("CartPole-v1")


@contextmanager
def pinned_to_one_core() -> Iterator[None]:
    """This process may use one core only while the block runs (workers started in it inherit that)."""
    allowed = os.sched_getaffinity(0)
    os.sched_setaffinity(0, {min(allowed)})
    try:
        yield
    finally:
        os.sched_setaffinity(0, allowed)


def test_auto_spreads_the_envs_evenly_over_the_cores():
    assert worker_env_ranges(8, "auto", cores=3) == [range(0, 3), range(3, 6), range(6, 8)]
    assert worker_env_ranges(9, "auto", cores=4) == [range(0, 3), range(3, 5), range(5, 7), range(7, 9)]


def test_auto_never_starts_more_workers_than_envs():
    assert worker_env_ranges(2, "auto", cores=8) == [range(0, 1), range(1, 2)]


def test_auto_on_one_core_runs_every_env_in_one_worker():
    assert worker_env_ranges(5, "auto", cores=1) == [range(0, 5)]


def test_a_whole_number_fills_workers_in_order_and_the_last_may_get_fewer():
    assert worker_env_ranges(5, 2, cores=8) == [range(0, 2), range(2, 4), range(4, 5)]


def test_auto_runs_one_worker_per_usable_core_and_says_which_envs_each_runs():
    num_envs = 5
    with SubprocessEnvManager([cartpole] * num_envs, context="fork", envs_per_worker="auto") as envs:
        ranges = envs.worker_env_ranges
        assert len(ranges) == min(cores_available(), num_envs) == len(worker_children())
        assert [env for envs_of_worker in ranges for env in envs_of_worker] == list(range(num_envs))
        assert max(map(len, ranges)) - min(map(len, ranges)) <= 1
        observations, _ = envs.reset(seed=0)
        assert observations.shape == (num_envs, 4)
        assert envs.envs_per_worker == "auto"


@pytest.mark.skipif(not hasattr(os, "sched_setaffinity"), reason="no affinity mask on this platform")
def test_auto_counts_the_cores_of_the_affinity_mask_not_of_the_machine():
    with pinned_to_one_core():
        envs = SubprocessEnvManager([cartpole] * 3, context="fork", envs_per_worker="auto")
    with envs:
        assert envs.worker_env_ranges == (range(0, 3),)
        assert len(worker_children()) == 1


def test_a_bad_reward_names_its_worker_from_the_workers_env_ranges():
    with SubprocessEnvManager([BadRewardEnv] * 8, context="fork", envs_per_worker=3) as envs:
        envs.reset(seed=0)
        with pytest.raises(ValueError, match=r"env 6 \(worker 2\) returned a reward of type str"):
            envs.step(np.array([0, 0, 0, 0, 0, 0, 2, 0]))


def test_a_bad_reward_under_auto_names_the_worker_that_runs_the_env():
    with SubprocessEnvManager([BadRewardEnv] * 5, context="fork", envs_per_worker="auto") as envs:
        last_worker = len(envs.worker_env_ranges) - 1
        envs.reset(seed=0)
        with pytest.raises(ValueError, match=rf"env 4 \(worker {last_worker}\) returned a reward"):
            envs.step(np.array([0, 0, 0, 0, 2]))


@pytest.mark.parametrize("bad", [0, -1, "Auto", "all", ""])
def test_envs_per_worker_below_one_or_another_word_than_auto_is_a_value_error(bad):
    with pytest.raises(ValueError, match=r"`envs_per_worker` must be a whole number >= 1 or 'auto'"):
        SubprocessEnvManager([cartpole], context="fork", envs_per_worker=bad)


@pytest.mark.parametrize("bad", [1.5, 2.0, True, None])
def test_envs_per_worker_of_another_type_is_a_type_error_naming_it(bad):
    with pytest.raises(TypeError, match=r"`envs_per_worker` must be a whole number >= 1 or 'auto'"):
        SubprocessEnvManager([cartpole], context="fork", envs_per_worker=bad)


def test_envs_per_worker_may_be_a_numpy_integer():
    with SubprocessEnvManager([cartpole] * 2, context="fork", envs_per_worker=np.int64(2)) as envs:
        assert envs.worker_env_ranges == (range(0, 2),)

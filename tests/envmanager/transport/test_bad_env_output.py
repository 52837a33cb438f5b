"""Observations or rewards that do not fit: an error naming the worker, the env and the misfit."""

from __future__ import annotations

import numpy as np
import pytest
from envmanager_testenvs import BadRewardEnv, MisshapenObservationEnv

from envmanager import SubprocessEnvManager, WorkerError

# A failed step is logged through gymnasium.logger.error, which warns; that is not under test here.
pytestmark = pytest.mark.filterwarnings("ignore:.*ERROR:")


@pytest.mark.parametrize("envs_per_worker", [1, 2, "auto"])
def test_a_misshapen_observation_over_the_pipe_names_the_worker_the_env_and_both_shapes(envs_per_worker):
    with SubprocessEnvManager(
        [MisshapenObservationEnv] * 4, context="fork", shared_memory=False, envs_per_worker=envs_per_worker
    ) as envs:
        envs.reset(seed=0)
        worker_of_env_3 = next(i for i, envs_of_worker in enumerate(envs.worker_env_ranges) if 3 in envs_of_worker)
        with pytest.raises(ValueError, match=r"env 3 returned an observation of shape \(3,\).*shape \(2,\)") as raised:
            envs.step(np.array([0, 0, 0, 2]))
    cause = raised.value.__cause__
    assert isinstance(cause, WorkerError)
    assert (cause.worker_index, cause.env_index) == (worker_of_env_3, 3)


def test_a_misshapen_observation_in_shared_memory_names_the_env_that_returned_it():
    with SubprocessEnvManager([MisshapenObservationEnv] * 4, context="fork", envs_per_worker=2) as envs:
        envs.reset(seed=0)
        with pytest.raises(ValueError, match=r"env 2 returned an observation of shape \(3,\)") as raised:
            envs.step(np.array([0, 0, 2, 0]))
    assert (raised.value.__cause__.worker_index, raised.value.__cause__.env_index) == (1, 2)


def test_a_reward_that_is_not_a_number_names_the_worker_the_env_and_its_type():
    with SubprocessEnvManager([BadRewardEnv] * 4, context="fork", envs_per_worker=2) as envs:
        envs.reset(seed=0)
        with pytest.raises(ValueError, match=r"env 2 \(worker 1\) returned a reward of type str \('abc'\)"):
            envs.step(np.array([0, 0, 2, 0]))
        with pytest.raises(TypeError, match=r"env 1 \(worker 0\) returned a reward of type dict"):
            envs.step(np.array([0, 1, 0, 0]))
        _, rewards, *_ = envs.step(np.array([0, 0, 0, 0]))  # the manager stays usable
    np.testing.assert_array_equal(rewards, [0.5] * 4)

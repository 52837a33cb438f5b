"""The spaces of a vector env: read from its first env, then checked against every worker's."""

from __future__ import annotations

import gymnasium as gym
import pytest
from gymnasium.spaces import Box, Discrete
from gymnasium.vector import AutoresetMode

from envmanager.transport.env_spaces import check_worker_spaces, describe_first_env


def cartpole() -> gym.Env:
    return gym.make("CartPole-v1")


def test_the_first_env_gives_the_batched_spaces_and_is_closed():
    closed = []

    class ClosingCartPole(gym.Wrapper):
        def close(self):
            closed.append(True)
            super().close()

    made = []

    def make():
        made.append(ClosingCartPole(cartpole()))
        return made[-1]

    description = describe_first_env(make, 3, "same", AutoresetMode.NEXT_STEP)
    assert description.observation_space.shape == (3, 4)
    assert description.action_space == gym.spaces.MultiDiscrete([2, 2, 2])
    assert description.metadata["autoreset_mode"] is AutoresetMode.NEXT_STEP
    assert "autoreset_mode" not in made[0].metadata  # the env's own metadata is left alone
    assert closed == [True]


def test_different_observation_spaces_wait_for_the_workers_to_batch():
    description = describe_first_env(cartpole, 2, "different", AutoresetMode.NEXT_STEP)
    assert description.observation_space is None
    spaces = [(Box(-1, 1, (4,)), Discrete(2)), (Box(-2, 2, (4,)), Discrete(2))]
    batched = check_worker_spaces(spaces, description, "different", "SubprocessEnvManager")
    assert batched.shape == (2, 4)


def test_an_env_with_another_observation_space_is_refused_naming_the_mode():
    description = describe_first_env(cartpole, 2, "same", AutoresetMode.NEXT_STEP)
    spaces = [(description.single_observation_space, Discrete(2)), (Box(-1, 1, (3,)), Discrete(2))]
    with pytest.raises(RuntimeError, match="observation_mode='same'"):
        check_worker_spaces(spaces, description, "same", "SubprocessEnvManager")


def test_an_env_with_another_action_space_is_refused():
    description = describe_first_env(cartpole, 2, "same", AutoresetMode.NEXT_STEP)
    observation = description.single_observation_space
    with pytest.raises(RuntimeError, match="action space different"):
        check_worker_spaces([(observation, Discrete(2)), (observation, Discrete(3))], description, "same", "X")


def test_an_unknown_observation_mode_is_refused():
    with pytest.raises(ValueError, match="Invalid `observation_mode`"):
        describe_first_env(cartpole, 2, "sideways", AutoresetMode.NEXT_STEP)

"""The spaces of a vector env: read from one env built before the workers, then checked on every worker.

Gymnasium's ``AsyncVectorEnv`` builds the first env in the trainer to learn the metadata, render
mode and spaces before it starts its workers, and has each worker report its env's spaces so that
a batch never mixes envs that do not fit. This module does both, with Gymnasium's messages (the
manager builds that first env in a process of its own, see :mod:`envmanager.transport.first_env`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

from gymnasium import Env, Space
from gymnasium.spaces.utils import is_space_dtype_shape_equiv
from gymnasium.vector import AutoresetMode
from gymnasium.vector.utils import batch_differing_spaces, batch_space

__all__ = ["EnvDescription", "check_worker_spaces", "describe_first_env"]


@dataclass(frozen=True)
class EnvDescription:
    """What a vector env takes from its first env. ``observation_space`` is None under
    ``observation_mode="different"``: batching it needs every env's space, which the workers
    report later (see :func:`check_worker_spaces`)."""

    metadata: dict[str, Any]
    render_mode: str | None
    single_action_space: Space
    action_space: Space
    single_observation_space: Space
    observation_space: Space | None


def describe_first_env(
    make_env: Callable[[], Env],
    num_envs: int,
    observation_mode: str | tuple[Space, Space],
    autoreset_mode: AutoresetMode,
) -> EnvDescription:
    """Build one env with ``make_env``, read what the batch needs of it, and close it."""
    first_env = make_env()
    try:
        # A copy, so the env class's own metadata never gains our "autoreset_mode" key.
        metadata = dict(first_env.metadata)
        metadata["autoreset_mode"] = autoreset_mode
        single_action_space = first_env.action_space
        mode = observation_mode
        if isinstance(mode, tuple) and len(mode) == 2:
            if not isinstance(mode[0], Space) or not isinstance(mode[1], Space):
                raise TypeError(
                    f"Expected both elements of observation_mode to be Spaces, got {type(mode[0])} and {type(mode[1])}"
                )
            observation_space, single_observation_space = mode
        elif mode == "same":
            single_observation_space = first_env.observation_space
            observation_space = batch_space(single_observation_space, num_envs)
        elif mode == "different":
            single_observation_space = first_env.observation_space
            observation_space = None
        else:
            raise ValueError(
                "Invalid `observation_mode`, expected: 'same' or 'different' or tuple of single and "
                f"batch observation space, actual got {mode}"
            )
        return EnvDescription(
            metadata=metadata,
            render_mode=first_env.render_mode,
            single_action_space=single_action_space,
            action_space=batch_space(single_action_space, num_envs),
            single_observation_space=single_observation_space,
            observation_space=observation_space,
        )
    finally:
        first_env.close()


def check_worker_spaces(
    spaces: list[tuple[Space, Space]],
    description: EnvDescription,
    observation_mode: str | tuple[Space, Space],
    class_name: str,
) -> Space:
    """Check every sub-env's ``(observation_space, action_space)`` against the batch's, and
    return the batched observation space (built from them all under ``"different"``).

    Raises ``RuntimeError`` for an env that does not fit, with Gymnasium's message.
    """
    observation_space = description.observation_space
    if observation_mode == "different":
        observation_space = batch_differing_spaces([observation for observation, _ in spaces])
    single_observation_space = description.single_observation_space
    for env_observation_space, env_action_space in spaces:
        if observation_mode == "same":
            if env_observation_space != single_observation_space:
                raise RuntimeError(
                    f"{class_name}(..., observation_mode='same') however some of the sub-environments "
                    "observation spaces are not equivalent. If this is intentional, use "
                    "`observation_mode='different'` instead."
                )
        elif not is_space_dtype_shape_equiv(env_observation_space, single_observation_space):
            raise RuntimeError(
                f"{class_name}(..., observation_mode='different' or custom space) however the "
                "sub-environment's observation spaces do not share a common shape and dtype."
            )
        if env_action_space != description.single_action_space:
            raise RuntimeError(
                f"Some environments have an action space different from `{description.single_action_space}`. "
                "In order to batch actions, the action spaces from all environments must be equal."
            )
    return observation_space  # type: ignore[return-value]

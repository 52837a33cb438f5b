"""Shared memory for a step's actions, rewards, terminations and truncations.

With ``shared_memory=True`` observations already skip the pipe (:mod:`envmanager.transport.observations`);
when the action space is array-like too (``Box``, ``Discrete``, ``MultiDiscrete``,
``MultiBinary``, the same exact-type test), the rest of a step skips it as well: the trainer
writes the batch of actions into one block of shared memory, each worker reads its rows, steps
its envs and writes their rewards, terminations and truncations back into the same block, and
the pipe carries only a fixed-size wake-up each way (see :mod:`envmanager.transport.protocol`).  Nothing is
pickled on a step that has nothing else to say.

One block per manager, laid out once::

    actions       num_envs x action shape, the action space's dtype
    rewards       num_envs float64
    terminations  num_envs bool
    truncations   num_envs bool

Who may touch which rows when is the protocol's business: the trainer writes a worker's action
rows only while that worker owes it no reply, and reads the result rows only once the worker's
reply to its latest request has arrived, so the two sides never touch the same rows at once.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from gymnasium import Space

from envmanager.transport.observations import is_array_space

__all__ = ["StepBuffers", "WorkerRows", "shares_steps"]

_ALIGNMENT = 8


def shares_steps(action_space: Space) -> bool:
    """Whether a step's actions and results can travel in shared memory for this single-env
    action space (an array-like one)."""
    return is_array_space(action_space)


def _aligned(offset: int) -> int:
    return -(-offset // _ALIGNMENT) * _ALIGNMENT


def _layout(action_dtype: np.dtype, action_shape: tuple[int, ...], num_envs: int) -> tuple[int, int, int, int, int]:
    """Where each part of the block begins, and its size: ``(action bytes, rewards at,
    terminations at, truncations at, block size)``; one place, so the block allocated and the
    views made over it in every process always agree."""
    action_bytes = num_envs * int(np.prod(action_shape, dtype=np.int64)) * action_dtype.itemsize
    rewards_at = _aligned(action_bytes)
    terminations_at = rewards_at + np.dtype(np.float64).itemsize * num_envs
    truncations_at = terminations_at + num_envs
    return action_bytes, rewards_at, terminations_at, truncations_at, truncations_at + num_envs


class StepBuffers:
    """The shared block of one manager and its numpy views (made again in each process).

    Pickles as the block and its layout only: a worker started with ``spawn`` or
    ``forkserver`` maps the very same memory (as a process argument, like Gymnasium's
    shared observation buffer), one started with ``fork`` inherits it.
    """

    __slots__ = ("block", "action_dtype", "action_shape", "num_envs", "actions", "rewards", "terminations", "truncations")

    def __init__(self, block: Any, action_dtype: np.dtype, action_shape: tuple[int, ...], num_envs: int) -> None:
        self.block = block
        self.action_dtype = np.dtype(action_dtype)
        self.action_shape = tuple(action_shape)
        self.num_envs = num_envs
        action_bytes, rewards_at, terminations_at, truncations_at, _ = _layout(
            self.action_dtype, self.action_shape, num_envs
        )
        self.actions = np.frombuffer(
            block, dtype=self.action_dtype, count=action_bytes // self.action_dtype.itemsize
        ).reshape((num_envs, *self.action_shape))
        self.rewards = np.frombuffer(block, dtype=np.float64, count=num_envs, offset=rewards_at)
        self.terminations = np.frombuffer(block, dtype=np.bool_, count=num_envs, offset=terminations_at)
        self.truncations = np.frombuffer(block, dtype=np.bool_, count=num_envs, offset=truncations_at)

    @classmethod
    def allocate(cls, action_space: Space, num_envs: int, ctx: Any) -> StepBuffers:
        """A fresh block for ``num_envs`` envs of ``action_space`` (an array-like space)."""
        dtype = np.dtype(action_space.dtype)
        size = _layout(dtype, action_space.shape, num_envs)[-1]
        return cls(ctx.RawArray("b", size), dtype, action_space.shape, num_envs)

    def __getstate__(self) -> tuple:
        return (self.block, self.action_dtype.str, self.action_shape, self.num_envs)

    def __setstate__(self, state: tuple) -> None:
        self.__init__(*state)

    def fits(self, actions: Any) -> bool:
        """Whether ``actions`` is a batch that shared memory carries as it is: an ndarray of the
        space's dtype and the batch's shape, so a worker's env gets exactly what it would get
        through the pipe."""
        return type(actions) is np.ndarray and actions.dtype == self.action_dtype and actions.shape == self.actions.shape


class WorkerRows:
    """A worker's rows of the block: reads its actions, writes its envs' results."""

    __slots__ = ("actions", "rewards", "terminations", "truncations")

    def __init__(self, buffers: StepBuffers, first_env: int, num_envs: int) -> None:
        rows = slice(first_env, first_env + num_envs)
        self.actions = buffers.actions[rows]
        self.rewards = buffers.rewards[rows]
        self.terminations = buffers.terminations[rows]
        self.truncations = buffers.truncations[rows]

    def read_actions(self) -> np.ndarray:
        """This worker's actions, a private copy: an env may write into its action or keep it,
        and the trainer writes the next step's actions into these rows."""
        return self.actions.copy()

    def write_results(self, rewards: list, terminations: list, truncations: list) -> bool:
        """Write the envs' results; False when one does not fit (a reward that is not a real
        number, ...), so that the values travel in the reply and the trainer reports them."""
        try:
            if (
                len(rewards) == 1
                and type(rewards[0]) in _PLAIN
                and type(terminations[0]) in _PLAIN
                and type(truncations[0]) in _PLAIN
            ):
                # One env returning plain Python numbers (CartPole, most envs): element writes
                # convert them exactly as the slice writes below do, in a quarter of the time.
                self.rewards[0] = rewards[0]
                self.terminations[0] = terminations[0]
                self.truncations[0] = truncations[0]
            else:
                if None in rewards:
                    return False  # numpy would write NaN without a word
                self.rewards[:] = rewards
                self.terminations[:] = terminations
                self.truncations[:] = truncations
        except (TypeError, ValueError, OverflowError):
            return False
        return True


_PLAIN = frozenset((float, int, bool))

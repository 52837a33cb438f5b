"""A vector step's batch: the actions split per worker on the way out, the results per env on the
way back, assembled into what ``step`` and ``reset`` return.

Replies arrive worker by worker, in any order; each fills the rows of its envs. Rewards and flags
are kept as plain lists, filled slice by slice and made arrays once per step: cheaper than a numpy
conversion per worker. With shared step buffers (:mod:`envmanager.transport.step_buffers`) actions
and results travel through shared memory instead, and only a reply that did not fit carries them.
"""

from __future__ import annotations

from typing import Any, Callable

import numpy as np
from gymnasium import Space
from gymnasium.core import ActType, ObsType
from gymnasium.spaces import Box, MultiBinary, MultiDiscrete
from gymnasium.vector.utils import iterate

from envmanager.transport.observations import ObservationBatch
from envmanager.transport.pool import WorkerHandle
from envmanager.transport.protocol import IN_SHARED_MEMORY, pack_array
from envmanager.transport.step_buffers import StepBuffers

__all__ = ["StepBatch", "VectorStepResult"]

VectorStepResult = tuple[ObsType, np.ndarray, np.ndarray, np.ndarray, dict[str, Any]]
"""What ``step`` returns: observations, rewards, terminations, truncations and infos."""

# Batched action spaces whose batch is one ndarray, so a worker's actions are a slice of it.
_ARRAY_ACTION_SPACES = (Box, MultiDiscrete, MultiBinary)


class StepBatch:
    """The rows of every env for the call under way, and how to assemble them.

    ``add_info`` is the vector env's ``_add_info``: infos are built in env order exactly as
    ``SyncVectorEnv`` builds them.
    """

    __slots__ = (
        "num_envs",
        "action_space",
        "observations",
        "step_buffers",
        "add_info",
        "rewards",
        "terminations",
        "truncations",
        "worker_infos",
        "values_in_body",
        "_array_actions",
        "all_in_shared_memory",
    )

    def __init__(
        self,
        action_space: Space,
        num_envs: int,
        num_workers: int,
        observations: ObservationBatch,
        step_buffers: StepBuffers | None,
        add_info: Callable[[dict[str, Any], dict[str, Any], int], dict[str, Any]],
    ) -> None:
        self.num_envs = num_envs
        self.action_space = action_space
        self.observations = observations
        self.step_buffers = step_buffers
        self.add_info = add_info
        self.rewards: list[float] = [0.0] * num_envs
        self.terminations: list[bool] = [False] * num_envs
        self.truncations: list[bool] = [False] * num_envs
        # Each worker's infos from its latest reply, None once collected or when it had none.
        self.worker_infos: list[list | None] = [None] * num_workers
        # The workers whose latest step reply carried its values (they did not fit shared memory).
        self.values_in_body: list[WorkerHandle] = []
        self._array_actions = type(action_space) in _ARRAY_ACTION_SPACES
        # What split_actions returns when every worker's actions went into shared memory: the
        # trainer then wakes each worker with the same request (WorkerPool.send_step_wakeups).
        self.all_in_shared_memory = [IN_SHARED_MEMORY] * num_workers

    # -- out: the actions --------------------------------------------------------------------

    def split_actions(self, actions: ActType, workers: list[WorkerHandle]) -> list[Any]:
        """One body per worker: its slice of the batch, packed when it is an array; or
        ``IN_SHARED_MEMORY``, its slice written into the shared step buffers.

        A worker that still owes a reply (to a step the trainer gave up on) may yet read its
        rows for that step, so its actions travel in the message instead.
        """
        if self.values_in_body:
            self.values_in_body = []
        buffers = self.step_buffers
        if buffers is not None and buffers.fits(actions):
            for handle in workers:
                if handle.outstanding:
                    break
            else:
                buffers.actions[...] = actions
                return self.all_in_shared_memory
            bodies = []
            for handle in workers:
                rows = slice(handle.envs.start, handle.envs.stop)
                if handle.outstanding:
                    bodies.append(pack_array(actions[rows]))
                else:
                    buffers.actions[rows] = actions[rows]
                    bodies.append(IN_SHARED_MEMORY)
            return bodies
        if self._array_actions and isinstance(actions, np.ndarray):
            if actions.ndim == 0:
                raise TypeError(f"Expected a batch of {self.num_envs} actions, got a scalar {actions!r}.")
            if len(actions) != self.num_envs:
                raise ValueError(
                    f"Expected {self.num_envs} actions, one per sub-environment, got {len(actions)}."
                )
            return [pack_array(actions[h.envs.start : h.envs.stop]) for h in workers]
        per_env = list(iterate(self.action_space, actions))
        if len(per_env) != self.num_envs:
            raise ValueError(
                f"Expected {self.num_envs} actions, one per sub-environment, got {len(per_env)}."
            )
        return [per_env[h.envs.start : h.envs.stop] for h in workers]

    # -- back: the replies -------------------------------------------------------------------

    def store_step(self, handle: WorkerHandle, body: Any) -> None:
        """Take a worker's successful step reply into its envs' rows."""
        if body is IN_SHARED_MEMORY:  # everything is in shared memory, and there were no infos
            self.worker_infos[handle.index] = None
            return
        observations, rewards, terminations, truncations, infos = body
        start, stop = handle.envs.start, handle.envs.stop
        self.observations.store(start, stop, observations)
        if rewards is not None:
            self.rewards[start:stop] = rewards
            self.terminations[start:stop] = terminations
            self.truncations[start:stop] = truncations
            if self.step_buffers is not None:
                self.values_in_body.append(handle)
        self.worker_infos[handle.index] = infos

    def store_reset(self, handle: WorkerHandle, body: Any) -> None:
        """Take a worker's successful reset reply into its envs' rows."""
        observations, infos = body
        self.observations.store(handle.envs.start, handle.envs.stop, observations)
        self.worker_infos[handle.index] = infos

    def cut_short(self, envs: range) -> None:
        """The step results of envs whose worker died in the step and was replaced: their
        episode was cut short, so say so, as a time limit would."""
        buffers = self.step_buffers
        if buffers is not None:
            buffers.rewards[envs.start : envs.stop] = 0.0
            buffers.terminations[envs.start : envs.stop] = False
            buffers.truncations[envs.start : envs.stop] = True
            return
        count = len(envs)
        self.rewards[envs.start : envs.stop] = [0.0] * count
        self.terminations[envs.start : envs.stop] = [False] * count
        self.truncations[envs.start : envs.stop] = [True] * count

    # -- assembled ---------------------------------------------------------------------------

    def step_result(self, workers: list[WorkerHandle]) -> VectorStepResult:
        """What ``step`` returns, from the rows the replies filled."""
        buffers = self.step_buffers
        if buffers is not None:
            if self.values_in_body:
                self._write_values_in_body(buffers, workers)
            # Copies for the user: the next step overwrites the buffers.
            return (
                self.observations.result(),
                buffers.rewards.copy(),
                buffers.terminations.copy(),
                buffers.truncations.copy(),
                self.collect_infos(workers),
            )
        try:
            rewards = np.array(self.rewards, dtype=np.float64)
            if None in self.rewards:  # numpy makes it NaN without a word
                raise TypeError("None is not a number")
        except (TypeError, ValueError) as exc:
            raise self._reward_error(exc, range(self.num_envs), workers) from exc
        return (
            self.observations.result(),
            rewards,
            np.array(self.terminations, dtype=np.bool_),
            np.array(self.truncations, dtype=np.bool_),
            self.collect_infos(workers),
        )

    def reset_result(self, workers: list[WorkerHandle]) -> tuple[ObsType, dict[str, Any]]:
        """What ``reset`` returns: the observations and infos the replies filled."""
        return self.observations.result(), self.collect_infos(workers)

    def _write_values_in_body(self, buffers: StepBuffers, workers: list[WorkerHandle]) -> None:
        """Write into their rows of the shared buffers the results that came in a reply (a
        reward shared memory could not carry, a worker that owed an earlier reply)."""
        for handle in self.values_in_body:
            start, stop = handle.envs.start, handle.envs.stop
            try:
                buffers.rewards[start:stop] = np.array(self.rewards[start:stop], dtype=np.float64)
                if None in self.rewards[start:stop]:  # numpy makes it NaN without a word
                    raise TypeError("None is not a number")
            except (TypeError, ValueError) as exc:
                raise self._reward_error(exc, handle.envs, workers) from exc
            buffers.terminations[start:stop] = np.array(self.terminations[start:stop], dtype=np.bool_)
            buffers.truncations[start:stop] = np.array(self.truncations[start:stop], dtype=np.bool_)

    def _reward_error(self, error: Exception, envs: range, workers: list[WorkerHandle]) -> Exception:
        """Numpy's error for a reward that is not a number, made to name the env and its worker.

        Looked into only once numpy refused the rewards of ``envs``, so the step path pays
        nothing for it.  The exception type stays numpy's (``ValueError`` for a string).
        """
        for env_index in envs:
            reward = self.rewards[env_index]
            try:
                fits = reward is not None and np.array(reward, dtype=np.float64).shape == ()
            except (TypeError, ValueError) as exc:
                fits, error = False, exc
            if not fits:
                worker_index = next(h.index for h in workers if env_index in h.envs)
                return type(error)(
                    f"env {env_index} (worker {worker_index}) returned a reward of type "
                    f"{type(reward).__name__} ({reward!r:.80}); a reward must be a real number ({error})"
                )
        return error

    def collect_infos(self, workers: list[WorkerHandle]) -> dict[str, Any]:
        """Gymnasium's vector infos, built in env order exactly as SyncVectorEnv builds them."""
        infos: dict[str, Any] = {}
        for handle in workers:
            worker_infos = self.worker_infos[handle.index]
            if worker_infos is None:
                continue
            self.worker_infos[handle.index] = None
            for env_index, info in zip(handle.envs, worker_infos):
                if info:
                    infos = self.add_info(infos, info, env_index)
        return infos

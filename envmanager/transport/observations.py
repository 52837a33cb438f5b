"""How observations travel from the workers into one batched observation.

Three transports, chosen once at construction:

* **shared memory** (``shared_memory=True``, Gymnasium's default): each worker writes its
  envs' observations straight into a buffer shared with the trainer, and nothing is pickled.
  Worth it for large observations (images); it uses Gymnasium's public shared-memory helpers
  so every space Gymnasium can share works the same way here.
* **array block**: for array-like spaces (``Box``, ``Discrete``, ``MultiDiscrete``,
  ``MultiBinary``) a worker stacks its envs' observations into one array, so the pipe carries
  one compact array per worker rather than one object per env, and the trainer copies it
  into its slice of the batch with a single assignment.
* **list**: anything else (``Dict``, ``Tuple``, ``Graph``, custom spaces, ...) travels as a
  list of per-env observations and is batched with Gymnasium's ``concatenate``, exactly as
  ``SyncVectorEnv`` does it.
"""

from __future__ import annotations

from copy import deepcopy
from typing import Any

import numpy as np
from gymnasium import Space
from gymnasium.error import CustomSpaceError
from gymnasium.spaces import Box, Discrete, MultiBinary, MultiDiscrete
from gymnasium.vector.utils import (
    concatenate,
    create_empty_array,
    create_shared_memory,
    read_from_shared_memory,
    write_to_shared_memory,
)

from envmanager.transport.protocol import pack_array, unpack_array

__all__ = ["allocate_shared_buffer", "is_array_space", "ObservationMismatch", "ObservationPacker", "ObservationBatch"]

_ARRAY_SPACES = (Box, Discrete, MultiDiscrete, MultiBinary)


def is_array_space(space: Space) -> bool:
    """Whether values of ``space`` are plain arrays of its dtype and shape (``Box``, ``Discrete``,
    ``MultiDiscrete``, ``MultiBinary``): exact types only, since a subclass may override how it
    samples or batches."""
    return type(space) in _ARRAY_SPACES


def allocate_shared_buffer(space: Space, num_envs: int, ctx: Any) -> Any:
    """Create the shared observation buffer, with Gymnasium's errors for unsupported spaces.

    Raises:
        ValueError: for a custom (non-Gymnasium) space, as ``AsyncVectorEnv`` does.
        TypeError: for a space with a dynamic shape (``Graph``, ``Sequence``, or a
            ``Dict``/``Tuple`` holding one), whose size cannot be fixed in advance.
    """
    try:
        return create_shared_memory(space, n=num_envs, ctx=ctx)
    except CustomSpaceError as e:
        raise ValueError(
            "Using `SubprocessEnvManager(..., shared_memory=True)` caused an error, you can disable "
            "this feature with `shared_memory=False` however this is slower."
        ) from e


class ObservationMismatch(ValueError):
    """An env returned an observation that does not fit the observation space.

    A ``ValueError``, as numpy's own error would be, so existing ``except ValueError`` code keeps
    working; it names the env (``env_index``, in the whole batch) and both shapes or types, which
    numpy's message cannot.
    """

    def __init__(self, message: str, env_index: int) -> None:
        super().__init__(message)
        self.env_index = env_index

    def __reduce__(self) -> tuple[Any, ...]:
        # The default would call __init__ with the message alone; the worker proves the round
        # trip before sending, so without this the trainer would get a RuntimeError instead.
        return (type(self), (str(self), self.env_index))


class ObservationPacker:
    """Worker side: turns the observations of a worker's envs into a reply field."""

    __slots__ = ("_space", "_shared_buffer", "_shared_rows", "_first_env", "_as_array", "_dtype", "_shape")

    def __init__(self, space: Space, shared_buffer: Any, first_env: int, num_envs: int) -> None:
        self._space = space
        self._shared_buffer = shared_buffer
        self._first_env = first_env
        self._as_array = is_array_space(space)
        self._dtype = space.dtype if self._as_array else None
        self._shape = space.shape if self._as_array else None
        # For array spaces, a view of the shared buffer made once: writing a row into it costs
        # a fraction of Gymnasium's write_to_shared_memory, which rebuilds the view every call.
        self._shared_rows = None
        if shared_buffer is not None and self._as_array:
            self._shared_rows = read_from_shared_memory(space, shared_buffer, n=num_envs)

    def pack(self, observations: list, written: list[bool] | None = None) -> Any:
        """Return what to send for ``observations`` (None when shared memory carried them).

        ``written`` marks which envs produced a new observation; with shared memory the others
        are left untouched in the buffer, which is what ``reset_mask`` needs.

        Raises:
            ObservationMismatch: an array observation has the wrong shape or cannot be made an
                array of the space's dtype (only looked into once numpy has refused the batch,
                so a fitting batch costs nothing more).
        """
        if self._shared_buffer is not None:
            rows = self._shared_rows
            for j, obs in enumerate(observations):
                if written is None or written[j]:
                    try:
                        if rows is not None:
                            rows[self._first_env + j] = obs
                        else:
                            write_to_shared_memory(self._space, self._first_env + j, obs, self._shared_buffer)
                    except (ValueError, TypeError) as exc:
                        raise self._mismatch(j, obs, exc) from exc
            return None
        if self._as_array:
            # Cast here, as concatenating into the batch would, so the bytes match its dtype.
            try:
                batch = np.asarray(observations, dtype=self._dtype)
            except (ValueError, TypeError) as exc:
                raise self._first_mismatch(observations, exc) from exc
            if batch.shape[1:] != self._shape:
                raise self._first_mismatch(observations, None)
            return pack_array(batch)
        return observations

    def _first_mismatch(self, observations: list, error: Exception | None) -> ObservationMismatch:
        """The error for the first env whose observation does not fit the space."""
        for j, obs in enumerate(observations):
            try:
                fits = np.asarray(obs, dtype=self._dtype).shape == self._shape
            except (ValueError, TypeError) as exc:
                return self._mismatch(j, obs, exc)
            if not fits:
                return self._mismatch(j, obs, error)
        return self._mismatch(0, observations[0], error)

    def _mismatch(self, j: int, obs: Any, error: Exception | None) -> ObservationMismatch:
        env_index = self._first_env + j
        shape = getattr(obs, "shape", None)
        if shape is None:
            try:
                shape = np.shape(obs)
            except (ValueError, TypeError):
                shape = None
        if shape is not None and self._space.shape is not None and tuple(shape) != self._space.shape:
            return ObservationMismatch(
                f"env {env_index} returned an observation of shape {tuple(shape)}, but its "
                f"observation space {self._space} has shape {self._space.shape}",
                env_index,
            )
        return ObservationMismatch(
            f"env {env_index} returned an observation that does not fit its observation space "
            f"{self._space}: {type(obs).__name__} {obs!r:.80}"
            + ("" if error is None else f" ({type(error).__name__}: {error})"),
            env_index,
        )


class ObservationBatch:
    """Trainer side: the batched observation the manager hands to the user.

    ``store`` puts one worker's reply field into place; ``result`` returns the batch (a copy
    when ``copy=True``, the manager's own buffer otherwise, as Gymnasium does).
    """

    __slots__ = ("_space", "_copy", "_shared", "_as_array", "_batch", "_per_env")

    def __init__(self, space: Space, num_envs: int, copy: bool, shared_buffer: Any) -> None:
        self._space = space
        self._copy = copy
        self._shared = shared_buffer is not None
        self._as_array = is_array_space(space)
        if self._shared:
            self._batch = read_from_shared_memory(space, shared_buffer, n=num_envs)
        else:
            self._batch = create_empty_array(space, n=num_envs, fn=np.zeros)
        # Only the list transport needs the latest observation of every env kept apart.
        self._per_env: list = [None] * num_envs

    def store(self, start: int, stop: int, packed: Any) -> None:
        if self._shared:
            return
        if self._as_array:
            self._batch[start:stop] = unpack_array(packed)
        else:
            self._per_env[start:stop] = packed

    def result(self) -> Any:
        if not self._shared and not self._as_array:
            self._batch = concatenate(self._space, self._per_env, self._batch)
        batch = self._batch
        if not self._copy:
            return batch
        return batch.copy() if isinstance(batch, np.ndarray) else deepcopy(batch)

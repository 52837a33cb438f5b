"""Which envs each worker process runs: the ``envs_per_worker`` option.

A vector step costs one round trip per worker, and a worker steps its envs one after the other.
More workers than cores buys no parallelism for CPU-bound envs, only more round trips and
processes fighting for the cores; fewer workers than cores leaves cores idle.  So the option
takes either a whole number ``k`` (workers of ``k`` consecutive envs, the last one may get
fewer) or ``"auto"``: as many workers as the cores the run may use, never more than the envs,
the envs spread evenly (worker sizes differ by at most one: 8 envs on 3 cores run as 3, 3, 2).

Every env keeps its place in the batch whatever the layout: worker ``i`` runs the consecutive
envs ``env_ranges[i]``, and anything that names an env's worker looks it up in those ranges.
"""

from __future__ import annotations

from typing import Literal, Union

import numpy as np

__all__ = ["AUTO", "EnvsPerWorker", "checked_envs_per_worker", "worker_env_ranges"]

AUTO = "auto"
"""As many worker processes as the cores the run may use, envs spread evenly."""

EnvsPerWorker = Union[int, Literal["auto"]]


def checked_envs_per_worker(value: object) -> EnvsPerWorker:
    """``value`` as a valid setting: a whole number >= 1 or ``"auto"``.

    Raises:
        TypeError: neither a whole number nor a string (a float, a bool, None).
        ValueError: a whole number below 1, or a string other than ``"auto"``.
    """
    if isinstance(value, str):
        if value == AUTO:
            return AUTO
        raise ValueError(f"`envs_per_worker` must be a whole number >= 1 or 'auto', got {value!r}.")
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise TypeError(
            f"`envs_per_worker` must be a whole number >= 1 or 'auto', got {value!r} "
            f"of type {type(value).__name__}."
        )
    if value < 1:
        raise ValueError(f"`envs_per_worker` must be a whole number >= 1 or 'auto', got {value!r}.")
    return int(value)


def worker_env_ranges(num_envs: int, envs_per_worker: EnvsPerWorker, cores: int) -> list[range]:
    """The consecutive envs of each worker, in worker order, covering ``range(num_envs)``.

    ``cores`` is what ``"auto"`` spreads the envs over (the caller's count of the cores the
    workers may use); a whole number ignores it.
    """
    if envs_per_worker == AUTO:
        workers = max(1, min(num_envs, cores))
        size, larger = divmod(num_envs, workers)
        ranges, first = [], 0
        for index in range(workers):
            last = first + size + (1 if index < larger else 0)
            ranges.append(range(first, last))
            first = last
        return ranges
    return [
        range(first, min(first + envs_per_worker, num_envs)) for first in range(0, num_envs, envs_per_worker)
    ]

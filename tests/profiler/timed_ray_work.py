"""Timed Ray tasks and actors for the tests of profiler.integrations.ray (Ray's workers import
this module by name: the test session puts this folder on their path)."""

from __future__ import annotations

from profiler import hierarchical_timer
from profiler.integrations import ray as timed_ray


@timed_ray.remote(num_cpus=0.25)
def simulate(steps: int) -> int:
    """Runs ``steps`` blocks named ``physics``; returns ``steps``."""
    for _ in range(steps):
        with hierarchical_timer("physics"):
            pass
    return steps


@timed_ray.remote(num_cpus=0.25)
def fan_out(tasks: int) -> list[int]:
    """Launches ``tasks`` timed ``simulate`` tasks of one step each and returns their results."""
    return timed_ray.get([simulate.remote(1) for _ in range(tasks)])


@timed_ray.remote(num_cpus=0.25)
class Learner:
    """Counts its updates; each update is a ``backward`` block."""

    def __init__(self) -> None:
        self.updates = 0

    def update(self) -> int:
        with hierarchical_timer("backward"):
            self.updates += 1
        return self.updates

    def diverge(self) -> None:
        """Raises inside a ``doomed`` block."""
        with hierarchical_timer("doomed"):
            raise FloatingPointError("loss is NaN")

"""Wall time and CPU time of a worker's env work: its envs' ``step`` and ``reset`` calls.

The two differ by the time the worker was ready to run but had no core: with more busy
processes than cores, an env that needs 0.4 ms of CPU per step takes 1 ms of wall time, and
only the pair tells CPU oversubscription apart from a slow env.

The worker meters every env call (:class:`EnvTimeMeter`) and ships what it measured since its
previous timer payload beside that payload, taken at the same moment, so the figures cover
exactly the calls the merged ``env.step``/``env.reset`` blocks count, at any flush interval.
The trainer adds them up per worker (:class:`EnvTime`).

CPU time is the worker process's (``time.process_time``): an env that computes on several
threads shows its whole CPU demand, and may then show more CPU than wall time.
"""

from __future__ import annotations

import math
import time
from typing import Any, Callable

__all__ = ["EnvTime", "EnvTimeMeter", "EnvTimeError", "validate_env_time"]


class EnvTimeError(ValueError):
    """Env time figures from a worker that are not what a worker sends (a bug or a foreign peer)."""


class EnvTimeMeter:
    """Worker side: ``with meter:`` around each env call adds its wall time, CPU time and 1 call.

    The wall clock is read outside the CPU clock, so the CPU clock's own cost lands in both and
    a single-threaded env never shows more CPU than wall time.
    """

    __slots__ = ("wall", "cpu", "calls", "_wall_start", "_cpu_start")

    def __init__(self) -> None:
        self.wall = 0.0
        self.cpu = 0.0
        self.calls = 0
        self._wall_start = 0.0
        self._cpu_start = 0.0

    # Clocks bound as default arguments: a local lookup is cheaper than a global one here.
    def __enter__(
        self,
        _wall: Callable[[], float] = time.perf_counter,
        _cpu: Callable[[], float] = time.process_time,
    ) -> None:
        self._wall_start = _wall()
        self._cpu_start = _cpu()

    def __exit__(
        self,
        exc_type: Any,
        exc_value: Any,
        traceback: Any,
        _wall: Callable[[], float] = time.perf_counter,
        _cpu: Callable[[], float] = time.process_time,
    ) -> None:
        self.cpu += _cpu() - self._cpu_start
        self.wall += _wall() - self._wall_start
        self.calls += 1

    def take(self) -> tuple[float, float, int]:
        """``(wall_seconds, cpu_seconds, calls)`` since the previous take; starts afresh."""
        taken = (self.wall, self.cpu, self.calls)
        self.wall, self.cpu, self.calls = 0.0, 0.0, 0
        return taken


class EnvTime:
    """Trainer side: one worker's env time, summed over what its payloads brought."""

    __slots__ = ("wall", "cpu", "calls")

    def __init__(self) -> None:
        self.wall = 0.0
        self.cpu = 0.0
        self.calls = 0

    def add(self, wall: float, cpu: float, calls: int) -> None:
        """Add figures that passed :func:`validate_env_time`."""
        self.wall += wall
        self.cpu += cpu
        self.calls += calls

    def clear(self) -> None:
        self.wall, self.cpu, self.calls = 0.0, 0.0, 0

    def section(self) -> dict[str, Any]:
        """The worker's ``env_time`` entry in the dump."""
        return {"wall_seconds": self.wall, "cpu_seconds": self.cpu, "calls": self.calls}


def validate_env_time(wall: Any, cpu: Any, calls: Any) -> None:
    """Raise :class:`EnvTimeError` naming the figure a worker sent wrong; return if all are right.

    The trainer checks before adding anything, so one bad reply never half-counts.
    """
    for name, seconds in (("wall", wall), ("cpu", cpu)):
        if type(seconds) is not float or not 0.0 <= seconds < math.inf:
            raise EnvTimeError(f"env time: {name} seconds must be a finite float >= 0, got {seconds!r}")
    if type(calls) is not int or calls < 0:
        raise EnvTimeError(f"env time: calls must be a whole number >= 0, got {calls!r}")

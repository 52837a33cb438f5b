"""Wall time and CPU time of a worker's env work: its envs' ``step`` and ``reset`` calls.

The two differ by the time the worker was ready to run but had no core: with more busy
processes than cores, an env that needs 0.4 ms of CPU per step takes 1 ms of wall time, and
only the pair tells CPU oversubscription apart from a slow env.

The worker meters every env call (:class:`EnvTimeMeter`) and ships what it measured since its
previous timer payload beside that payload, taken at the same moment, so the figures cover
exactly the calls the merged ``env.step``/``env.reset`` blocks count, at any flush interval.
The trainer adds them up per worker (:class:`EnvTime`).

**The CPU clock is sampled.** Wall time is read on every call (``perf_counter`` costs tens of
nanoseconds), but a CPU clock is a system call (0.2 to 0.6 us), twice per call: as much as a
quarter of a CartPole step.  So the CPU clock is read on the first call, on every call that
follows one of at least :data:`EXACT_ABOVE_SECONDS` (there it costs under 1 %, so slow envs are
measured exactly), and otherwise on about one call in :data:`MEAN_SAMPLE_SPACING`, at
irregular intervals so that a worker's ``k`` envs are all sampled alike.  The CPU time of all
calls is then ``wall time of all calls x CPU time / wall time of the measured calls``.

CPU time is the worker process's (``time.process_time``): an env that computes on several
threads shows its whole CPU demand, and may then show more CPU than wall time.
"""

from __future__ import annotations

import math
import random
import time
from typing import Any, Callable

__all__ = [
    "EXACT_ABOVE_SECONDS",
    "MEAN_SAMPLE_SPACING",
    "EnvTime",
    "EnvTimeError",
    "EnvTimeMeter",
    "validate_env_time",
]

MEAN_SAMPLE_SPACING = 8
"""On cheap env calls, the CPU clock is read on one call in this many, on average."""

EXACT_ABOVE_SECONDS = 100e-6
"""A call at least this long makes the next call's CPU time be measured too."""

_GAPS = 64  # irregular spacings drawn once per meter, then cycled: no random draw per call


class EnvTimeError(ValueError):
    """Env time figures that are not what a worker sends (a bug or a foreign peer)."""


class EnvTimeMeter:
    """Worker side: ``with meter:`` around each env call meters its wall time and, sampled, its
    CPU time.

    On a measured call the wall clock is read outside the CPU clock, so the CPU clock's own cost
    lands in both and a single-threaded env never shows more CPU than wall time.
    """

    __slots__ = (
        "wall",
        "calls",
        "measured_wall",
        "measured_cpu",
        "measured_calls",
        "_wall_start",
        "_cpu_start",
        "_until_measured",
        "_gaps",
        "_gap",
    )

    def __init__(self, seed: int | None = None) -> None:
        self.wall = 0.0
        self.calls = 0
        self.measured_wall = 0.0
        self.measured_cpu = 0.0
        self.measured_calls = 0
        self._wall_start = 0.0
        self._cpu_start = 0.0
        self._until_measured = 0  # calls to skip before the next measured one; none: the first
        generator = random.Random(seed)
        self._gaps = [generator.randrange(2 * MEAN_SAMPLE_SPACING - 1) for _ in range(_GAPS)]
        self._gap = 0

    # Clocks bound as default arguments: a local lookup is cheaper than a global one here.
    def __enter__(
        self,
        _wall: Callable[[], float] = time.perf_counter,
        _cpu: Callable[[], float] = time.process_time,
    ) -> None:
        self._wall_start = _wall()
        if not self._until_measured:
            self._cpu_start = _cpu()

    def __exit__(
        self,
        exc_type: Any,
        exc_value: Any,
        traceback: Any,
        _wall: Callable[[], float] = time.perf_counter,
        _cpu: Callable[[], float] = time.process_time,
    ) -> None:
        if self._until_measured:
            wall = _wall() - self._wall_start
            self._until_measured -= 1
        else:
            cpu = _cpu() - self._cpu_start
            wall = _wall() - self._wall_start
            self.measured_cpu += cpu
            self.measured_wall += wall
            self.measured_calls += 1
            self._gap = (self._gap + 1) % _GAPS
            self._until_measured = self._gaps[self._gap]
        if wall >= EXACT_ABOVE_SECONDS:
            self._until_measured = 0
        self.wall += wall
        self.calls += 1

    def take(self) -> tuple[float, int, float, float, int]:
        """``(wall, calls, measured_wall, measured_cpu, measured_calls)`` since the previous
        take (seconds and counts); starts afresh."""
        taken = (self.wall, self.calls, self.measured_wall, self.measured_cpu, self.measured_calls)
        self.wall, self.calls = 0.0, 0
        self.measured_wall, self.measured_cpu, self.measured_calls = 0.0, 0.0, 0
        return taken


class EnvTime:
    """Trainer side: one worker's env time, summed over what its payloads brought."""

    __slots__ = ("wall", "calls", "measured_wall", "measured_cpu", "measured_calls")

    def __init__(self) -> None:
        self.clear()

    def add(self, wall: float, calls: int, measured_wall: float, measured_cpu: float, measured_calls: int) -> None:
        """Add figures that passed :func:`validate_env_time`."""
        self.wall += wall
        self.calls += calls
        self.measured_wall += measured_wall
        self.measured_cpu += measured_cpu
        self.measured_calls += measured_calls

    def clear(self) -> None:
        self.wall, self.calls = 0.0, 0
        self.measured_wall, self.measured_cpu, self.measured_calls = 0.0, 0.0, 0

    @property
    def cpu(self) -> float:
        """CPU time of all calls: their wall time at the CPU/wall ratio of the measured ones."""
        if self.measured_wall <= 0.0:
            return self.measured_cpu
        return self.wall * (self.measured_cpu / self.measured_wall)

    def section(self) -> dict[str, Any]:
        """The worker's ``env_time`` entry in the dump."""
        return {
            "wall_seconds": self.wall,
            "cpu_seconds": self.cpu,
            "calls": self.calls,
            "cpu_measured_calls": self.measured_calls,
        }


def validate_env_time(
    wall: Any, calls: Any, measured_wall: Any, measured_cpu: Any, measured_calls: Any
) -> None:
    """Raise :class:`EnvTimeError` naming the figure a worker sent wrong; return if all are right.

    The trainer checks before adding anything, so one bad reply never half-counts.
    """
    for name, seconds in (("wall", wall), ("measured wall", measured_wall), ("measured cpu", measured_cpu)):
        if type(seconds) is not float or not 0.0 <= seconds < math.inf:
            raise EnvTimeError(f"env time: {name} seconds must be a finite float >= 0, got {seconds!r}")
    for name, count in (("calls", calls), ("measured calls", measured_calls)):
        if type(count) is not int or count < 0:
            raise EnvTimeError(f"env time: {name} must be a whole number >= 0, got {count!r}")
    if measured_calls > calls or measured_wall > wall:
        raise EnvTimeError("env time: more measured calls or wall time than calls or wall time in all")

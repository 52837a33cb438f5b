"""Wall time and CPU time of a worker's env work: its envs' ``step`` and ``reset`` calls.

The two differ by the time the worker was ready to run but had no core: with more busy
processes than cores, an env that needs 0.4 ms of CPU per step takes 1 ms of wall time, and
only the pair tells CPU oversubscription apart from a slow env.

The wall time and the number of calls are the worker's ``env.step`` and ``env.reset`` blocks.
The CPU time is **sampled**: a CPU clock is a system call (0.2 to 0.6 us), twice per call, as
much as a tenth of a CartPole step, so the worker reads it (:class:`CpuSampler`) on the first
call, on every call after a measured one that lasted at least :data:`EXACT_ABOVE_SECONDS`
(there it costs under 0.2 %, so slow envs are measured on every call), and otherwise on about one
call in :data:`MEAN_SAMPLE_SPACING`, at irregular intervals so that a worker's ``k`` envs are
all sampled alike.  The other calls cost one counter decrement.  The CPU time of all calls is
then their wall time at the CPU share of the measured ones (:class:`EnvTime`).

A worker ships what it sampled since its previous timer payload beside that payload, taken at
the same moment, so the sample and the blocks cover the same calls at any flush interval.

CPU time is the worker process's (``time.process_time``): an env that computes on several
threads shows its whole CPU demand, and may then show more CPU than wall time.
"""

from __future__ import annotations

import math
import random
import time
from typing import Any, Callable

__all__ = [
    "ENV_BLOCKS",
    "EXACT_ABOVE_SECONDS",
    "MEAN_SAMPLE_SPACING",
    "CpuSampler",
    "EnvTime",
    "EnvTimeError",
    "validate_env_time",
]

ENV_BLOCKS = ("env.step", "env.reset")
"""The worker's blocks around its envs' calls: their wall time is the env time."""

MEAN_SAMPLE_SPACING = 32
"""On cheap env calls, the CPU clock is read on one call in this many, on average: a measured
call costs two system calls and a Python call more (1 to 2 us here, a tenth of a CartPole step).
A worker times every env step anyway, so a step of at least :data:`EXACT_ABOVE_SECONDS` that
was not measured makes the next one measured: a slow env is measured from its second step on,
however far the next sample was."""

EXACT_ABOVE_SECONDS = 1e-3
"""A measured call at least this long makes the next call be measured too."""

_GAPS = 64  # irregular spacings drawn once per sampler, then cycled: no random draw per call


class EnvTimeError(ValueError):
    """Env time figures that are not what a worker sends (a bug or a foreign peer)."""


class CpuSampler:
    """Worker side: decides which env calls have their CPU time read, and adds those up.

    The caller tests ``countdown`` itself, so an unmeasured call costs no function call::

        if sampler.countdown:
            sampler.countdown -= 1
            return env.step(action)
        return sampler.measure(env.step, action)
    """

    __slots__ = ("countdown", "measured_wall", "measured_cpu", "measured_calls", "_gaps", "_gap")

    def __init__(self, seed: int | None = None) -> None:
        self.countdown = 0  # calls to let pass before the next measured one; none: the first
        self.measured_wall = 0.0
        self.measured_cpu = 0.0
        self.measured_calls = 0
        generator = random.Random(seed)
        self._gaps = [generator.randrange(2 * MEAN_SAMPLE_SPACING - 1) for _ in range(_GAPS)]
        self._gap = 0

    # Clocks bound as default arguments: a local lookup is cheaper than a global one here.
    def measure(
        self,
        function: Callable[..., Any],
        *args: Any,
        _wall: Callable[[], float] = time.perf_counter,
        _cpu: Callable[[], float] = time.process_time,
        **kwargs: Any,
    ) -> Any:
        """Call ``function`` and add its wall and CPU time to the sample (also if it raises).

        The wall clock is read outside the CPU clock, so the CPU clock's own cost lands in both
        and a single-threaded env never shows more CPU than wall time.
        """
        wall_start = _wall()
        cpu_start = _cpu()
        try:
            return function(*args, **kwargs)
        finally:
            cpu = _cpu() - cpu_start
            wall = _wall() - wall_start
            self.measured_cpu += cpu
            self.measured_wall += wall
            self.measured_calls += 1
            if wall >= EXACT_ABOVE_SECONDS:
                self.countdown = 0
            else:
                self._gap = (self._gap + 1) % _GAPS
                self.countdown = self._gaps[self._gap]

    def take(self) -> tuple[float, float, int]:
        """``(measured_wall, measured_cpu, measured_calls)`` since the previous take; starts
        afresh (the countdown goes on)."""
        taken = (self.measured_wall, self.measured_cpu, self.measured_calls)
        self.measured_wall, self.measured_cpu, self.measured_calls = 0.0, 0.0, 0
        return taken


class EnvTime:
    """Trainer side: one worker's CPU sample, summed over what its payloads brought."""

    __slots__ = ("measured_wall", "measured_cpu", "measured_calls")

    def __init__(self) -> None:
        self.clear()

    def add(self, measured_wall: float, measured_cpu: float, measured_calls: int) -> None:
        """Add figures that passed :func:`validate_env_time`."""
        self.measured_wall += measured_wall
        self.measured_cpu += measured_cpu
        self.measured_calls += measured_calls

    def clear(self) -> None:
        self.measured_wall, self.measured_cpu, self.measured_calls = 0.0, 0.0, 0

    def section(self, worker_blocks: list[dict[str, Any]]) -> dict[str, Any]:
        """The worker's ``env_time`` entry in the dump, from its dumped top-level blocks.

        The env calls are the ``env.step`` and ``env.reset`` blocks at the top of the worker's
        tree (where the worker runs them; a block of that name inside env code is not a call).
        """
        calls = [block for block in worker_blocks if block["name"] in ENV_BLOCKS]
        wall = sum(block["total"] for block in calls)
        if self.measured_wall > 0.0:
            cpu = wall * (self.measured_cpu / self.measured_wall)
        else:
            cpu = self.measured_cpu
        return {
            "wall_seconds": wall,
            "cpu_seconds": cpu,
            "calls": sum(block["count"] for block in calls),
            "cpu_measured_calls": self.measured_calls,
        }


def validate_env_time(measured_wall: Any, measured_cpu: Any, measured_calls: Any) -> None:
    """Raise :class:`EnvTimeError` naming the figure a worker sent wrong; return if all are right.

    The trainer checks before adding anything, so one bad reply never half-counts.
    """
    for name, seconds in (("measured wall", measured_wall), ("measured cpu", measured_cpu)):
        if type(seconds) is not float or not 0.0 <= seconds < math.inf:
            raise EnvTimeError(f"env time: {name} seconds must be a finite float >= 0, got {seconds!r}")
    if type(measured_calls) is not int or measured_calls < 0:
        raise EnvTimeError(f"env time: measured calls must be a whole number >= 0, got {measured_calls!r}")

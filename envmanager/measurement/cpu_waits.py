"""Trainer side of the workers' waits for a core: the kernel's counts each payload brought, summed.

Each worker reads its own run-queue delay, CPU time and involuntary context switches beside every
payload it ships (:class:`profiler.recording.scheduling.SchedulingSampler`); the trainer adds them
up per worker and writes them in the worker's ``scheduling`` entry of the dump, which the CPU
verdicts quote ("worker 2 waited 41% of its wall time for a core").
"""

from __future__ import annotations

import math
from typing import Any

__all__ = ["CpuWaits", "CpuWaitsError", "validate_cpu_waits"]


class CpuWaitsError(ValueError):
    """Scheduling figures that are not what a worker sends (a bug or a foreign peer)."""


def validate_cpu_waits(figures: Any) -> None:
    """Raise :class:`CpuWaitsError` unless ``figures`` is None or ``(run-queue seconds, CPU
    seconds, wall seconds, involuntary switches)``, each finite and >= 0."""
    if figures is None:
        return
    if not isinstance(figures, tuple) or len(figures) != 4:
        raise CpuWaitsError(f"scheduling figures must be None or four numbers, got {figures!r}")
    *seconds, switches = figures
    for value in seconds:
        if type(value) is not float or not 0.0 <= value < math.inf:
            raise CpuWaitsError(f"scheduling: seconds must be finite floats >= 0, got {value!r}")
    if type(switches) is not int or switches < 0:
        raise CpuWaitsError(f"scheduling: switches must be a whole number >= 0, got {switches!r}")


class CpuWaits:
    """One worker's figures, summed over its payloads since the timers were last reset."""

    __slots__ = ("run_queue", "cpu", "wall", "involuntary_switches", "reported")

    def __init__(self) -> None:
        self.clear()

    def clear(self) -> None:
        self.run_queue = self.cpu = self.wall = 0.0
        self.involuntary_switches = 0
        self.reported = False

    def add(self, figures: tuple[float, float, float, int] | None) -> None:
        """Add figures that passed :func:`validate_cpu_waits` (None: the worker cannot read them)."""
        if figures is None:
            return
        run_queue, cpu, wall, switches = figures
        self.run_queue += run_queue
        self.cpu += cpu
        self.wall += wall
        self.involuntary_switches += switches
        self.reported = True

    def section(self) -> dict[str, Any] | None:
        """The worker's ``scheduling`` entry in the dump; None when it never sent figures."""
        if not self.reported:
            return None
        return {"run_queue_seconds": self.run_queue, "cpu_seconds": self.cpu,
                "wall_seconds": self.wall, "involuntary_switches": self.involuntary_switches}

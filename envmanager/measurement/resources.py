"""CPU and memory of the trainer and of every worker, recorded as timer gauges.

Sampled on the trainer's own thread at the end of a step, at most every ``interval``
seconds: no sampler thread, so nothing races the trainer's timer tree, and a step between
samples pays one clock read. psutil is imported at the first sample: a run whose vector envs
run in the trainer (``rlprof run`` on a ``SyncVectorEnv``) never samples, and need not import it.
"""

from __future__ import annotations

import os
import time
from typing import TYPE_CHECKING, Any, Iterable

from profiler.timing import timers

if TYPE_CHECKING:
    import psutil

__all__ = ["ResourceGauges"]

_MEGABYTE = 1024.0 * 1024.0


class ResourceGauges:
    """Sets ``resources.<process>.cpu_percent`` and ``resources.<process>.rss_mb`` gauges.

    ``<process>`` is ``trainer`` or ``worker_<index>``.  CPU percent is measured between two
    samples (psutil's ``cpu_percent(interval=None)``), so it appears from a process's second
    sample on.
    """

    __slots__ = ("interval", "timer_stack", "next_sample_at", "_processes")

    def __init__(self, interval: float, timer_stack: Any) -> None:
        if not interval > 0:
            raise ValueError(f"`resource_interval` must be a number of seconds > 0, got {interval!r}.")
        self.interval = interval
        self.timer_stack = timer_stack
        self.next_sample_at = 0.0  # time.monotonic(): when the next sample is due
        self._processes: dict[str, psutil.Process] = {}

    def maybe_sample(self, workers: Iterable[tuple[int, int | None]]) -> None:
        """Sample if ``interval`` has passed; ``workers`` gives ``(index, pid or None)`` pairs."""
        now = time.monotonic()
        if now < self.next_sample_at:
            return
        self.next_sample_at = now + self.interval
        self._sample("trainer", os.getpid())
        for index, pid in workers:
            if pid is not None:
                self._sample(f"worker_{index}", pid)

    def _sample(self, label: str, pid: int) -> None:
        import psutil  # imported once, at the first sample: see the module's docstring

        process = self._processes.get(label)
        try:
            first = process is None or process.pid != pid  # or a restarted worker
            if first:
                process = self._processes[label] = psutil.Process(pid)
            with process.oneshot():
                cpu = process.cpu_percent(interval=None)
                rss = process.memory_info().rss / _MEGABYTE
        except psutil.Error:
            self._processes.pop(label, None)  # it ended between two samples
            return
        if not first:  # a first reading only starts psutil's CPU measurement
            timers.set_gauge(f"resources.{label}.cpu_percent", cpu, self.timer_stack)
        timers.set_gauge(f"resources.{label}.rss_mb", rss, self.timer_stack)

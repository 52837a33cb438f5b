"""CPU and memory of the trainer and of every worker, recorded as timer gauges.

Sampled on the trainer's own thread at the end of a step, at most every ``interval``
seconds: no sampler thread, so nothing races the trainer's timer tree, and a step between
samples pays one clock read.

The figures are psutil's, read from ``/proc`` (:func:`profiler.recording.proc_files.process_start_cpu_and_rss`)
without importing psutil: the first sample is taken at the first vector step, inside the
program's training loop, where importing psutil cost the loop 12 to 14 ms once (a 0.6 s
CleanRL-style loop 2% longer). Where ``/proc`` cannot tell, psutil is asked, imported there.
"""

from __future__ import annotations

import os
import time
from typing import Any, Iterable

from profiler.recording import proc_files
from profiler.timing import timers

__all__ = ["ResourceGauges"]

_MEGABYTE = 1024.0 * 1024.0


class ResourceGauges:
    """Sets ``resources.<process>.cpu_percent`` and ``resources.<process>.rss_mb`` gauges.

    ``<process>`` is ``trainer`` or ``worker_<index>``.  CPU percent is measured between two
    samples, as psutil's ``cpu_percent(interval=None)`` measures it (the process's CPU seconds over
    the wall seconds between them, in percent of one core, to one decimal), so it appears from a
    process's second sample on.
    """

    __slots__ = ("interval", "timer_stack", "next_sample_at", "_previous", "_psutil_processes")

    def __init__(self, interval: float, timer_stack: Any) -> None:
        if not interval > 0:
            raise ValueError(f"`resource_interval` must be a number of seconds > 0, got {interval!r}.")
        self.interval = interval
        self.timer_stack = timer_stack
        self.next_sample_at = 0.0  # time.monotonic(): when the next sample is due
        # Per process label: (pid, start time in clock ticks, CPU seconds, time.monotonic()) of
        # its previous sample; the pid and the start time together say which process it was.
        self._previous: dict[str, tuple[int, int, float, float]] = {}
        self._psutil_processes: dict[str, Any] = {}  # where /proc cannot tell: psutil.Process per label

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
        try:
            start_ticks, cpu_seconds, rss = proc_files.process_start_cpu_and_rss(pid)
        except ProcessLookupError:
            self._previous.pop(label, None)  # it ended between two samples
            return
        except (OSError, ValueError, IndexError):
            self._sample_with_psutil(label, pid)
            return
        now = time.monotonic()
        previous = self._previous.get(label)
        self._previous[label] = (pid, start_ticks, cpu_seconds, now)
        # Not a first reading, nor a restarted worker's: that one may have the dead worker's pid.
        if previous is not None and previous[:2] == (pid, start_ticks):
            elapsed = now - previous[3]
            percent = round((cpu_seconds - previous[2]) / elapsed * 100, 1) if elapsed > 0 else 0.0
            timers.set_gauge(f"resources.{label}.cpu_percent", percent, self.timer_stack)
        timers.set_gauge(f"resources.{label}.rss_mb", rss / _MEGABYTE, self.timer_stack)

    def _sample_with_psutil(self, label: str, pid: int) -> None:
        import psutil  # only where /proc cannot tell

        process = self._psutil_processes.get(label)
        try:
            first = process is None or process.pid != pid  # or a restarted worker
            if first:
                process = self._psutil_processes[label] = psutil.Process(pid)
            with process.oneshot():
                cpu = process.cpu_percent(interval=None)
                rss = process.memory_info().rss / _MEGABYTE
        except psutil.Error:
            self._psutil_processes.pop(label, None)  # it ended between two samples
            return
        if not first:  # a first reading only starts psutil's CPU measurement
            timers.set_gauge(f"resources.{label}.cpu_percent", cpu, self.timer_stack)
        timers.set_gauge(f"resources.{label}.rss_mb", rss, self.timer_stack)

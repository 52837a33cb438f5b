"""A thread's waits for a core, and its time on one, inside one kind of block, as the kernel counts
them, read around each of its first :data:`READ_ALL_FIRST` runs, then one run in :data:`READ_EVERY`.

A trainer's vector step is sending, waiting for its workers and receiving: the pipe's work and the
envs' compute. But when more processes are runnable than there are cores (the workers each send
wakes, other programs), the trainer's thread also waits inside the step for a core: runnable,
not running. That wait is neither the pipe's work nor the envs', and a verdict that reads the
step's time as one or the other must leave it out: ``transport_bound`` blamed the pipe of a run
whose trainer spent most of its step waiting for a core that other programs held.

The kernel counts a thread's run-queue delay in ``/proc/thread-self/schedstat`` (nanoseconds, the
second field), and its time on a CPU, which ``time.thread_time_ns()`` reads (the file's first
field is only brought up to date at a tick or a switch, so for the thread reading it, it lags by
what it ran since: a step read that way held most of the policy's forward before it). The
thread's CPU time inside a vector step is the trainer's own part of the pipe's work (pickling,
writing, reading, unpickling), whatever the waits. A ``pread`` of that file, kept open, and the
clock cost some 5 us together where a vector step reads them (its thread just woke, its caches
cold: 1.5 us in a tight loop), two hundred times the cost of timing a block, so
:class:`BlockWaits` reads them around every run of a short run's steps (a few hundred steps on a
crowded core wait 0 or a whole time slice of several milliseconds each: a sample of a few dozen
missed the mean by half) and then around one run in :data:`READ_EVERY`, and the dump says how
many runs it read (``scheduling.in_blocks``, docs/formats.md): the analysis takes their mean per
run. The file read
is the thread's that opened it, so a block is read only in the thread that read it first, and
only in the process that opened it (a forked child's copy of the descriptor still reads its
parent's thread). ``benchmarks/block_waits_cost.py`` measures what the reads cost a step.
"""

from __future__ import annotations

import os
import threading
import time
from typing import Any

from profiler.timing.timer_stack import TimerStack

__all__ = ["READ_ALL_FIRST", "READ_EVERY", "BlockWaits", "block_waits_section"]

READ_ALL_FIRST = 512
"""Runs read one after the other before reading one in :data:`READ_EVERY`."""

READ_EVERY = 31
"""One run read in this many after the first :data:`READ_ALL_FIRST`: hundreds of runs read in a
run of thousands of steps. A prime: it does not fall on the same step of every rollout, whose
lengths are mostly powers of two (CleanRL's 128, SB3's 2048) or A2C's 5."""

_SCHEDSTAT = "/proc/thread-self/schedstat"


class BlockWaits:
    """The calling thread's run-queue delay and CPU time inside the runs of block ``block`` that it
    reads.

    Around a run: ``before = waits.start()`` (None: this run is not read), the run, then
    ``waits.end(before)`` when ``before`` is not None. A deferred recorder of ``stack``: a reset
    of its timers forgets the runs read, as it forgets the tree.
    """

    __slots__ = ("block", "countdown", "runs_read", "run_queue_nanoseconds", "cpu_nanoseconds", "_descriptor",
                 "_owner", "_pid", "__weakref__")

    def __init__(self, block: str, stack: TimerStack) -> None:
        self.block = block
        self.countdown = 0  # runs to let pass before the next one read
        self.runs_read = 0
        self.run_queue_nanoseconds = 0
        self.cpu_nanoseconds = 0
        self._descriptor: int | None = None
        self._owner: int | None = None  # the thread whose schedstat the descriptor reads
        self._pid = os.getpid()
        stack.deferred.add(self)

    def start(self) -> tuple[int, int] | None:
        """The calling thread's CPU time and run-queue delay as a run starts, if this run is read:
        None for the runs between two read, and where this thread or process cannot be read
        (schedstat missing, another thread than the first, a forked child)."""
        if self.countdown:
            self.countdown -= 1
            return None
        self.countdown = READ_EVERY - 1 if self.runs_read >= READ_ALL_FIRST else 0
        if self._owner is None and not self._open():
            return None
        if self._owner != threading.get_ident() or self._pid != os.getpid():
            return None
        return self._read()

    def end(self, before: tuple[int, int]) -> None:
        """Count the run that started at ``before`` (:meth:`start`'s counts) as read."""
        after = self._read()
        if after is not None and after[0] >= before[0] and after[1] >= before[1]:
            self.runs_read += 1
            self.cpu_nanoseconds += after[0] - before[0]
            self.run_queue_nanoseconds += after[1] - before[1]

    def section(self) -> dict[str, Any]:
        """The runs read, the seconds they waited for a core and the seconds they ran on one."""
        return {"runs_read": self.runs_read, "run_queue_seconds": self.run_queue_nanoseconds * 1e-9,
                "cpu_seconds": self.cpu_nanoseconds * 1e-9}

    def close(self) -> None:
        """Stop reading: close the file, and read no run again."""
        descriptor, self._descriptor = self._descriptor, None
        self._owner = -1
        if descriptor is not None and self._pid == os.getpid():
            try:
                os.close(descriptor)
            except OSError:
                pass

    def __del__(self) -> None:
        self.close()

    # A deferred recorder of its stack: nothing held to fold; a reset forgets the runs read.
    def fold(self) -> None:
        return None

    def discard(self, stack: TimerStack) -> None:
        self.runs_read = 0
        self.run_queue_nanoseconds = 0
        self.cpu_nanoseconds = 0

    def _open(self) -> bool:
        try:
            self._descriptor = os.open(_SCHEDSTAT, os.O_RDONLY | os.O_CLOEXEC)
        except OSError:
            self._owner = -1  # never readable here: not Linux, or a kernel without schedstat
            return False
        self._owner = threading.get_ident()
        return True

    def _read(self) -> tuple[int, int] | None:
        try:
            return time.thread_time_ns(), int(os.pread(self._descriptor, 64, 0).split()[1])  # type: ignore[arg-type]
        except (OSError, ValueError, IndexError, TypeError):
            return None


def block_waits_section(stack: TimerStack) -> dict[str, dict[str, Any]]:
    """The dump's ``scheduling.in_blocks``: per block name, the runs read in ``stack``'s run, the
    seconds they waited for a core and the seconds they ran on one, summed over the block's
    readers (one per vector env)."""
    section: dict[str, dict[str, Any]] = {}
    for recorder in list(stack.deferred):
        if isinstance(recorder, BlockWaits) and recorder.runs_read:
            figures = section.setdefault(recorder.block, {"runs_read": 0, "run_queue_seconds": 0.0, "cpu_seconds": 0.0})
            for key, value in recorder.section().items():
                figures[key] += value
    return section

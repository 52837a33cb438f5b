"""What the kernel counts, read by a test's side: run-queue delay from ``schedstat``, and a real busy
program outside the run (what other programs' load looks like to rlprof)."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
from collections.abc import Iterable, Iterator
from pathlib import Path

__all__ = ["busy_program_outside_the_run", "kernel_run_queue_nanoseconds", "kernel_run_queue_seconds"]

_BUSY_LOOP = "import os\nos.sched_setaffinity(0, {cores})\nwhile True:\n    pass\n"


@contextlib.contextmanager
def busy_program_outside_the_run(cores: int = 2) -> Iterator[int]:
    """A Python busy loop on (at most ``cores`` of) the cores this process may use, started by a
    shell that exits at once, so that the loop is no descendant of this process and not part of
    its run; yields its pid, and kills it on leaving."""
    allowed = sorted(os.sched_getaffinity(0))[:cores]
    loop = _BUSY_LOOP.format(cores=allowed).replace("'", "'\"'\"'")
    command = f"{sys.executable} -c '{loop}' >/dev/null 2>&1 & echo $!"
    pid = int(subprocess.run(["sh", "-c", command], capture_output=True, text=True, check=True).stdout)
    try:
        yield pid
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)


def kernel_run_queue_nanoseconds(pid: int, threads: Iterable[int] | None = None) -> int:
    """The run-queue delay the kernel counted so far for every live thread of process ``pid`` (or
    for its ``threads`` alone), in the kernel's own unit: exact, so that two readings' difference
    is exact too."""
    total = 0
    for tid in os.listdir(f"/proc/{pid}/task") if threads is None else threads:
        with contextlib.suppress(OSError):
            total += int(Path(f"/proc/{pid}/task/{tid}/schedstat").read_text().split()[1])
    return total


def kernel_run_queue_seconds(pid: int) -> float:
    """The run-queue delay the kernel counted so far for every live thread of process ``pid``."""
    return kernel_run_queue_nanoseconds(pid) * 1e-9

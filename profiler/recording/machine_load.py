"""What other programs took of the run's cores, sampled at the start of the run and at its dump.

A run's processes can wait for a core because the run itself has more busy processes than cores,
or because other programs on the machine keep those cores busy. The two call for different
changes (fewer workers; ``taskset`` or a quieter machine), so the dump records the second apart:

* ``busy_core_seconds``: the CPU time the kernel counted as busy (``/proc/stat``)
  on the cores the run may use, between the run's start and its dump; the verdicts take the run's
  own CPU time (its processes' ``scheduling`` figures) from it, and what is left is other
  programs';
* ``outside_processes``: the processes outside the run (not this process, not its descendants)
  that used the most CPU over the run, by name and pid, so a verdict can name them. A process
  that ended before the dump is not listed (its CPU still counts in ``busy_core_seconds``);
* ``run_processes_cpu_seconds``: the CPU time over the run of this process and its descendants,
  the children they waited for included (the kernel adds an ended child's CPU time to the parent
  that reaps it): what the run itself took of the cores, whether or not rlprof measured it (a
  worker's start-up before its first env, a forkserver, a process the program starts itself).
  Without it, the run's own unmeasured CPU read as other programs' load.

A sample of every process's CPU times is taken at the run's start and at a dump, at most every
:data:`OUTSIDE_SCAN_SPACING_SECONDS`, never per step. On Linux it reads each ``/proc/<pid>/stat``
once, and nothing else: through psutil, a sample read that file two or three times a process and
built an object for each (about 300,000 instructions a process, tens of milliseconds on a host
with hundreds of processes, at the start of every ``rlprof run`` and twice at its dump); only the
processes a dump names have their names read. psutil is imported only where there is no ``/proc``
(:mod:`.proc_files` reads the same figures from it). A timer stack is followed with :func:`follow_stack`, like
:mod:`profiler.recording.scheduling`, and each reset of the timers samples afresh.
"""

from __future__ import annotations

import os
import sys
import threading
import time
from typing import Any

from profiler.recording import proc_files, scheduling
from profiler.timing import timers

__all__ = ["OUTSIDE_PROCESSES_LISTED", "OUTSIDE_SCAN_SPACING_SECONDS", "follow_run", "follow_stack",
           "machine_load_section"]

OUTSIDE_PROCESSES_LISTED = 10
"""How many of the busiest processes outside the run the dump names."""

OUTSIDE_SCAN_SPACING_SECONDS = 10.0
"""Reading every process's CPU time costs a few tens of milliseconds: a dump repeated sooner than
this (a dashboard logging the timers every few steps) names the processes of the previous scan.
The cores' busy time is read afresh on every dump."""

_IDLE_FIELDS = ("idle", "iowait")


def _read_errors() -> tuple[type[Exception], ...]:
    """What a failed reading of the machine raises: psutil's errors only where it was imported
    (an ``except`` clause evaluates this only when something was raised)."""
    psutil = sys.modules.get("psutil")
    return (OSError, ValueError) if psutil is None else (OSError, ValueError, psutil.Error)


def _run_cores() -> list[int]:
    try:
        return sorted(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return list(range(os.cpu_count() or 1))


def _busy_seconds(cores: list[int]) -> float:
    """Busy CPU seconds counted so far on ``cores`` (every field but idle and I/O wait)."""
    try:
        per_core = proc_files.busy_seconds_per_core()
    except (OSError, ValueError):
        per_core = _busy_seconds_through_psutil()
    busy = 0.0
    for index in cores:
        if index < len(per_core):
            busy += per_core[index]
    return busy


def _busy_seconds_through_psutil() -> list[float]:
    import psutil  # where there is no /proc

    # guest time is counted in user time already
    return [sum(value for name, value in times._asdict().items()
                if name not in _IDLE_FIELDS and not name.startswith("guest"))
            for times in psutil.cpu_times(percpu=True)]


def _process_cpu() -> dict[int, tuple[int, float, float, float]]:
    """``{pid: (parent pid, create time, CPU seconds, CPU seconds of the children it reaped)}`` of
    every process that can be read."""
    if not os.path.isfile("/proc/self/stat"):
        return _process_cpu_through_psutil()
    ticks = os.sysconf("SC_CLK_TCK")
    try:
        boot = proc_files.boot_time()
    except ValueError:
        return _process_cpu_through_psutil()
    processes = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            # The parent's pid, user and system time, its reaped children's (in clock ticks), its
            # start time (since the boot).
            fields = proc_files.stat_fields(name)
            processes[int(name)] = (int(fields[1]), float(fields[19]) / ticks + boot,
                                    (float(fields[11]) + float(fields[12])) / ticks,
                                    (float(fields[13]) + float(fields[14])) / ticks)
        except (OSError, ValueError, IndexError):  # ended meanwhile, or not readable
            continue
    return processes


def _process_cpu_through_psutil() -> dict[int, tuple[int, float, float, float]]:
    import psutil  # where there is no /proc

    processes = {}
    for process in psutil.process_iter(["ppid", "create_time", "cpu_times"]):
        info = process.info
        times = info.get("cpu_times")
        if times is None or info.get("create_time") is None:
            continue
        processes[process.pid] = (info.get("ppid") or 0, info["create_time"], times.user + times.system,
                                  times.children_user + times.children_system)
    return processes


def _process_name(pid: int) -> str:
    try:
        return proc_files.process_name(pid) or "?"
    except (OSError, ValueError):  # ended meanwhile, or not readable (a UnicodeError is a ValueError)
        pass
    if os.path.isdir("/proc"):
        return "?"
    import psutil  # where there is no /proc

    try:
        return psutil.Process(pid).name() or "?"
    except psutil.Error:
        return "?"


class _LoadBaseline:
    """The machine at the start of a timer stack's run; sampled again at each reset."""

    __slots__ = ("cores", "busy", "processes", "wall", "started", "scanned_at", "outside", "run_cpu", "__weakref__")

    def __init__(self) -> None:
        self.discard(None)

    def fold(self) -> None:
        return None

    def discard(self, stack: Any) -> None:
        self.cores = _run_cores()
        self.started = time.time()
        self.wall = time.monotonic()
        self.scanned_at: float | None = None
        self.outside: list[dict[str, Any]] = []
        self.run_cpu = 0.0
        try:
            self.busy: float | None = _busy_seconds(self.cores)
            self.processes = _process_cpu()
        except _read_errors():
            self.busy, self.processes = None, {}


# The baselines of the stacks followed, by the stack's id, kept alive here (a stack holds its
# recorders weakly, and has no weak references of its own).
_baselines: dict[int, _LoadBaseline] = {}


def _baseline_of(stack: Any) -> _LoadBaseline | None:
    baseline = _baselines.get(id(stack))
    # An id outlives its object: the baseline is this stack's only while the stack holds it.
    return baseline if baseline is not None and baseline in stack.deferred else None


def follow_stack(stack: Any) -> None:
    """Sample the machine now and at each reset of ``stack``; later calls do nothing."""
    if _baseline_of(stack) is not None:
        return
    baseline = _baselines[id(stack)] = _LoadBaseline()
    stack.deferred.add(baseline)


def follow_run() -> None:
    """The run starts now, on this thread's timer stack: count the machine's load and this
    process's waits for a core from here (``rlprof run`` calls this before the program starts)."""
    stack = timers.get_timer_stack_for_thread(threading.current_thread())
    scheduling.follow_stack(stack)
    follow_stack(stack)


def _run_pids(processes: dict[int, tuple[int, float, float, float]]) -> set[int]:
    """This process and its descendants among ``processes``: the run's own processes still alive."""
    children: dict[int, list[int]] = {}
    for pid, (parent, *_) in processes.items():
        children.setdefault(parent, []).append(pid)
    run, unvisited = set(), [os.getpid()]
    while unvisited:
        pid = unvisited.pop()
        if pid not in run:
            run.add(pid)
            unvisited.extend(children.get(pid, ()))
    return run


def machine_load_section(stack: Any) -> dict[str, Any] | None:
    """The dump's ``machine_load`` entry (see docs/formats.md), or None when the stack was not
    followed or the machine's figures cannot be read."""
    baseline = _baseline_of(stack)
    if baseline is None or baseline.busy is None:
        return None
    try:
        busy = _busy_seconds(baseline.cores) - baseline.busy
        now = time.monotonic()
        scans = baseline.scanned_at is None or now - baseline.scanned_at >= OUTSIDE_SCAN_SPACING_SECONDS
        if scans:
            baseline.outside, baseline.run_cpu = _scan_processes(baseline)
            baseline.scanned_at = now
    except _read_errors():
        return None
    try:
        load_average: float | None = os.getloadavg()[0]
    except (AttributeError, OSError):
        load_average = None
    section = {
        "cores": baseline.cores,
        "wall_seconds": now - baseline.wall,
        "busy_core_seconds": max(0.0, busy),
        "load_average_1min": load_average,
        "outside_processes": [dict(entry) for entry in baseline.outside],
    }
    if scans:  # a previous scan's figure would cover less of the run than busy_core_seconds does
        section["run_processes_cpu_seconds"] = baseline.run_cpu
    return section


def _scan_processes(baseline: _LoadBaseline) -> tuple[list[dict[str, Any]], float]:
    """The busiest processes outside the run since ``baseline``, by the CPU time they used; and the
    CPU time the run's own processes used since then, their reaped children's included."""
    processes = _process_cpu()
    run = _run_pids(processes)
    outside = []
    run_cpu = 0.0
    for pid, (_, created, cpu, children_cpu) in processes.items():
        before = baseline.processes.get(pid)
        if before is not None and before[1] == created:
            used, children_used = cpu - before[2], children_cpu - before[3]
        elif created >= baseline.started:
            used, children_used = cpu, children_cpu  # started during the run
        else:
            continue  # not readable at the start: its share over the run is unknown
        if pid in run:
            run_cpu += max(0.0, used) + max(0.0, children_used)
        elif used > 0:
            outside.append((pid, used))
    outside.sort(key=lambda entry: (-entry[1], entry[0]))
    return ([{"pid": pid, "name": _process_name(pid), "cpu_seconds": used}
             for pid, used in outside[:OUTSIDE_PROCESSES_LISTED]], run_cpu)

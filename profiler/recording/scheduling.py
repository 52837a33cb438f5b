"""How long a process waited for a core: the kernel's own count, not an inference.

On Linux the scheduler counts, for every thread, the time it spent on a CPU and the time it spent
**runnable but waiting for a CPU** (the run-queue delay), in ``/proc/self/task/<tid>/schedstat``
(nanoseconds: on-CPU time, run-queue delay, time slices). ``getrusage`` counts the process's
involuntary context switches: how often a thread that still had work was taken off its core.

A wall time well above the CPU time says only that a process was off the CPU; the run-queue delay
says how much of that was waiting for a core, as opposed to sleeping or blocking on I/O. The
verdicts (:mod:`profiler.analysis.machine_verdicts`) quote it.

Reading every thread is cheap (one directory listing and a small file per thread, tens of
microseconds) but not free, so a process reads it once per payload or dump, never per step:

* a worker takes :class:`SchedulingSampler` deltas beside each payload it ships;
* the trainer's dump carries :func:`scheduling_section`: its process's figures since its timer
  stack started (or was last reset), and each Python thread's, so that threads waiting for the
  GIL can be told from threads waiting for a core. A thread that timed blocks and ended before
  the dump is in it too: it read its own figures as it ended (:class:`_ThreadEndProbe`);
* inside the trainer's vector steps, one thread's own file, kept open, is read around each of its
  first steps and a sample of the rest (:mod:`profiler.recording.block_waits`): the section's
  ``in_blocks``.

Where ``schedstat`` is missing (not Linux, or a kernel without it) every function returns None,
and the dump says nothing rather than something wrong.
"""

from __future__ import annotations

import os
import threading
import time
from collections import deque
from typing import Any

from profiler.recording import proc_files
from profiler.recording.block_waits import block_waits_section
from profiler.records import Record
from profiler.timing import timers

try:
    import resource  # Unix only: elsewhere there is no schedstat either
except ImportError:  # pragma: no cover - Windows
    resource = None  # type: ignore[assignment]

__all__ = [
    "SAMPLE_SPACING_SECONDS",
    "SchedulingReading",
    "SchedulingSampler",
    "follow_stack",
    "read_process",
    "scheduling_section",
    "schedstat_available",
    "seconds_lived",
]

_NANOSECONDS = 1e-9
_TASKS = "/proc/self/task"


# Records, not dataclasses: Python 3.11 compiles a dataclass's generated methods with exec as the
# class is made, and every rlprof run imports this module before the program starts
# (profiler.records says more).
class SchedulingReading(Record):
    """Cumulative figures of this process at one moment (or the difference of two)."""

    run_queue_seconds: float
    cpu_seconds: float
    wall_seconds: float
    involuntary_switches: int

    def since(self, earlier: SchedulingReading) -> SchedulingReading:
        return SchedulingReading(
            max(0.0, self.run_queue_seconds - earlier.run_queue_seconds),
            max(0.0, self.cpu_seconds - earlier.cpu_seconds),
            max(0.0, self.wall_seconds - earlier.wall_seconds),
            max(0, self.involuntary_switches - earlier.involuntary_switches),
        )

    def as_tuple(self) -> tuple[float, float, float, int]:
        return (self.run_queue_seconds, self.cpu_seconds, self.wall_seconds,
                self.involuntary_switches)


def _thread_schedstat(tid: int | str) -> tuple[float, float] | None:
    """``(on-CPU seconds, run-queue seconds)`` of one thread of this process, None if gone."""
    try:
        with open(f"{_TASKS}/{tid}/schedstat", "rb") as file:
            fields = file.read().split()
        return int(fields[0]) * _NANOSECONDS, int(fields[1]) * _NANOSECONDS
    except (OSError, ValueError, IndexError):
        return None


def schedstat_available() -> bool:
    """Whether this kernel counts run-queue delay per thread (Linux with schedstat)."""
    return _thread_schedstat(threading.get_native_id()) is not None


def read_process(ignored_threads: frozenset[int] = frozenset()) -> SchedulingReading | None:
    """This process's figures now: run-queue delay summed over its live threads (but
    ``ignored_threads``, native ids), CPU time and involuntary switches of the whole process
    (ended threads included), the monotonic clock."""
    if resource is None:
        return None
    try:
        tids = os.listdir(_TASKS)
    except OSError:
        return None
    run_queue = 0.0
    read_any = False
    for tid in tids:
        if ignored_threads and int(tid) in ignored_threads:
            continue
        figures = _thread_schedstat(tid)
        if figures is not None:
            run_queue += figures[1]
            read_any = True
    if not read_any:
        return None
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return SchedulingReading(run_queue, usage.ru_utime + usage.ru_stime, time.monotonic(),
                             usage.ru_nivcsw)


SAMPLE_SPACING_SECONDS = 0.1
"""A worker reads the kernel's figures at most this often (a reading costs 20 to 90 us): with a
payload on every step (``flush_every=1``), the steps between two readings report nothing, and the
next reading covers them."""

_NOTHING = (0.0, 0.0, 0.0, 0)


class SchedulingSampler:
    """A worker's side: what the kernel counted since the previous reading.

    :meth:`ignore_thread` leaves a thread of rlprof's own out of the run-queue delay from then on
    (a worker's stack sampler, started after the first reading): its waits are not the program's,
    and two threads waiting at once would count the same wall time twice.
    """

    __slots__ = ("_previous", "_ignored")

    def __init__(self) -> None:
        self._ignored: frozenset[int] = frozenset()
        self._previous = read_process()

    def ignore_thread(self, native_id: int) -> None:
        """Count no more of this thread's waits (it started after the previous reading)."""
        self._ignored = self._ignored | {native_id}

    def take(self, final: bool = False) -> tuple[float, float, float, int] | None:
        """``(run-queue seconds, CPU seconds, wall seconds, involuntary switches)`` since the
        previous reading (or the sampler's creation); zeros when that was less than
        :data:`SAMPLE_SPACING_SECONDS` ago, unless ``final``; None where schedstat is missing."""
        previous = self._previous
        if previous is None:
            return None
        if not final and time.monotonic() - previous.wall_seconds < SAMPLE_SPACING_SECONDS:
            return _NOTHING
        now = read_process(self._ignored)
        if now is None:
            return None
        self._previous = now
        return now.since(previous).as_tuple()


class _Baseline:
    """Where a timer stack's run began, as the kernel counted it: taken again at each reset.

    One of the stack's deferred recorders (see :class:`profiler.timing.timer_stack.TimerStack`),
    so a reset of the timers resets these figures with the tree.
    """

    __slots__ = ("process", "threads", "__weakref__")

    def __init__(self) -> None:
        self.discard(None)

    def fold(self) -> None:
        return None

    def discard(self, stack: Any) -> None:
        self.process = read_process()
        self.threads = _python_threads()


# The baselines of the stacks followed, by the stack's id, kept alive here (a stack holds its
# recorders weakly, and has no weak references of its own).
_baselines: dict[int, _Baseline] = {}


def _baseline_of(stack: Any) -> _Baseline | None:
    baseline = _baselines.get(id(stack))
    # An id outlives its object: the baseline is this stack's only while the stack holds it.
    return baseline if baseline is not None and baseline in stack.deferred else None


def follow_stack(stack: Any) -> None:
    """Count ``stack``'s run from now on (and from each reset): call when the run starts, before
    the work it measures. Later calls for the same stack do nothing."""
    if _baseline_of(stack) is not None:
        return
    baseline = _baselines[id(stack)] = _Baseline()
    stack.deferred.add(baseline)


ENDED_THREADS_KEPT = 256
"""How many ended threads' figures a process keeps for its next dump (the latest ones)."""


class _ThreadLife(Record):
    """A Python thread that timed blocks: when it began timing and when it ended (monotonic
    clock), with the process's CPU and run-queue seconds and the main thread's CPU seconds at
    both moments, and its own figures at its end. The GIL verdict reads the process over the time
    threads ran together (:mod:`profiler.analysis.machine_verdicts`): over the whole run, a long
    start-up on the main thread alone made a short spell of two threads look like one core's
    work, and a main thread waiting in ``join()`` meanwhile looked like one waiting for the GIL."""

    native_id: int
    name: str
    started_at: float
    process_at_start: tuple[float, float, float] | None
    cpu_seconds: float = 0.0
    run_queue_seconds: float = 0.0
    ended_at: float | None = None
    process_at_end: tuple[float, float, float] | None = None


def _process_now() -> tuple[float, float, float] | None:
    """The process's CPU and run-queue seconds, and its main thread's CPU seconds, now."""
    reading = read_process()
    main_thread = _thread_schedstat(threading.main_thread().native_id or 0)
    if reading is None or main_thread is None:
        return None
    return reading.cpu_seconds, reading.run_queue_seconds, main_thread[0]


# Python threads that timed blocks and have ended, read by each thread itself as it ended (see
# _ThreadEndProbe); and the beginnings of those still running, by native id.
_ended_threads: deque[_ThreadLife] = deque(maxlen=ENDED_THREADS_KEPT)
_running_threads: dict[int, _ThreadLife] = {}


def _forget_threads_in_a_forked_child() -> None:
    _ended_threads.clear()
    _running_threads.clear()


os.register_at_fork(after_in_child=_forget_threads_in_a_forked_child)
_probes = threading.local()


class _ThreadEndProbe:
    """Held by a thread's local data from its first block: dropped as the thread ends, in that
    thread, when its schedstat can still be read. A worker thread that ended before the dump
    (joined, as a trainer's env threads are at the end) is then still in the dump's
    ``python_threads``."""

    __slots__ = ("life",)

    def __init__(self) -> None:
        self.life = _ThreadLife(threading.get_native_id(), threading.current_thread().name, time.monotonic(),
                                _process_now())
        _running_threads[self.life.native_id] = self.life

    def __del__(self) -> None:
        try:
            life = self.life
            if _running_threads.get(life.native_id) is life:
                del _running_threads[life.native_id]
            figures = _thread_schedstat(life.native_id)
            if figures is not None and threading.get_native_id() == life.native_id:
                life.cpu_seconds, life.run_queue_seconds = figures
                life.ended_at, life.process_at_end = time.monotonic(), _process_now()
                _ended_threads.append(life)
        except Exception:  # noqa: BLE001 - interpreter shutdown: nothing left to record into
            pass


def _watch_thread_end() -> None:
    if threading.current_thread() is not threading.main_thread():
        _probes.probe = _ThreadEndProbe()


timers.call_in_each_timing_thread(_watch_thread_end)


def _process_start(now: SchedulingReading) -> SchedulingReading:
    """The figures at the process's start: nothing counted, the monotonic clock then."""
    return SchedulingReading(0.0, 0.0, now.wall_seconds - seconds_lived(), 0)


def seconds_lived() -> float:
    """How long this process has lived, to the kernel's tick (10 ms).

    Read as the kernel counts it: the system's uptime less the tick the process started at
    (``/proc/self/stat``, field 22), both on the boot clock. ``psutil``'s ``create_time()`` adds
    that tick to the boot time, which Linux gives in whole seconds only: a process 40 ms old was
    said to have lived 0.9 s, and a short run's figures from its start were diluted by that much.
    """
    try:
        after_name = proc_files.stat_fields("self")
        with open("/proc/uptime", "rb") as file:
            uptime = float(file.read().split()[0])
        return max(0.0, uptime - int(after_name[19]) / os.sysconf("SC_CLK_TCK"))
    except (OSError, ValueError, IndexError):
        import psutil  # where there is no /proc: only there, so that an env worker need not import it

        try:
            return max(0.0, time.time() - psutil.Process().create_time())
        except psutil.Error:
            return 0.0


def _python_threads() -> dict[int, tuple[str, float, float]]:
    """``{native id: (name, on-CPU seconds, run-queue seconds)}`` of this process's live Python
    threads (native threads of C libraries are not Python's and hold no GIL)."""
    threads = {}
    for thread in threading.enumerate():
        native_id = thread.native_id
        if native_id is None:
            continue
        figures = _thread_schedstat(native_id)
        if figures is not None:
            threads[native_id] = (thread.name, *figures)
    return threads


def _life_entry(life: _ThreadLife, started: float, start_figures: tuple[float, float, float]) -> dict[str, Any]:
    """When a thread began timing and ended, in seconds since the section's start, each with the
    process's CPU and run-queue seconds and the main thread's CPU seconds since then (a thread
    that began before the section began with it); nothing where they could not be read."""
    entry: dict[str, Any] = {}
    moments = [("started", "start", life.started_at, life.process_at_start)]
    if life.ended_at is not None:
        moments.append(("ended", "end", life.ended_at, life.process_at_end))
    for when, moment, at, figures in moments:
        if figures is None:
            return {}
        if at <= started:
            at, figures = started, start_figures
        entry[f"{when}_seconds"] = at - started
        entry[f"process_at_{moment}"] = {"cpu_seconds": max(0.0, figures[0] - start_figures[0]),
                                          "run_queue_seconds": max(0.0, figures[1] - start_figures[1]),
                                          "main_thread_cpu_seconds": max(0.0, figures[2] - start_figures[2])}
    return entry


def scheduling_section(stack: Any) -> dict[str, Any] | None:
    """The dump's ``scheduling`` entry for this process (see docs/formats.md), or None where
    schedstat is missing or the stack was never followed (:func:`follow_stack`)."""
    baseline = _baseline_of(stack)
    now = read_process()
    if now is None:
        return None
    if baseline is not None and baseline.process is not None:
        process, since, before = now.since(baseline.process), "timers start", baseline.threads
    else:  # a stack never followed: everything the kernel counted since the process started
        process, since, before = now.since(_process_start(now)), "process start", {}
    started = now.wall_seconds - process.wall_seconds
    main_thread = threading.main_thread().native_id
    start_figures = (now.cpu_seconds - process.cpu_seconds, now.run_queue_seconds - process.run_queue_seconds,
                     before.get(main_thread, ("", 0.0, 0.0))[1])
    threads = []

    def add(native_id: int, name: str, cpu: float, run_queue: float, life: _ThreadLife | None) -> None:
        _, cpu_before, run_queue_before = before.get(native_id, (name, 0.0, 0.0))
        entry = {"name": name, "cpu_seconds": max(0.0, cpu - cpu_before),
                 "run_queue_seconds": max(0.0, run_queue - run_queue_before)}
        if life is not None and life.ended_at is not None:
            entry["ended"] = True
        if life is not None:
            entry.update(_life_entry(life, started, start_figures))
        if entry["cpu_seconds"] > 0 or native_id in live:
            threads.append(entry)

    live = _python_threads()
    ended = {life.native_id: life for life in _ended_threads
             if life.native_id not in live and life.ended_at is not None and life.ended_at > started}
    for native_id, (name, cpu, run_queue) in live.items():
        add(native_id, name, cpu, run_queue, _running_threads.get(native_id))
    for life in ended.values():
        add(life.native_id, life.name, life.cpu_seconds, life.run_queue_seconds, life)
    section = {
        "run_queue_seconds": process.run_queue_seconds,
        "cpu_seconds": process.cpu_seconds,
        "wall_seconds": process.wall_seconds,
        "involuntary_switches": process.involuntary_switches,
        "since": since,
        "python_threads": threads,
    }
    in_blocks = block_waits_section(stack)
    if in_blocks:
        section["in_blocks"] = in_blocks
    return section

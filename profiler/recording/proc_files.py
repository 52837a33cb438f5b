"""What Linux's ``/proc`` says of the machine and its processes, read without psutil.

Every ``rlprof run`` reads a few figures of the machine: the cores' busy time and the boot time at
its start and at its dump (:mod:`.machine_load`), a process's start time in the name of each file
it writes (:mod:`profiler.tree.atomic_file`), the memory available before it reads a timers file
back (:mod:`profiler.tree.memory_check`), the names of the busiest processes outside the run;
and, once a second during a run whose envs run in worker processes, the CPU time and resident
memory of the trainer and of each worker (``envmanager.measurement.resources``). psutil reads
them from the same files; importing it cost 32 M instructions (about 8 ms) of every run, more
than any other module rlprof imports before the program's first line. These functions read the
files themselves, the way psutil 7 does, so the figures are the same; each raises
:class:`OSError` (or ``ValueError`` on a file it cannot parse) where ``/proc`` cannot tell, and
its caller then asks psutil, imported only there. :func:`process_start_time` also raises
``IndexError`` on a ``stat`` line too short, and ``ProcessLookupError`` for a process that is gone.
"""

from __future__ import annotations

import os
import sys

__all__ = ["available_memory", "boot_time", "busy_seconds_per_core", "process_start_cpu_and_rss", "process_name",
           "process_start_time", "stat_fields"]

_IDLE_FIELDS = (3, 4)
"""The fields of a ``cpu`` line of ``/proc/stat`` that are not busy time: idle and I/O wait (after
them, guest and guest_nice are counted in user time already, and are left out too)."""
_COUNTED_FIELDS = 8
"""user, nice, system, idle, iowait, irq, softirq, steal."""
_NAME_SHOWN = 15
"""The kernel keeps the first 15 characters of a process's name; psutil then looks at its command."""


_PAGE_SIZE = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096


def _clock_ticks() -> int:
    return os.sysconf("SC_CLK_TCK")


def _stat_lines() -> list[bytes]:
    with open("/proc/stat", "rb") as stat:
        return stat.read().splitlines()


def boot_time() -> float:
    """When the machine booted, in seconds since the epoch (``btime``)."""
    for line in _stat_lines():
        if line.startswith(b"btime"):
            return float(line.strip().split()[1])
    raise ValueError("no btime line in /proc/stat")


def busy_seconds_per_core() -> list[float]:
    """Busy CPU seconds counted so far on each core listed (every field but idle and I/O wait),
    in the file's order, as ``psutil.cpu_times(percpu=True)`` lists them."""
    ticks = _clock_ticks()
    per_core = []
    for line in _stat_lines():
        if line.startswith(b"cpu") and not line.startswith(b"cpu "):
            fields = line.split()[1:_COUNTED_FIELDS + 1]
            per_core.append(sum(float(value) / ticks for index, value in enumerate(fields)
                                if index not in _IDLE_FIELDS))
    if not per_core:
        raise ValueError("no cpu lines in /proc/stat")
    return per_core


def _read_proc_file(pid: int | str, name: str) -> bytes:
    """The text of ``/proc/<pid>/<name>``, ``stat`` or ``statm`` (a few hundred bytes).

    Raises :class:`ProcessLookupError` when there is no such process; where there is no ``/proc``
    at all, the :class:`FileNotFoundError` of the missing file, so that the caller asks psutil.
    """
    # One read through a bare descriptor: a machine scan reads the stat file of every process.
    try:
        descriptor = os.open(f"/proc/{pid}/{name}", os.O_RDONLY)
    except FileNotFoundError:
        if not os.path.isdir("/proc"):
            raise
        raise ProcessLookupError(pid) from None
    try:
        return os.read(descriptor, 4096)
    finally:
        os.close(descriptor)


def stat_fields(pid: int | str) -> list[bytes]:
    """The fields of ``/proc/<pid>/stat`` (``pid`` may be ``"self"``) after the process's name,
    the state (the file's field 3) first: the name is in parentheses and may hold any character,
    spaces and parentheses included, so the fields start after its last ``)``. Raises
    ``ValueError`` on a line without one, :class:`ProcessLookupError` when there is no such
    process."""
    stat = _read_proc_file(pid, "stat")
    return stat[stat.rindex(b")") + 2:].split()


def process_start_time(pid: int) -> float:
    """When process ``pid`` started, in seconds since the epoch (``psutil.Process.create_time``).

    Raises :class:`ProcessLookupError` when there is no such process; where there is no
    ``/proc`` at all, the :class:`OSError` of the missing file, so that the caller asks psutil.
    """
    fields = stat_fields(pid)
    # The start time is the file's field 22, in clock ticks since the boot.
    return float(fields[19]) / _clock_ticks() + boot_time()


def process_start_cpu_and_rss(pid: int) -> tuple[int, float, int]:
    """Process ``pid``'s start time in clock ticks since the boot (with its pid, which process
    this is: a pid is reused), its CPU seconds so far, user and system
    (``psutil.Process.cpu_times()``'s ``user + system``, its children's left out), and its
    resident memory in bytes (``memory_info().rss``).

    Raises :class:`ProcessLookupError` when there is no such process; where there is no
    ``/proc`` at all, the :class:`OSError` of the missing file, so that the caller asks psutil.
    """
    fields = stat_fields(pid)
    # The resident pages are statm's second field, as psutil reads them: the rss field of
    # stat can lag them (the kernel's per-CPU counters, summed approximately there).
    resident_pages = int(_read_proc_file(pid, "statm").split()[1])
    # utime and stime are stat's fields 14 and 15, the start time its field 22, in clock ticks.
    ticks = _clock_ticks()
    return (int(fields[19]), float(fields[11]) / ticks + float(fields[12]) / ticks,
            resident_pages * _PAGE_SIZE)


def process_name(pid: int) -> str:
    """Process ``pid``'s name as ``psutil.Process.name`` gives it: the kernel's, or where the
    kernel cut it, the start of the program's path that it is the beginning of."""
    stat = _read_proc_file(pid, "stat")
    name = stat[stat.find(b"(") + 1: stat.rfind(b")")].decode(sys.getfilesystemencoding(),
                                                               sys.getfilesystemencodeerrors())
    if len(name) < _NAME_SHOWN:
        return name
    try:
        with open(f"/proc/{pid}/cmdline", encoding=sys.getfilesystemencoding(),
                  errors=sys.getfilesystemencodeerrors()) as command_file:
            command = command_file.read()
    except PermissionError:
        return name
    if not command:
        return name
    separator = "\x00" if command.endswith("\x00") else " "
    if command.endswith(separator):
        command = command[:-1]
    arguments = command.split(separator)
    if separator == "\x00" and len(arguments) == 1 and " " in command:
        arguments = command.split(" ")
    extended = os.path.basename(arguments[0])
    return extended if extended.startswith(name) else name


def available_memory() -> int:
    """Bytes of memory the machine has available (``psutil.virtual_memory().available``, where
    the kernel tells ``MemAvailable``)."""
    fields = {}
    with open("/proc/meminfo", "rb") as meminfo:
        for line in meminfo:
            parts = line.split()
            if len(parts) >= 2:
                fields[parts[0]] = int(parts[1]) * 1024
    available = fields.get(b"MemAvailable:", 0)
    if not available:  # an old kernel, or its bug (psutil estimates it then): psutil's answer
        raise ValueError("no MemAvailable in /proc/meminfo")
    total, free = fields.get(b"MemTotal:"), fields.get(b"MemFree:")
    if total is None or free is None:
        raise ValueError("no MemTotal or MemFree in /proc/meminfo")
    return free if available > total else available

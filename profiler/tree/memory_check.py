"""Say so before reading a file that will not fit in memory, instead of being killed half-way.

A timer file is parsed whole (JSON has no cheap way to skip a section), and the parsed document
takes several times the file's size. On a laptop, or in a container with a memory limit, a large
recorded timeline can need more than there is: the out-of-memory killer then ends the process
with no message at all, or the machine swaps for minutes. :func:`memory_shortage` compares an
estimate of what reading needs with what this process can still get — the smallest of the
system's available memory, its cgroup's remaining allowance (containers) and its address-space
limit (``ulimit -v``) — and describes the shortage in one line.

The estimate (:func:`read_memory_estimate`) is the file's text plus
:data:`READ_MEMORY_PER_DENSE_BYTE` bytes per byte of the file that is not indentation: the parsed
objects grow with the values in the file, not with its whitespace, and rlprof's indented files are
two-thirds whitespace while other writers' files may have none. The factor is measured by
``benchmarks/large_file_memory.py`` on both kinds. Set ``RLPROF_SKIP_MEMORY_CHECK=1`` to read
anyway.
"""

from __future__ import annotations

import os
import resource
from pathlib import Path

from profiler.recording import proc_files

__all__ = ["READ_MEMORY_PER_DENSE_BYTE", "available_memory", "memory_shortage", "read_memory_estimate"]

READ_MEMORY_PER_DENSE_BYTE = 7
"""Bytes of memory that reading (and then analysing or converting) takes per byte of the file that
is not whitespace, on top of the file's text: rounded up from the peaks benchmarks/
large_file_memory.py measures (about 6 on timeline-heavy files, indented or compact)."""

_SAMPLE_BYTES = 1 << 20

_CHECKED_FROM_BYTES = 16 * 1024 * 1024
"""Files smaller than this are read without asking: they fit anywhere rlprof runs."""

_CGROUP_V2 = Path("/sys/fs/cgroup")
_CGROUP_V1 = Path("/sys/fs/cgroup/memory")


def memory_shortage(path: str | os.PathLike[str]) -> str | None:
    """A one-line description of why reading the file at ``path`` would run out of memory, or None.

    None also when the file is small, or the check is switched off.
    """
    file_size = os.stat(path).st_size
    if file_size < _CHECKED_FROM_BYTES or os.environ.get("RLPROF_SKIP_MEMORY_CHECK", "") not in ("", "0"):
        return None
    available = available_memory()
    needed = read_memory_estimate(path)
    if needed <= available:
        return None
    return (
        f"reading this {_size(file_size)} file needs about {_size(needed)} of memory and only "
        f"{_size(available)} is available to this process; free some memory, or set "
        "RLPROF_SKIP_MEMORY_CHECK=1 to try anyway"
    )


def read_memory_estimate(path: str | os.PathLike[str]) -> int:
    """Bytes that reading the file at ``path`` takes at its peak, from its size and the share of
    it (in its first megabyte) that is not whitespace."""
    file_size = os.stat(path).st_size
    with open(path, "rb") as source:
        sample = source.read(_SAMPLE_BYTES)
    dense_share = len(sample.translate(None, b" \t\r\n")) / len(sample) if sample else 1.0
    return int(file_size + file_size * dense_share * READ_MEMORY_PER_DENSE_BYTE)


def available_memory() -> int:
    """Bytes this process can still allocate: the smallest of every limit that applies."""
    try:
        limits = [proc_files.available_memory()]  # psutil's figure, without importing psutil
    except (OSError, ValueError):
        import psutil  # no /proc, or a kernel without MemAvailable: psutil estimates it

        limits = [psutil.virtual_memory().available]
    cgroup_room = _cgroup_room()
    if cgroup_room is not None:
        limits.append(cgroup_room)
    address_space, _ = resource.getrlimit(resource.RLIMIT_AS)
    if address_space != resource.RLIM_INFINITY:
        import psutil  # only under ``ulimit -v``

        limits.append(max(0, address_space - psutil.Process().memory_info().vms))
    return min(limits)


def _cgroup_room() -> int | None:
    """What the memory cgroup (v2, else v1) still allows, when it sets a limit."""
    for limit_file, usage_file in (
        (_CGROUP_V2 / "memory.max", _CGROUP_V2 / "memory.current"),
        (_CGROUP_V1 / "memory.limit_in_bytes", _CGROUP_V1 / "memory.usage_in_bytes"),
    ):
        try:
            limit_text = limit_file.read_text().strip()
            usage = int(usage_file.read_text().strip())
        except (OSError, ValueError):
            continue
        # "max" (v2) or a value near 2**63 (v1) means no limit.
        if limit_text == "max" or int(limit_text) >= 2**60:
            return None
        return max(0, int(limit_text) - usage)
    return None


def _size(byte_count: int) -> str:
    for unit, scale in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if byte_count >= scale:
            return f"{byte_count / scale:.1f} {unit}"
    return f"{byte_count} bytes"

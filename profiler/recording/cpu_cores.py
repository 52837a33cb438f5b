"""How many cores this process may run on: what a run's busy processes compete for.

``os.cpu_count()`` counts the machine's cores, which overstates what a process gets when it
is pinned to a few of them (``taskset``, a batch scheduler) or throttled by a container's CPU
quota (``docker --cpus=2``, a Kubernetes limit).  Both bounds are taken into account here:
the affinity mask (``os.sched_getaffinity``, where the platform has it) and the cgroup CPU
quota (v2 ``cpu.max`` or v1 ``cpu.cfs_quota_us``), rounded up to whole cores.
"""

from __future__ import annotations

import math
import os
from pathlib import Path

__all__ = ["cores_available"]

_CGROUP_ROOT = Path("/sys/fs/cgroup")
_PROC_SELF_CGROUP = Path("/proc/self/cgroup")


def cores_available(
    cgroup_root: Path = _CGROUP_ROOT, proc_self_cgroup: Path = _PROC_SELF_CGROUP
) -> int:
    """The cores this process may use: affinity mask, capped by a cgroup CPU quota, at least 1."""
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:  # macOS and Windows have no affinity call
        cores = os.cpu_count() or 1
    quota = _cgroup_quota_cores(cgroup_root, proc_self_cgroup)
    if quota is not None:
        cores = min(cores, max(1, math.ceil(quota)))
    return max(1, cores)


def _cgroup_quota_cores(cgroup_root: Path, proc_self_cgroup: Path) -> float | None:
    """The tightest CPU quota of this process's cgroup, in cores; None where there is none.

    The process's own cgroup directory is tried first, then the mount's root (inside a
    container, the container's cgroup is usually mounted as the root).
    """
    v2_path, v1_path = _own_cgroup_paths(proc_self_cgroup)
    quotas = []
    for directory in _candidates(cgroup_root, v2_path):
        text = _read(directory / "cpu.max")
        if text is not None:
            fields = text.split()
            if len(fields) == 2 and fields[0] != "max":
                quotas.append(_ratio(fields[0], fields[1]))
    for mount in (cgroup_root / "cpu", cgroup_root / "cpu,cpuacct"):
        for directory in _candidates(mount, v1_path):
            quota, period = _read(directory / "cpu.cfs_quota_us"), _read(directory / "cpu.cfs_period_us")
            if quota is not None and period is not None and quota.strip() != "-1":
                quotas.append(_ratio(quota, period))
    found = [quota for quota in quotas if quota is not None]
    return min(found) if found else None


def _own_cgroup_paths(proc_self_cgroup: Path) -> tuple[str, str]:
    """This process's cgroup path in the v2 hierarchy and in v1's ``cpu`` controller."""
    v2_path = v1_path = "/"
    text = _read(proc_self_cgroup) or ""
    for line in text.splitlines():
        hierarchy, _, rest = line.partition(":")
        controllers, _, path = rest.partition(":")
        if hierarchy == "0" and controllers == "":
            v2_path = path or "/"
        elif "cpu" in controllers.split(","):
            v1_path = path or "/"
    return v2_path, v1_path


def _candidates(mount: Path, own_path: str) -> list[Path]:
    own = mount / own_path.lstrip("/")
    return [own] if own == mount else [own, mount]


def _ratio(quota: str, period: str) -> float | None:
    try:
        quota_us, period_us = int(quota), int(period)
    except ValueError:
        return None
    return quota_us / period_us if quota_us > 0 and period_us > 0 else None


def _read(path: Path) -> str | None:
    try:
        return path.read_text()
    except (OSError, UnicodeDecodeError):
        return None

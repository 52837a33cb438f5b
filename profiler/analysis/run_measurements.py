"""The measurements a dump carries about its processes, beyond the timer tree itself.

The verdicts need three things the blocks alone cannot tell:

* **the critical path** — per worker, how many vector steps it took part in, in how many its
  reply was the last one ready, and how long those steps waited after the second-to-last reply
  (``workers[i].critical_path``): what that worker alone cost the trainer;
* **env CPU time** — per worker, the wall and CPU time of its ``env.step``/``env.reset`` work
  (``workers[i].env_time``): wall time well above CPU time is time off the CPU;
* **the machine** — the cores the run could use and the processes competing for them
  (``metadata.cores_available`` and ``metadata.busy_processes``, strings holding whole numbers).

Files written before rlprof recorded these, ML-Agents' files, and files whose fields are damaged
still analyse: a field that is missing is ``None``, and one that is present but malformed is
``None`` too, with a sentence in :attr:`RunMeasurements.problems` saying what was ignored and why,
so the reader is told rather than misled.

Each worker's busy time in its own tree (``workers[i].children``) is read here as well: it is how
a file without the critical path still shows which worker computed longest.
"""

from __future__ import annotations

import math
from dataclasses import field
from typing import Any

from profiler.analysis.metadata_numbers import whole_number
from profiler.analysis.worker_groups import compared_workers
from profiler.records import Record

__all__ = [
    "CriticalPath",
    "EnvTime",
    "RunMeasurements",
    "WorkerMeasurements",
    "read_measurements",
]


class CriticalPath(Record):
    """How often a worker's reply was the one a vector step waited for, and what that cost."""

    vector_steps: int
    last_to_reply: int
    wait_as_last_seconds: float
    histogram_bounds_seconds: tuple[float, ...] = ()
    histogram_counts: tuple[int, ...] = ()

    @property
    def last_share(self) -> float:
        """The fraction of its vector steps in which this worker replied last."""
        return self.last_to_reply / self.vector_steps if self.vector_steps else 0.0


class EnvTime(Record):
    """Wall and CPU time of a worker's env work (``env.step`` and ``env.reset`` calls)."""

    wall_seconds: float
    cpu_seconds: float
    calls: int

    @property
    def off_cpu_seconds(self) -> float:
        """Wall time not spent on a CPU: waiting for a core, or sleeping / blocking on I/O."""
        return max(0.0, self.wall_seconds - self.cpu_seconds)


class WorkerMeasurements(Record):
    """One worker: its name, its busy time in its own tree, and the optional measurements."""

    label: str
    worker_id: Any
    busy_seconds: float
    env_step_calls: int
    critical_path: CriticalPath | None
    env_time: EnvTime | None


class RunMeasurements(Record):
    """Everything :func:`read_measurements` found; ``None`` where the file does not tell."""

    workers: list[WorkerMeasurements]
    has_workers_section: bool
    cores_available: int | None
    busy_processes: int | None
    problems: list[str] = field(default_factory=list)
    torch_threads: int | None = None
    """The trainer's intra-op threads (``torch.get_num_threads()``) as the program ended, where
    ``rlprof run`` saw it import torch."""

    @property
    def critical_paths(self) -> list[tuple[WorkerMeasurements, CriticalPath]]:
        """The workers that carry a critical path, with it."""
        return [(worker, worker.critical_path) for worker in self.workers
                if worker.critical_path is not None]

    @property
    def every_worker_has_critical_path(self) -> bool:
        return bool(self.workers) and all(worker.critical_path for worker in self.workers)

    @property
    def every_worker_has_env_time(self) -> bool:
        return bool(self.workers) and all(worker.env_time for worker in self.workers)


def read_measurements(tree: dict[str, Any]) -> RunMeasurements:
    """Read the per-worker and machine measurements of a normalized tree (see module docstring)."""
    problems: list[str] = []
    workers = []
    for index, entry in enumerate(compared_workers(tree)):
        label = str(entry.get("name") or f"worker {entry.get('worker_id', index)}")
        workers.append(WorkerMeasurements(
            label=label,
            worker_id=entry.get("worker_id", index),
            busy_seconds=sum(child["total"] for child in entry.get("children", [])),
            env_step_calls=_calls_named(entry, "env.step"),
            critical_path=_critical_path(entry.get("critical_path"), label, problems),
            env_time=_env_time(entry.get("env_time"), label, problems),
        ))
    metadata = tree.get("metadata") or {}
    return RunMeasurements(
        workers=workers,
        has_workers_section="workers" in tree,
        cores_available=whole_number(metadata, "cores_available", problems, at_least=1),
        busy_processes=whole_number(metadata, "busy_processes", problems, at_least=1),
        problems=problems,
        torch_threads=whole_number(metadata, "torch_threads", problems, at_least=1),
    )


def _calls_named(node: dict[str, Any], name: str) -> int:
    """Calls of blocks named ``name`` in ``node``'s subtree, outermost ones only."""
    calls = 0
    for child in node.get("children", []):
        calls += child["count"] if child["name"] == name else _calls_named(child, name)
    return calls


def _critical_path(value: Any, label: str, problems: list[str]) -> CriticalPath | None:
    if value is None:
        return None
    where = f"{label}: critical_path"
    if not isinstance(value, dict):
        problems.append(f"{where} is not an object; ignored")
        return None
    steps = value.get("vector_steps")
    last = value.get("last_to_reply")
    waited = value.get("wait_as_last_seconds")
    if not (_is_whole(steps) and _is_whole(last) and _is_seconds(waited)) or last > steps:
        problems.append(f"{where} needs whole vector_steps >= last_to_reply >= 0 and "
                        f"wait_as_last_seconds >= 0; ignored")
        return None
    bounds, counts = _histogram(value.get("wait_as_last_histogram"), where, problems)
    return CriticalPath(steps, last, float(waited), bounds, counts)


def _histogram(value: Any, where: str, problems: list[str]) -> tuple[tuple[float, ...], tuple[int, ...]]:
    """The bounded histogram of waits as last, or two empty tuples when absent or malformed."""
    if value is None:
        return (), ()
    bounds = value.get("bounds_seconds") if isinstance(value, dict) else None
    counts = value.get("counts") if isinstance(value, dict) else None
    if (isinstance(bounds, list) and isinstance(counts, list)
            and all(_is_seconds(bound) for bound in bounds)
            and all(_is_whole(count) for count in counts)):
        return tuple(float(bound) for bound in bounds), tuple(counts)
    problems.append(f"{where}.wait_as_last_histogram is malformed; ignored")
    return (), ()


def _env_time(value: Any, label: str, problems: list[str]) -> EnvTime | None:
    if value is None:
        return None
    wall = value.get("wall_seconds") if isinstance(value, dict) else None
    cpu = value.get("cpu_seconds") if isinstance(value, dict) else None
    calls = value.get("calls") if isinstance(value, dict) else None
    if not (_is_seconds(wall) and _is_seconds(cpu) and _is_whole(calls)):
        problems.append(f"{label}: env_time needs wall_seconds and cpu_seconds >= 0 and whole "
                        f"calls; ignored")
        return None
    return EnvTime(float(wall), float(cpu), calls)


def _is_whole(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def _is_seconds(value: Any) -> bool:
    return (isinstance(value, (int, float)) and not isinstance(value, bool)
            and math.isfinite(value) and value >= 0)

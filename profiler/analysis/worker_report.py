"""Each worker's figures side by side: step times, how often the step waited on it, its CPU share.

This is the per-worker table of ``rlprof analyze``, read from the ``workers`` section (one tree per
worker). It shows figures and passes no judgement: whether a worker holds up the run is decided,
with its cost, by :mod:`profiler.analysis.verdicts`.

The slowest step is the nodes' per-call ``max`` when the timers record it; otherwise the merger's
``peak_mean`` (the slowest flush interval's mean per step: the slowest single step when workers
flush every step); otherwise it is left out, never guessed. The critical-path and CPU columns
appear for files that record them (see :mod:`profiler.analysis.run_measurements`).
"""

from __future__ import annotations

from typing import Any

from profiler.analysis.block_stats import walk_nodes
from profiler.analysis.run_measurements import RunMeasurements, read_measurements
from profiler.analysis.worker_groups import compared_workers
from profiler.records import Record

__all__ = ["MAX_PER_CALL", "PEAK_INTERVAL_MEAN", "WorkerReport", "WorkerRow", "worker_report"]

MAX_PER_CALL = "max per call"
PEAK_INTERVAL_MEAN = "peak interval mean"


class WorkerRow(Record):
    """One worker's calls of the block, and its critical-path and CPU figures when recorded.

    ``max_kind`` says what ``max_time`` is: :data:`MAX_PER_CALL` or :data:`PEAK_INTERVAL_MEAN`.
    ``last_share`` is the fraction of vector steps in which its reply came last, and
    ``wait_as_last`` the time those steps waited after the second-to-last reply.
    ``cpu_share`` is its env work's CPU time over wall time.
    """

    label: str
    worker_id: Any
    steps: int
    total: float
    max_time: float | None = None
    max_kind: str | None = None
    last_share: float | None = None
    wait_as_last: float | None = None
    cpu_share: float | None = None

    @property
    def mean(self) -> float:
        return self.total / self.steps if self.steps else 0.0


class WorkerReport(Record):
    """The workers' figures for one block, with the mean over workers of their mean call time."""

    block: str
    workers: list[WorkerRow]
    mean: float

    @property
    def has_critical_path(self) -> bool:
        return any(row.last_share is not None for row in self.workers)

    @property
    def has_cpu_time(self) -> bool:
        return any(row.cpu_share is not None for row in self.workers)


def worker_report(
    tree: dict[str, Any], block: str = "env.step", measurements: RunMeasurements | None = None
) -> WorkerReport | None:
    """Each worker's ``block`` times from the ``workers`` section; ``None`` when it is absent."""
    if not tree.get("workers"):
        return None
    trees = compared_workers(tree)
    measured = {worker.worker_id: worker for worker in (measurements or read_measurements(tree)).workers}
    rows = []
    for index, worker in enumerate(trees):
        nodes = [node for _, node in walk_nodes(worker) if node["name"] == block]
        steps = sum(node["count"] for node in nodes)
        if not steps:
            continue
        worker_id = worker.get("worker_id", index)
        row = WorkerRow(
            label=str(worker.get("name") or f"worker {worker_id}"),
            worker_id=worker_id,
            steps=steps,
            total=sum(node["total"] for node in nodes),
        )
        row.max_time, row.max_kind = _slowest_step(worker, nodes, block)
        figures = measured.get(worker_id)
        if figures is not None and figures.critical_path is not None:
            row.last_share = figures.critical_path.last_share
            row.wait_as_last = figures.critical_path.wait_as_last_seconds
        if figures is not None and figures.env_time is not None and figures.env_time.wall_seconds > 0:
            row.cpu_share = figures.env_time.cpu_seconds / figures.env_time.wall_seconds
        rows.append(row)
    mean = sum(row.mean for row in rows) / len(rows) if rows else 0.0
    return WorkerReport(block=block, workers=rows, mean=mean)


def _slowest_step(
    worker: dict[str, Any], nodes: list[dict[str, Any]], block: str
) -> tuple[float | None, str | None]:
    """The worker's slowest ``block`` call, and what kind of figure it is (see module docstring)."""
    maxima = [node.get("max") for node in nodes]
    if all(_is_number(value) for value in maxima):
        return float(max(maxima)), MAX_PER_CALL  # type: ignore[type-var]
    peaks = worker.get("peak_mean")
    if isinstance(peaks, dict) and _is_number(peaks.get(block)):
        return float(peaks[block]), PEAK_INTERVAL_MEAN
    return None, None


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)

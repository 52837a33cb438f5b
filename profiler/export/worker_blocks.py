"""Per-worker timing of the block workers spend their time in, for the report's worker bars.

A vector step waits for its slowest environment, so one slow worker slows every step. Comparing
the workers' own trees (the ``workers`` section) on the same block makes that worker stand out.
Whether it is a straggler is not decided here: the verdict comes from
:mod:`profiler.analysis.verdicts`, which every output shares.
"""

from __future__ import annotations

from typing import Any

from profiler.records import Record

__all__ = ["WorkerBlockTime", "main_worker_block", "worker_block_times"]


class WorkerBlockTime(Record):
    """One worker's calls of the main block."""

    worker: str
    worker_id: Any
    count: int
    total: float
    mean: float
    max: float | None
    """Longest single call, when the tree tracked it (nodes with a ``max`` field)."""


def main_worker_block(workers: list[dict[str, Any]]) -> str | None:
    """The top-level worker block with the most time summed over all workers, if any."""
    time_by_name: dict[str, float] = {}
    for worker in workers:
        for block in worker["children"]:
            time_by_name[block["name"]] = time_by_name.get(block["name"], 0.0) + block["total"]
    return max(time_by_name, key=lambda name: time_by_name[name], default=None)


def worker_block_times(workers: list[dict[str, Any]], block_name: str) -> list[WorkerBlockTime]:
    """Each worker's mean (and max) time per call of ``block_name``; workers that never ran it are
    left out."""
    result = []
    for index, worker in enumerate(workers):
        block = next((child for child in worker["children"] if child["name"] == block_name), None)
        if block is None or block["count"] == 0:
            continue
        worker_id = worker.get("worker_id", index)
        maximum = block.get("max")
        result.append(
            WorkerBlockTime(
                worker=str(worker.get("name") or f"worker {worker_id}"),
                worker_id=worker_id,
                count=block["count"],
                total=block["total"],
                mean=block["total"] / block["count"],
                max=float(maximum) if isinstance(maximum, (int, float)) else None,
            )
        )
    return result

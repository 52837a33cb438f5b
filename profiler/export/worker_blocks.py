"""Per-worker timing of the block workers spend their time in, and which worker lags behind.

A vector step waits for its slowest environment, so one slow worker slows every step. Comparing
the workers' own trees (the ``workers`` section) on the same block makes that worker stand out.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

__all__ = ["STRAGGLER_MARGIN", "WorkerBlockTime", "main_worker_block", "worker_block_times"]

STRAGGLER_MARGIN = 0.10
"""A worker is a straggler when its mean time per call is this much above the others' mean."""


@dataclass(frozen=True)
class WorkerBlockTime:
    """One worker's calls of the main block."""

    worker: str
    count: int
    total: float
    mean: float
    max: float | None
    """Longest single call, when the tree tracked it (nodes with a ``max`` field)."""
    is_straggler: bool
    above_others: float
    """How far the mean is above the other workers' mean, as a fraction (0.25 is 25 % slower)."""


def main_worker_block(workers: list[dict[str, Any]]) -> str | None:
    """The top-level worker block with the most time summed over all workers, if any."""
    time_by_name: dict[str, float] = {}
    for worker in workers:
        for block in worker["children"]:
            time_by_name[block["name"]] = time_by_name.get(block["name"], 0.0) + block["total"]
    return max(time_by_name, key=lambda name: time_by_name[name], default=None)


def worker_block_times(workers: list[dict[str, Any]], block_name: str) -> list[WorkerBlockTime]:
    """Each worker's mean (and max) time per call of ``block_name``, with the straggler flagged.

    Workers that never ran the block are left out. Only the slowest worker can be the straggler.
    """
    rows = []
    for index, worker in enumerate(workers):
        block = next((child for child in worker["children"] if child["name"] == block_name), None)
        if block is None or block["count"] == 0:
            continue
        label = str(worker.get("name") or f"worker {worker.get('worker_id', index)}")
        rows.append((label, block))
    means = [block["total"] / block["count"] for _, block in rows]
    slowest = max(range(len(rows)), key=lambda position: means[position], default=None)
    result = []
    for position, (label, block) in enumerate(rows):
        others = means[:position] + means[position + 1 :]
        others_mean = sum(others) / len(others) if others else means[position]
        above = means[position] / others_mean - 1.0 if others_mean > 0 else 0.0
        maximum = block.get("max")
        result.append(
            WorkerBlockTime(
                worker=label,
                count=block["count"],
                total=block["total"],
                mean=means[position],
                max=float(maximum) if isinstance(maximum, (int, float)) else None,
                is_straggler=position == slowest and above >= STRAGGLER_MARGIN,
                above_others=above,
            )
        )
    return result

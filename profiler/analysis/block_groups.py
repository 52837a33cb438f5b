"""Block rows folded into groups: per block name, per worker or per process, by sum, mean, min, max
or count — ``rlprof analyze --aggregate-by ... --aggregate ...``.

A group's row stands for every block of the group (its ``places``). With ``sum`` its figures add
up, except that a block nested (at any depth) inside another block of the same group is left out
of the group's total: its time is already inside the outer block's. That is what keeps a
recursive call from counting twice by name, and a worker's blocks from counting their children's
time again by worker. ``mean``, ``min`` and ``max`` take that statistic of each figure over the
group's blocks; ``count`` sums like ``sum`` and ranks the groups by how many blocks they hold.
Per-call minimum and maximum are always the extremes over every call of the group.

Groups:

``name``     every place a block name appears in the tree (merged worker blocks included);
``worker``   each worker's own tree (the dump's ``workers`` section); the trainer is no worker;
``process``  the trainer's process (its threads included), then each worker's;
``domain``   the MXNet-style domain of the tasks and frames timed in it (``profiler.Domain``), the
             blocks timed outside any domain in one row, :data:`NO_DOMAIN`.
``type``     the block's kind, its name up to the first dot (``env`` for ``env.step``; a PyTorch
             operator's kind is its name, ``aten::addmm``), as MegEngine's ``--aggregate-by type``.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

from profiler.analysis.block_stats import TRAINER, BlockStat, block_rows, process_rows

__all__ = ["AGGREGATE_KEYS", "AGGREGATE_OPERATIONS", "NO_DOMAIN", "aggregate_blocks", "rows_to_aggregate"]

AGGREGATE_KEYS = ("name", "worker", "process", "domain", "type")
"""What blocks can be grouped by."""

AGGREGATE_OPERATIONS = ("sum", "mean", "min", "max", "count")
"""How a group's figures are made from its blocks'."""

NO_DOMAIN = "(no domain)"
"""The group of the blocks timed outside any domain."""

_STATISTICS: dict[str, Callable[[list[float]], float]] = {
    "mean": lambda values: math.fsum(values) / len(values),  # statistics.fmean, without importing it
    "min": min,
    "max": max,
}


def rows_to_aggregate(tree: dict[str, Any], aggregate_by: str) -> list[BlockStat]:
    """The rows a grouping works on: the merged tree's for ``name`` and ``domain``, one per
    process's block for ``worker`` and ``process`` (see
    :func:`profiler.analysis.block_stats.process_rows`)."""
    _check(aggregate_by, "sum")
    if aggregate_by in ("name", "domain", "type"):
        return block_rows(tree)
    rows = process_rows(tree)
    if aggregate_by == "worker":
        return [row for row in rows if row.process != TRAINER]
    return rows


def aggregate_blocks(rows: list[BlockStat], aggregate_by: str | None, operation: str = "sum") -> list[BlockStat]:
    """One row per group of ``rows``; ``aggregate_by=None`` folds them all into one row, ``all``.

    Raises ``ValueError`` naming the valid choices for an unknown key or operation.
    """
    _check(aggregate_by, operation)
    groups: dict[str, list[BlockStat]] = {}
    for row in rows:
        groups.setdefault(_group_of(row, aggregate_by), []).append(row)
    return [_group_row(label, members, operation) for label, members in groups.items()]


def _check(aggregate_by: str | None, operation: str) -> None:
    if aggregate_by is not None and aggregate_by not in AGGREGATE_KEYS:
        raise ValueError(f"cannot aggregate by {aggregate_by!r}; choose one of {', '.join(AGGREGATE_KEYS)}")
    if operation not in AGGREGATE_OPERATIONS:
        raise ValueError(
            f"unknown aggregate {operation!r}; choose one of {', '.join(AGGREGATE_OPERATIONS)}"
        )


def _group_of(row: BlockStat, aggregate_by: str | None) -> str:
    if aggregate_by is None:
        return "all"
    if aggregate_by == "name":
        return row.name
    if aggregate_by == "domain":
        return row.domain if row.domain is not None else NO_DOMAIN
    if aggregate_by == "type":
        return row.kind
    return row.process


def _group_row(label: str, members: list[BlockStat], operation: str) -> BlockStat:
    outermost = _outermost(members)
    fastest, slowest = _per_call_extremes(members)
    if operation in ("sum", "count"):
        total = sum(member.total for member in outermost)
        self_time = sum(member.self_time for member in members)
        count: float = sum(member.count for member in members)
        errors: float = sum(member.errors for member in members)
    else:
        statistic = _STATISTICS[operation]
        total = statistic([member.total for member in members])
        self_time = statistic([member.self_time for member in members])
        count = statistic([member.count for member in members])
        errors = statistic([member.errors for member in members])
    processes = {member.process for member in members}
    allocated_net, allocated_peak = _allocations(members, outermost, operation)
    return BlockStat(
        name=label,
        path=(label,),
        total=total,
        self_time=self_time,
        count=count,
        errors=errors,
        is_parallel=any(member.is_parallel for member in members),
        min_time=fastest,
        max_time=slowest,
        places=len(members),
        paths=[member.path for member in members],
        process=processes.pop() if len(processes) == 1 else "several",
        allocated_net=allocated_net,
        allocated_peak=allocated_peak,
    )


def _allocations(
    members: list[BlockStat], outermost: list[BlockStat], operation: str
) -> tuple[float | None, float | None]:
    """The group's kept and peak allocations, over the blocks that know theirs: kept bytes add up
    like totals (an inner block's are inside its outer one's), the peak is the highest; or the
    operation's statistic of each."""
    known = [member for member in members if member.allocated_peak is not None]
    if not known:
        return None, None
    if operation in ("sum", "count"):
        net = sum(member.allocated_net or 0.0 for member in outermost if member.allocated_peak is not None)
        return net, max(member.allocated_peak or 0.0 for member in known)
    statistic = _STATISTICS[operation]
    return (statistic([member.allocated_net or 0.0 for member in known]),
            statistic([member.allocated_peak or 0.0 for member in known]))


def _per_call_extremes(members: list[BlockStat]) -> tuple[float | None, float | None]:
    """The fastest and slowest call of the group; unknown unless every block that completed a
    call records them, so a table never shows a made-up extreme."""
    called = [member for member in members if member.count]
    minima = [member.min_time for member in called if member.min_time is not None]
    maxima = [member.max_time for member in called if member.max_time is not None]
    if not called or len(minima) < len(called) or len(maxima) < len(called):
        return None, None
    return min(minima), max(maxima)


def _outermost(members: list[BlockStat]) -> list[BlockStat]:
    """The members not nested inside another member of the same process."""
    paths = {(member.process, member.path) for member in members}
    return [
        member
        for member in members
        if not any((member.process, member.path[:depth]) in paths for depth in range(1, len(member.path)))
    ]

"""Per-block statistics of a timer tree: one row per block, then filter, select and sort.

This is the data behind ``rlprof analyze``'s block table and ``profiler.dumps``. A row is a plain
record (:class:`BlockStat`); grouping rows (by name, worker, process) is
:mod:`profiler.analysis.block_groups`' job, and turning them into text, JSON or CSV
:mod:`profiler.analysis.block_table`'s.

Each row knows the process that ran it, so rows can be filtered by kind (``--type``) and grouped
per process: ``trainer`` for the trainer's blocks and its threads', ``workers`` for worker blocks
merged into the trainer's tree (summed over every worker), and ``worker 3`` for the rows of one
worker's own tree (:func:`process_rows`).

Per-call minimum and maximum come from the nodes' ``min`` and ``max`` fields, which rlprof writes
on every block that completed a call; files from ML-Agents (or an older rlprof) lack them, and a
row never invents them — they are ``None`` then.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import field
from typing import Any

from profiler.records import Record

__all__ = [
    "MERGED_WORKERS",
    "ORDER_KEYS",
    "TRAINER",
    "Allocations",
    "BlockStat",
    "allocations_by_process",
    "block_rows",
    "has_allocations",
    "has_min_max",
    "matches_type",
    "median",
    "process_rows",
    "select_blocks",
    "walk_nodes",
]

ORDER_KEYS = ("total", "self", "count", "avg", "min", "max", "memory")
"""What rows can be ordered by; ``min`` and ``max`` only when every row has them, ``memory`` (the
most Python memory a call allocated) only when the run tracked allocations."""

PATH_SEPARATOR = "/"

TRAINER = "trainer"
"""The process of the trainer's own blocks, and of its other threads' blocks."""

MERGED_WORKERS = "workers"
"""The process of worker blocks merged into the trainer's tree: summed over every worker."""

THREAD_PREFIX = "thread:"
"""Another thread of the trainer's process, as a dump names it (see profiler.tree.timer_tree)."""


class BlockStat(Record):
    """The figures of one block (or, aggregated, of a group of blocks).

    ``path`` is the chain of names from the outermost block down (the root excluded); an
    aggregated row's path is just its group's name. ``places`` counts the tree nodes folded into
    the row. ``count`` and ``errors`` are whole numbers, except in a row holding their mean over a
    group's blocks. ``process`` is the process that ran the block (see the module docstring).
    """

    name: str
    path: tuple[str, ...]
    total: float
    self_time: float
    count: float
    errors: float = 0
    is_parallel: bool = False
    min_time: float | None = None
    max_time: float | None = None
    places: int = 1
    paths: list[tuple[str, ...]] = field(default_factory=list)
    process: str = TRAINER
    domain: str | None = None
    """The MXNet-style domain of a block a ``Task``/``Frame`` timed (``profiler.Domain``)."""
    allocated_peak: float | None = None
    """The most Python memory one call held above its start, in bytes (tracked allocations only)."""
    allocated_net: float | None = None
    """The Python memory its calls allocated and kept, in bytes (tracked allocations only)."""

    @property
    def kind(self) -> str:
        """What sort of block it is: its name up to the first dot (``env`` for ``env.step``,
        ``Policy`` for ``@timed`` ``Policy.act``), the whole name when it has none."""
        return self.name.split(".", 1)[0]

    @property
    def label(self) -> str:
        """How the block is shown: its path, names joined by ``/``."""
        return PATH_SEPARATOR.join(self.path)

    @property
    def avg(self) -> float:
        """Seconds per call (0 for a block that never completed a call)."""
        return self.total / self.count if self.count else 0.0

    def share_of(self, wall_time: float) -> float | None:
        """This block's fraction of ``wall_time``; ``None`` when the wall time is zero."""
        return self.total / wall_time if wall_time > 0 else None


def median(values: list[float]) -> float:
    """``statistics.median(values)``, the same figure, without importing :mod:`statistics` (and
    the ``fractions`` and ``decimal`` it imports: a cost at ``rlprof run``'s exit). ``values`` is
    not empty."""
    ordered = sorted(values)
    middle = len(ordered) // 2
    if len(ordered) % 2 == 1:
        return ordered[middle]
    return (ordered[middle - 1] + ordered[middle]) / 2


def walk_nodes(
    node: dict[str, Any], path: tuple[str, ...] = ()
) -> Iterator[tuple[tuple[str, ...], dict[str, Any]]]:
    """Yield ``(path, node)`` for every descendant of ``node`` (not ``node`` itself), parents first."""
    for child in node.get("children", []):
        child_path = (*path, child["name"])
        yield child_path, child
        yield from walk_nodes(child, child_path)


def block_rows(tree: dict[str, Any]) -> list[BlockStat]:
    """One row per block of a normalized tree (see :func:`profiler.load_timing_tree`), root excluded.

    A parallel block under a trainer block is another thread's (``thread:<name>``, still the
    trainer's process) or the workers' merged time (:data:`MERGED_WORKERS`); everything below it
    ran where it did.
    """
    return list(_rows_below(tree, (), TRAINER, allocations_by_process(tree)))


def _rows_below(
    node: dict[str, Any], path: tuple[str, ...], process: str, allocations: Allocations
) -> Iterator[BlockStat]:
    for child in node.get("children", []):
        child_process = process
        if process == TRAINER and child.get("is_parallel") and not node.get("is_parallel"):
            child_process = TRAINER if child["name"].startswith(THREAD_PREFIX) else MERGED_WORKERS
        child_path = (*path, child["name"])
        row = _row_of(child_path, child, child_process)
        allocated = allocations.get(child_process, {}).get(child_path)
        if allocated is not None:
            row.allocated_net, row.allocated_peak = allocated
        yield row
        yield from _rows_below(child, child_path, child_process, allocations)


Allocations = dict[str, dict[tuple[str, ...], tuple[float, float]]]
"""Process name -> block path -> (net bytes, peak bytes), from the dump's ``memory`` section."""


def allocations_by_process(tree: dict[str, Any]) -> Allocations:
    """What each process's blocks allocated (see :mod:`profiler.recording.memory`): a worker restarted under
    a new pid has its processes' figures added up; empty when allocations were not tracked."""
    allocations: Allocations = {}
    for process in (tree.get("memory") or {}).get("processes", []):
        blocks = allocations.setdefault(str(process["name"]), {})
        for block in process.get("blocks", []):
            path = tuple(block["path"])
            net, peak = blocks.get(path, (0.0, 0.0))
            blocks[path] = (net + block["net_bytes"], max(peak, block["peak_bytes"]))
    return allocations


def process_rows(tree: dict[str, Any]) -> list[BlockStat]:
    """One row per block of each process: the trainer's blocks (and its threads'), then each
    worker's own tree from the ``workers`` section, its rows' process named for it (``worker 3``).

    A file without a ``workers`` section keeps its merged worker rows (:data:`MERGED_WORKERS`):
    there is no telling its workers apart.
    """
    rows = block_rows(tree)
    workers = tree.get("workers")
    if not workers:
        return rows
    own = [row for row in rows if row.process == TRAINER]
    allocations = allocations_by_process(tree)
    for worker in workers:
        name = str(worker.get("name") or f"worker {worker['worker_id']}")
        own.extend(_rows_below(worker, (), name, allocations))
    return own


def _row_of(path: tuple[str, ...], node: dict[str, Any], process: str = TRAINER) -> BlockStat:
    min_time, max_time = node.get("min"), node.get("max")
    has_both = isinstance(min_time, (int, float)) and isinstance(max_time, (int, float))
    return BlockStat(
        name=node["name"],
        path=path,
        total=node["total"],
        self_time=node["self"],
        count=node["count"],
        errors=node.get("errors", 0),
        is_parallel=bool(node.get("is_parallel")) or process != TRAINER,
        min_time=float(min_time) if has_both else None,
        max_time=float(max_time) if has_both else None,
        paths=[path],
        process=process,
        domain=node.get("domain"),
    )


def _records_min_max(row: BlockStat) -> bool:
    # A block that never completed a call (open when the run was dumped) has no extremes to show.
    return row.min_time is not None or row.count == 0


def has_min_max(rows: list[BlockStat]) -> bool:
    """Whether per-call min/max are known for every row that completed a call (so the columns
    can be shown honestly)."""
    return any(row.min_time is not None for row in rows) and all(_records_min_max(row) for row in rows)


def has_allocations(rows: list[BlockStat]) -> bool:
    """Whether any row knows what it allocated (the run tracked allocations)."""
    return any(row.allocated_peak is not None for row in rows)


def matches_type(row: BlockStat, block_type: str) -> bool:
    """Whether ``row`` is of ``block_type``: ``trainer`` (the trainer's process, threads
    included), ``worker`` (any worker's process), ``domain`` (a task or frame of any
    ``profiler.Domain``), or a block kind (:attr:`BlockStat.kind`)."""
    if block_type == TRAINER:
        return row.process == TRAINER
    if block_type == "worker":
        return row.process != TRAINER
    if block_type == "domain":
        return row.domain is not None
    return row.kind == block_type


def select_blocks(
    rows: list[BlockStat],
    *,
    order_by: str = "total",
    ascending: bool = False,
    min_time: float = 0.0,
    max_time: float | None = None,
    pattern: re.Pattern[str] | None = None,
    top: int | None = None,
) -> list[BlockStat]:
    """The rows a user asked for: filtered, ordered, then cut to the ``top`` first.

    ``pattern`` is searched in the block's name and in its path, so both ``^env`` and
    ``vector.step/`` work. ``min_time`` and ``max_time`` keep the blocks whose total lies between
    them (both included). Ties are broken by path so the output is the same on every run.
    Ordering by ``min``/``max`` raises :class:`ValueError` when the rows do not record them.
    """
    if order_by not in ORDER_KEYS:
        raise ValueError(f"cannot order by {order_by!r}; choose one of {', '.join(ORDER_KEYS)}")
    if order_by in ("min", "max") and not has_min_max(rows):
        raise ValueError(
            f"cannot order by {order_by!r}: these timers do not record per-call min/max "
            "(columns available: total, self, count, avg)"
        )
    if order_by == "memory" and not has_allocations(rows):
        raise ValueError(
            "cannot order by 'memory': this run did not track its blocks' allocations (profile "
            "with track_allocations=True)"
        )
    chosen = [
        row
        for row in rows
        if min_time <= row.total
        and (max_time is None or row.total <= max_time)
        and (pattern is None or pattern.search(row.name) or pattern.search(row.label))
    ]
    chosen.sort(key=lambda row: row.path)  # not the label: joined, a deep tree's labels are its size squared
    chosen.sort(key=lambda row: _order_value(row, order_by), reverse=not ascending)
    return chosen if top is None else chosen[:top]


def _order_value(row: BlockStat, order_by: str) -> float:
    if order_by == "self":
        return row.self_time
    if order_by == "min":
        return row.min_time or 0.0
    if order_by == "max":
        return row.max_time or 0.0
    if order_by == "memory":
        return row.allocated_peak if row.allocated_peak is not None else -1.0
    return float(getattr(row, order_by))

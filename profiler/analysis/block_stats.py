"""Per-block statistics of a timer tree: one row per block, or per block name, then select and sort.

This is the data behind ``rlprof analyze``'s block table and ``profiler.dumps``. A row is a plain
record (:class:`BlockStat`); turning rows into text, JSON or CSV is :mod:`profiler.analysis.block_table`'s
job.

Per-call minimum and maximum come from the nodes' ``min`` and ``max`` fields, which rlprof writes
on every block that completed a call; files from ML-Agents (or an older rlprof) lack them, and a
row never invents them — they are ``None`` then.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

__all__ = [
    "ORDER_KEYS",
    "BlockStat",
    "aggregate_by_name",
    "block_rows",
    "has_min_max",
    "select_blocks",
    "walk_nodes",
]

ORDER_KEYS = ("total", "self", "count", "avg", "min", "max")
"""What rows can be ordered by; ``min`` and ``max`` only when the rows record them."""

PATH_SEPARATOR = "/"


@dataclass
class BlockStat:
    """The figures of one block (or, aggregated, of every block with one name).

    ``path`` is the chain of names from the outermost block down (the root excluded); an
    aggregated row's path is just its name. ``places`` counts the tree nodes folded into the row.
    """

    name: str
    path: tuple[str, ...]
    total: float
    self_time: float
    count: int
    errors: int = 0
    is_parallel: bool = False
    min_time: float | None = None
    max_time: float | None = None
    places: int = 1
    paths: list[tuple[str, ...]] = field(default_factory=list)

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


def walk_nodes(
    node: dict[str, Any], path: tuple[str, ...] = ()
) -> Iterator[tuple[tuple[str, ...], dict[str, Any]]]:
    """Yield ``(path, node)`` for every descendant of ``node`` (not ``node`` itself), parents first."""
    for child in node.get("children", []):
        child_path = (*path, child["name"])
        yield child_path, child
        yield from walk_nodes(child, child_path)


def block_rows(tree: dict[str, Any]) -> list[BlockStat]:
    """One row per block of a normalized tree (see :func:`profiler.load_timing_tree`), root excluded."""
    return [_row_of(path, node) for path, node in walk_nodes(tree)]


def _row_of(path: tuple[str, ...], node: dict[str, Any]) -> BlockStat:
    min_time, max_time = node.get("min"), node.get("max")
    has_both = isinstance(min_time, (int, float)) and isinstance(max_time, (int, float))
    return BlockStat(
        name=node["name"],
        path=path,
        total=node["total"],
        self_time=node["self"],
        count=node["count"],
        errors=node.get("errors", 0),
        is_parallel=bool(node.get("is_parallel")),
        min_time=float(min_time) if has_both else None,
        max_time=float(max_time) if has_both else None,
        paths=[path],
    )


def aggregate_by_name(rows: list[BlockStat]) -> list[BlockStat]:
    """Fold rows that share a block name into one row each, wherever they sit in the tree.

    Counts, self times and errors add up. Totals add up too, except for a block nested (at any
    depth) inside another block of the same name — a recursive call — whose time is already in the
    outer one's total and would otherwise be counted twice. The row is parallel when any of its
    blocks ran in parallel; min/max are kept only when every folded block that completed a call
    has them.
    """
    merged: dict[str, BlockStat] = {}
    for row in rows:
        outer = row.name in row.path[:-1]
        existing = merged.get(row.name)
        if existing is None:
            merged[row.name] = BlockStat(
                name=row.name,
                path=(row.name,),
                total=0.0 if outer else row.total,
                self_time=row.self_time,
                count=row.count,
                errors=row.errors,
                is_parallel=row.is_parallel,
                min_time=row.min_time,
                max_time=row.max_time,
                paths=[row.path],
            )
            continue
        existing.total += 0.0 if outer else row.total
        existing.self_time += row.self_time
        existing.errors += row.errors
        existing.is_parallel = existing.is_parallel or row.is_parallel
        existing.places += 1
        existing.paths.append(row.path)
        existing.min_time, existing.max_time = _folded_extremes(existing, row)
        existing.count += row.count
    return list(merged.values())


def _folded_extremes(existing: BlockStat, row: BlockStat) -> tuple[float | None, float | None]:
    """The extremes of two rows folded together; a side without calls brings none."""
    if row.count == 0:
        return existing.min_time, existing.max_time
    if existing.count == 0:
        return row.min_time, row.max_time
    if existing.min_time is None or row.min_time is None:
        return None, None
    return min(existing.min_time, row.min_time), max(existing.max_time, row.max_time)  # type: ignore[type-var]


def _records_min_max(row: BlockStat) -> bool:
    # A block that never completed a call (open when the run was dumped) has no extremes to show.
    return row.min_time is not None or row.count == 0


def has_min_max(rows: list[BlockStat]) -> bool:
    """Whether per-call min/max are known for every row that completed a call (so the columns
    can be shown honestly)."""
    return any(row.min_time is not None for row in rows) and all(_records_min_max(row) for row in rows)


def select_blocks(
    rows: list[BlockStat],
    *,
    order_by: str = "total",
    ascending: bool = False,
    min_time: float = 0.0,
    pattern: re.Pattern[str] | None = None,
    top: int | None = None,
) -> list[BlockStat]:
    """The rows a user asked for: filtered, ordered, then cut to the ``top`` first.

    ``pattern`` is searched in the block's name and in its path, so both ``^env`` and
    ``vector.step/`` work. ``min_time`` drops blocks whose total is below it. Ties are broken by
    path so the output is the same on every run. Ordering by ``min``/``max`` raises
    :class:`ValueError` when the rows do not record them.
    """
    if order_by not in ORDER_KEYS:
        raise ValueError(f"cannot order by {order_by!r}; choose one of {', '.join(ORDER_KEYS)}")
    if order_by in ("min", "max") and not has_min_max(rows):
        raise ValueError(
            f"cannot order by {order_by!r}: these timers do not record per-call min/max "
            "(columns available: total, self, count, avg)"
        )
    chosen = [
        row
        for row in rows
        if row.total >= min_time
        and (pattern is None or pattern.search(row.name) or pattern.search(row.label))
    ]
    chosen.sort(key=lambda row: row.label)
    chosen.sort(key=lambda row: _order_value(row, order_by), reverse=not ascending)
    return chosen if top is None else chosen[:top]


def _order_value(row: BlockStat, order_by: str) -> float:
    if order_by == "self":
        return row.self_time
    if order_by == "min":
        return row.min_time or 0.0
    if order_by == "max":
        return row.max_time or 0.0
    return float(getattr(row, order_by))

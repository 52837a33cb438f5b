"""Block rows (:class:`profiler.analysis.block_stats.BlockStat`) as a text table, JSON-ready dicts or CSV.

Shared by ``rlprof analyze`` and ``profiler.dumps`` so both print the same columns. The per-call
``min``/``max`` columns appear only when every row records them: the tables never print a
made-up figure.
"""

from __future__ import annotations

from typing import Any

from profiler.analysis.block_stats import BlockStat, has_allocations, has_min_max
from profiler.analysis.text_format import (
    TABLE_WIDTH,
    csv_text,
    fit_left,
    format_bytes,
    format_percent,
    format_seconds,
)

__all__ = [
    "CUMULATIVE_FIGURES",
    "PARALLEL_NOTE",
    "block_columns",
    "blocks_as_csv",
    "blocks_as_dicts",
    "blocks_as_table",
]

PARALLEL_MARK = " *"
PARALLEL_NOTE = (
    "* ran beside the trainer (in workers or threads): summed over them, may exceed wall time"
)
CUMULATIVE_FIGURES = ("total", "self")
"""The times a cumulative column can add up, row after row: a block's total or its self time."""
_FIGURE_WIDTH = 9
"""Characters of a time or count column: ``999.99 ms``."""
_PERCENT_WIDTH = 7
"""Characters of a share column: ``1234.5%`` (parallel blocks can exceed 100%)."""
_PERCENT_COLUMNS = frozenset({"share", "cumulative", "blocks"})
_BYTES_WIDTH = 10
"""Characters of a memory column: ``1023.9 KiB``."""
_BYTES_COLUMNS = frozenset({"allocated_peak", "allocated_net"})


def block_columns(
    rows: list[BlockStat],
    *,
    extremes: bool = True,
    allocations: bool = False,
    cumulative: str | None = None,
    groups: bool = False,
) -> list[str]:
    """The figure columns these rows can honestly fill, in display order.

    The per-call ``min`` and ``max`` come only when recorded, and not at all without
    ``extremes``; with ``allocations``, the Python memory a call held at its peak and what the
    calls kept, when the run tracked them; ``cumulative`` (``total`` or ``self``) adds the running
    sum of that time over the rows so far, as a share of the wall time; ``groups`` adds the number
    of blocks each row holds.
    """
    columns = ["total", "self", "count", "avg"]
    if extremes and has_min_max(rows):
        columns += ["min", "max"]
    if allocations and has_allocations(rows):
        columns += ["allocated_peak", "allocated_net"]
    if groups:
        columns.append("blocks")
    if cumulative is not None:
        columns.append("cumulative")
    return columns + ["share"]


def _cumulative_seconds(rows: list[BlockStat], cumulative: str | None) -> list[float]:
    if cumulative is None:
        return [0.0] * len(rows)
    if cumulative not in CUMULATIVE_FIGURES:
        raise ValueError(f"cannot add up {cumulative!r}; choose one of {', '.join(CUMULATIVE_FIGURES)}")
    running, sums = 0.0, []
    counted: set[tuple[str, ...]] = set()
    for row in rows:
        if cumulative == "self":
            running += row.self_time
        elif not any(row.path[:depth] in counted for depth in range(1, len(row.path))):
            # A block inside one counted already is part of its total: adding it would count twice.
            running += row.total
        counted.add(row.path)
        sums.append(running)
    return sums


def blocks_as_table(
    rows: list[BlockStat],
    wall_time: float,
    *,
    width: int = TABLE_WIDTH,
    extremes: bool = True,
    allocations: bool = False,
    cumulative: str | None = None,
    groups: bool = False,
) -> str:
    """A table ``width`` characters wide, block name last so a long path can be cut on the left
    without breaking columns (see :func:`block_columns` for ``extremes``, ``allocations``,
    ``cumulative`` and ``groups``; leaving columns out leaves room for long paths).

    ``cum %`` is the share of the wall time the rows so far account for: the running sum of
    their ``cumulative`` time (``self``, or ``total`` without a block inside a block counted
    already). Where the first rows already reach 90%, the rest hardly matter; parallel blocks,
    summed over the workers and threads that ran them, can take it past 100%.
    """
    columns = block_columns(rows, extremes=extremes, allocations=allocations, cumulative=cumulative,
                            groups=groups)
    headers = {"total": "total", "self": "self", "count": "calls", "avg": "per call",
               "min": "min/call", "max": "max/call", "share": "% wall",
               "cumulative": "cum %", "blocks": "blocks", "allocated_peak": "alloc peak",
               "allocated_net": "alloc kept"}
    widths = [_PERCENT_WIDTH if column in _PERCENT_COLUMNS
              else _BYTES_WIDTH if column in _BYTES_COLUMNS else _FIGURE_WIDTH for column in columns]
    name_width = max(16, width - sum(widths) - len(widths) - 1)
    lines = [" ".join(headers[column].rjust(size) for column, size in zip(columns, widths)) + "  block"]
    for row, running in zip(rows, _cumulative_seconds(rows, cumulative)):
        cells = " ".join(_cell(row, column, wall_time, running).rjust(size)
                         for column, size in zip(columns, widths))
        mark = PARALLEL_MARK if row.is_parallel else ""
        lines.append(f"{cells}  {fit_left(row.label, name_width - len(mark))}{mark}")
    if any(row.is_parallel for row in rows):
        lines.append(PARALLEL_NOTE)
    return "\n".join(lines)


def _cell(row: BlockStat, column: str, wall_time: float, running: float) -> str:
    if column == "count":
        return _whole_or_mean(row.count)
    if column == "blocks":
        return str(row.places)
    if column == "share":
        return format_percent(row.share_of(wall_time))
    if column == "cumulative":
        return format_percent(running / wall_time if wall_time > 0 else None)
    if column in _BYTES_COLUMNS:
        allocated = row.allocated_peak if column == "allocated_peak" else row.allocated_net
        return "-" if allocated is None else format_bytes(allocated)
    return format_seconds(_seconds(row, column))


def _whole_or_mean(count: float) -> str:
    """A call count: whole, or with one decimal when it is a mean over blocks."""
    return str(int(count)) if float(count).is_integer() else f"{count:.1f}"


def _seconds(row: BlockStat, column: str) -> float:
    values = {"total": row.total, "self": row.self_time, "avg": row.avg,
              "min": row.min_time, "max": row.max_time}
    return values[column] or 0.0


def blocks_as_dicts(
    rows: list[BlockStat], wall_time: float, *, cumulative: str | None = None
) -> list[dict[str, Any]]:
    """JSON-ready rows: raw seconds, ``share`` of the wall time, min/max only when recorded, and
    ``cumulative`` seconds with their ``cumulative_share`` when asked for."""
    dicts = []
    for row, running in zip(rows, _cumulative_seconds(rows, cumulative)):
        entry: dict[str, Any] = {
            "block": row.label,
            "name": row.name,
            "process": row.process,
            "total": row.total,
            "self": row.self_time,
            "count": row.count,
            "avg": row.avg,
            "share": row.share_of(wall_time),
            "is_parallel": row.is_parallel,
            "errors": row.errors,
        }
        if row.min_time is not None:
            entry["min"] = row.min_time
            entry["max"] = row.max_time
        if row.allocated_peak is not None:
            entry["allocated_peak_bytes"] = row.allocated_peak
            entry["allocated_net_bytes"] = row.allocated_net
        if cumulative is not None:
            entry["cumulative"] = running
            entry["cumulative_share"] = running / wall_time if wall_time > 0 else None
        if row.places > 1:
            entry["places"] = row.places
        dicts.append(entry)
    return dicts


def blocks_as_csv(rows: list[BlockStat], wall_time: float, *, cumulative: str | None = None) -> str:
    """CSV with raw seconds, one row per block, for spreadsheets and pandas."""
    with_min_max = has_min_max(rows)
    with_allocations = has_allocations(rows)
    header = ["block", "name", "process", "total_s", "self_s", "count", "avg_s"]
    header += ["min_s", "max_s"] if with_min_max else []
    header += ["allocated_peak_bytes", "allocated_net_bytes"] if with_allocations else []
    header += ["share", "is_parallel", "errors"]
    header += ["cumulative_s", "cumulative_share"] if cumulative is not None else []
    lines = []
    for row, running in zip(rows, _cumulative_seconds(rows, cumulative)):
        line: list[object] = [row.label, row.name, row.process, row.total, row.self_time, row.count, row.avg]
        line += [row.min_time, row.max_time] if with_min_max else []
        if with_allocations:
            line += ["" if row.allocated_peak is None else row.allocated_peak,
                     "" if row.allocated_net is None else row.allocated_net]
        share = row.share_of(wall_time)
        line += ["" if share is None else share, int(row.is_parallel), row.errors]
        if cumulative is not None:
            line += [running, running / wall_time if wall_time > 0 else ""]
        lines.append(line)
    return csv_text(header, lines)

"""Block rows (:class:`profiler.analysis.block_stats.BlockStat`) as a text table, JSON-ready dicts or CSV.

Shared by ``rlprof analyze`` and ``profiler.dumps`` so both print the same columns. The per-call
``min``/``max`` columns appear only when every row records them: the tables never print a
made-up figure.
"""

from __future__ import annotations

from typing import Any

from profiler.analysis.block_stats import BlockStat, has_min_max
from profiler.analysis.text_format import TABLE_WIDTH, csv_text, fit_left, format_percent, format_seconds

__all__ = ["PARALLEL_NOTE", "block_columns", "blocks_as_csv", "blocks_as_dicts", "blocks_as_table"]

PARALLEL_MARK = " *"
PARALLEL_NOTE = (
    "* ran beside the trainer (in workers or threads): summed over them, may exceed wall time"
)
_NUMBER_WIDTH = 10


def block_columns(rows: list[BlockStat], *, extremes: bool = True) -> list[str]:
    """The figure columns these rows can honestly fill, in display order; the per-call ``min`` and
    ``max`` only when recorded, and not at all without ``extremes``."""
    columns = ["total", "self", "count", "avg"]
    if extremes and has_min_max(rows):
        columns += ["min", "max"]
    return columns + ["share"]


def blocks_as_table(
    rows: list[BlockStat], wall_time: float, *, width: int = TABLE_WIDTH, extremes: bool = True
) -> str:
    """A fixed-width table, block name last so a long path can be cut without breaking columns.

    ``extremes=False`` leaves out the per-call min/max columns, leaving room for long paths.
    """
    columns = block_columns(rows, extremes=extremes)
    headers = {"total": "total", "self": "self", "count": "calls", "avg": "per call",
               "min": "min/call", "max": "max/call", "share": "% wall"}
    figures_width = len(columns) * (_NUMBER_WIDTH + 1)
    name_width = max(16, width - figures_width - 1)
    lines = [" ".join(headers[column].rjust(_NUMBER_WIDTH) for column in columns) + "  block"]
    for row in rows:
        cells = " ".join(_cell(row, column, wall_time).rjust(_NUMBER_WIDTH) for column in columns)
        mark = PARALLEL_MARK if row.is_parallel else ""
        lines.append(f"{cells}  {fit_left(row.label, name_width - len(mark))}{mark}")
    if any(row.is_parallel for row in rows):
        lines.append(PARALLEL_NOTE)
    return "\n".join(lines)


def _cell(row: BlockStat, column: str, wall_time: float) -> str:
    if column == "count":
        return str(row.count)
    if column == "share":
        return format_percent(row.share_of(wall_time))
    return format_seconds(_seconds(row, column))


def _seconds(row: BlockStat, column: str) -> float:
    values = {"total": row.total, "self": row.self_time, "avg": row.avg,
              "min": row.min_time, "max": row.max_time}
    return values[column] or 0.0


def blocks_as_dicts(rows: list[BlockStat], wall_time: float) -> list[dict[str, Any]]:
    """JSON-ready rows: raw seconds, ``share`` of the wall time, min/max only when recorded."""
    dicts = []
    for row in rows:
        entry: dict[str, Any] = {
            "block": row.label,
            "name": row.name,
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
        if row.places > 1:
            entry["places"] = row.places
        dicts.append(entry)
    return dicts


def blocks_as_csv(rows: list[BlockStat], wall_time: float) -> str:
    """CSV with raw seconds, one row per block, for spreadsheets and pandas."""
    with_min_max = has_min_max(rows)
    header = ["block", "name", "total_s", "self_s", "count", "avg_s"]
    header += ["min_s", "max_s"] if with_min_max else []
    header += ["share", "is_parallel", "errors"]
    lines = []
    for row in rows:
        line: list[object] = [row.label, row.name, row.total, row.self_time, row.count, row.avg]
        line += [row.min_time, row.max_time] if with_min_max else []
        share = row.share_of(wall_time)
        line += ["" if share is None else share, int(row.is_parallel), row.errors]
        lines.append(line)
    return csv_text(header, lines)

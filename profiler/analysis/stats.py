"""``profiler.dumps``: the live process's per-block statistics as a printable string, MXNet-style.

For a quick look from inside a training script (``print(profiler.dumps())`` every N updates)
without writing a file and running ``rlprof analyze`` on it.

Columns: ``total``, ``self``, ``count`` (calls), ``avg``, ``min`` and ``max`` (per call) and
share of wall time for every block; MXNet's ``sort_by`` keys all work, in either direction.
"""

from __future__ import annotations


from profiler.tree import strict_json
from profiler.analysis.block_stats import block_rows, select_blocks
from profiler.analysis.block_table import block_columns, blocks_as_csv, blocks_as_dicts, blocks_as_table
from profiler.analysis.text_format import format_seconds
from profiler.tree.timer_tree import get_timer_tree
from profiler.timing.timers import reset_timers

__all__ = ["DUMPS_FORMATS", "DUMPS_SORT_KEYS", "dumps"]

DUMPS_FORMATS = ("table", "json", "csv")
DUMPS_SORT_KEYS = ("total", "avg", "min", "max", "count")


def dumps(
    reset: bool = False,
    format: str = "table",  # noqa: A002 - the name MXNet's profiler.dumps uses
    sort_by: str = "total",
    ascending: bool = False,
) -> str:
    """Per-block stats of the calling thread's tree (other threads' included), as text.

    ``format`` is ``"table"`` (for a terminal), ``"json"`` (an object with ``wall_time``,
    ``columns`` and ``blocks``) or ``"csv"``. ``sort_by`` picks the column, descending unless
    ``ascending``. ``reset=True`` clears the timers after reading them, so the next call reports
    only what ran in between.
    """
    if format not in DUMPS_FORMATS:
        raise ValueError(f"unknown format {format!r}; choose one of {', '.join(DUMPS_FORMATS)}")
    if sort_by not in DUMPS_SORT_KEYS:
        raise ValueError(f"cannot sort by {sort_by!r}; choose one of {', '.join(DUMPS_SORT_KEYS)}")
    for name, flag in (("reset", reset), ("ascending", ascending)):
        if not isinstance(flag, bool):
            raise ValueError(f"dumps: {name} must be True or False, got {flag!r}")
    tree = get_timer_tree(include_threads=True)
    rows = select_blocks(block_rows(tree), order_by=sort_by, ascending=ascending)
    if reset:
        reset_timers()
    wall_time = tree["total"]
    if format == "json":
        document = {
            "wall_time": wall_time,
            "columns": block_columns(rows),
            "blocks": blocks_as_dicts(rows, wall_time),
        }
        return strict_json.dumps(document, indent=2)
    if format == "csv":
        return blocks_as_csv(rows, wall_time)
    order = "ascending" if ascending else "descending"
    header = (
        f"rlprof stats: wall time {format_seconds(wall_time)}, {len(rows)} blocks, "
        f"sorted by {sort_by} ({order})"
    )
    return f"{header}\n{blocks_as_table(rows, wall_time)}"

"""``profiler.dumps``: the live process's per-block statistics as a printable string, MXNet-style.

For a quick look from inside a training script (``print(profiler.dumps())`` every N updates)
without writing a file and running ``rlprof analyze`` on it.

Columns: ``total``, ``self``, ``count`` (calls), ``avg``, ``min`` and ``max`` (per call) and
share of wall time for every block; MXNet's ``sort_by`` keys all work, in either direction.

``reset=True`` resets the summary only, as MXNet's resets its aggregate table and never the trace:
the next ``dumps()`` counts from there, while the timers, ``dump()`` and every other output keep
the whole run. rlprof keeps one pair of per-call extremes per block, so after a reset ``min`` and
``max`` are still those of the whole run.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from profiler.tree import strict_json
from profiler.analysis.block_stats import block_rows, select_blocks
from profiler.analysis.block_table import block_columns, blocks_as_csv, blocks_as_dicts, blocks_as_table
from profiler.analysis.text_format import format_seconds
from profiler.tree.timer_tree import get_timer_tree
from profiler.timing import timers

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
    ``ascending``. ``reset=True`` starts the summary again after reading it, so the next call
    reports only what ran in between; the timers themselves, and so ``dump()``, keep everything.
    """
    if format not in DUMPS_FORMATS:
        raise ValueError(f"unknown format {format!r}; choose one of {', '.join(DUMPS_FORMATS)}")
    if sort_by not in DUMPS_SORT_KEYS:
        raise ValueError(f"cannot sort by {sort_by!r}; choose one of {', '.join(DUMPS_SORT_KEYS)}")
    for name, flag in (("reset", reset), ("ascending", ascending)):
        if not isinstance(flag, bool):
            raise ValueError(f"dumps: {name} must be True or False, got {flag!r}")
    global _summary_start
    tree = get_timer_tree(include_threads=True)
    stack = timers.current_thread_stack()
    start = _summary_start if _summary_start is not None and _summary_start.belongs_to(stack) else None
    summary = tree if start is None else start.since(tree)
    rows = select_blocks(block_rows(summary), order_by=sort_by, ascending=ascending)
    if reset:
        _summary_start = _SummaryStart.of(tree, stack)
    wall_time = summary["total"]
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
    since = " since the last reset" if start is not None else ""
    header = (
        f"rlprof stats{since}: wall time {format_seconds(wall_time)}, {len(rows)} blocks, "
        f"sorted by {sort_by} ({order})"
    )
    return f"{header}\n{blocks_as_table(rows, wall_time)}"


@dataclass(frozen=True)
class _SummaryStart:
    """Where the summary starts after ``dumps(reset=True)``: each block's figures then, by path.

    Void once the stack it was taken on is reset (``reset_timers``) or is another thread's.
    """

    stack_id: int
    generation: int
    wall_time: float
    blocks: dict[tuple[str, ...], tuple[float, int, float, int]]

    @classmethod
    def of(cls, tree: dict[str, Any], stack: timers.TimerStack) -> _SummaryStart:
        blocks: dict[tuple[str, ...], tuple[float, int, float, int]] = {}
        pending = [((), tree)]
        while pending:
            path, node = pending.pop()
            for child in node.get("children", []):
                child_path = (*path, child["name"])
                blocks[child_path] = (child["total"], child["count"], child["self"], child.get("errors", 0))
                pending.append((child_path, child))
        return cls(id(stack), stack.generation, tree["total"], blocks)

    def belongs_to(self, stack: timers.TimerStack) -> bool:
        return self.stack_id == id(stack) and self.generation == stack.generation

    def since(self, tree: dict[str, Any]) -> dict[str, Any]:
        """``tree`` less what its blocks had at this start; blocks that did not run since are left out."""
        summary = dict(tree, total=max(0.0, tree["total"] - self.wall_time))
        summary["children"] = self._children_since((), tree)
        return summary

    def _children_since(self, path: tuple[str, ...], node: dict[str, Any]) -> list[dict[str, Any]]:
        children = []
        for child in node.get("children", []):
            child_path = (*path, child["name"])
            total, count, self_time, errors = self.blocks.get(child_path, (0.0, 0, 0.0, 0))
            since = dict(child, total=max(0.0, child["total"] - total), count=child["count"] - count,
                         self=max(0.0, child["self"] - self_time))
            since["children"] = self._children_since(child_path, child)
            if child.get("errors", 0) - errors > 0:
                since["errors"] = child["errors"] - errors
            else:
                since.pop("errors", None)
            if since["count"] > 0 or since["children"]:
                children.append(since)
        return children


_summary_start: _SummaryStart | None = None

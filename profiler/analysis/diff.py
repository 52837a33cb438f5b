"""``rlprof diff``: which blocks got slower or faster between two runs, biggest impact first.

Blocks are matched by their path in the tree (``train/vector.step/env.step``), so the same name
in two places is compared place by place. Each block is judged **per call** — the figure that
stays comparable when the two runs did not take the same number of steps — against a threshold
in percent: beyond it the block is ``slower`` or ``faster``, within it ``same``. Blocks only in
the new run are ``new``, only in the base run ``gone``. Rows are ordered by **impact**: the
absolute change of the block's total time, because a 50% slower block that costs microseconds
matters less than a 3% slower one that costs minutes.

``regressions`` (the ``slower`` blocks) is what ``rlprof diff --fail-on-regression`` turns into
exit code 1 for CI. ``min_time`` ignores blocks below a noise floor in both runs.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from profiler.tree import strict_json
from profiler.analysis.block_stats import BlockStat, block_rows
from profiler.analysis.text_format import (
    TABLE_WIDTH,
    csv_text,
    fit_left,
    format_percent,
    format_seconds,
    signed_seconds,
)

__all__ = ["DIFF_FORMATS", "UNTIMED_ROW", "BlockChange", "RunDiff", "diff_runs", "render_diff"]

DIFF_FORMATS = ("table", "json", "csv")

UNTIMED_ROW = "(untimed: outside any block)"
"""The row of the wall time outside every block (the root's self time), compared like a block:
a run that got slower outside its blocks shows where the wall time went."""


def _untimed_row(tree: dict[str, Any]) -> BlockStat:
    untimed = float(tree.get("self", 0.0))
    return BlockStat(UNTIMED_ROW, (UNTIMED_ROW,), untimed, untimed, 1)


@dataclass
class BlockChange:
    """One block in the base run, the new run, or both; ``None`` for the side it is missing from."""

    block: str
    base: BlockStat | None
    new: BlockStat | None
    status: str

    @property
    def total_change(self) -> float:
        """Seconds the block's total grew (negative: shrank); its impact on the run."""
        return (self.new.total if self.new else 0.0) - (self.base.total if self.base else 0.0)

    @property
    def total_change_share(self) -> float | None:
        if self.base is None or self.base.total == 0:
            return None
        return self.total_change / self.base.total

    @property
    def per_call_change_share(self) -> float | None:
        """Relative change of the time per call; ``None`` unless the block ran in both runs."""
        if not (self.base and self.new and self.base.count and self.new.count):
            return None
        if self.base.avg == 0:
            return 0.0 if self.new.avg == 0 else math.inf
        return self.new.avg / self.base.avg - 1


@dataclass
class RunDiff:
    """Every block's change, ordered by impact, and the threshold they were judged by."""

    base_wall_time: float
    new_wall_time: float
    threshold_percent: float
    changes: list[BlockChange]

    @property
    def regressions(self) -> list[BlockChange]:
        return [change for change in self.changes if change.status == "slower"]


def diff_runs(
    base: dict[str, Any],
    new: dict[str, Any],
    *,
    threshold_percent: float = 10.0,
    min_time: float = 0.0,
) -> RunDiff:
    """Compare two normalized timer trees (see :func:`profiler.load_timing_tree`)."""
    base_rows = {row.label: row for row in block_rows(base)}
    new_rows = {row.label: row for row in block_rows(new)}
    if base.get("self") or new.get("self"):
        base_rows[UNTIMED_ROW], new_rows[UNTIMED_ROW] = _untimed_row(base), _untimed_row(new)
    changes = []
    for label in sorted(base_rows.keys() | new_rows.keys()):
        before, after = base_rows.get(label), new_rows.get(label)
        largest_total = max(before.total if before else 0.0, after.total if after else 0.0)
        if largest_total < min_time:
            continue
        change = BlockChange(label, before, after, status="")
        change.status = _status(change, threshold_percent / 100)
        changes.append(change)
    changes.sort(key=lambda change: abs(change.total_change), reverse=True)
    return RunDiff(base["total"], new["total"], threshold_percent, changes)


def _status(change: BlockChange, threshold: float) -> str:
    if change.base is None or change.base.count == 0:
        return "new"
    if change.new is None or change.new.count == 0:
        return "gone"
    per_call = change.per_call_change_share
    assert per_call is not None  # both ran, so both have a per-call time
    if per_call > threshold:
        return "slower"
    if per_call < -threshold:
        return "faster"
    return "same"


def render_diff(
    diff: RunDiff, format_name: str = "table", *, top: int | None = None, show_same: bool = False
) -> str:
    """The diff as ``table`` (terminal), ``json`` or ``csv``; ``top`` keeps the first rows.

    The table lists only blocks that changed beyond the threshold (or appeared, or went) unless
    ``show_same``; JSON and CSV always hold every compared block.
    """
    if format_name == "json":
        return strict_json.dumps(_as_document(diff), indent=2)
    if format_name == "csv":
        return _as_csv(diff)
    if format_name != "table":
        raise ValueError(f"unknown format {format_name!r}; choose one of {', '.join(DIFF_FORMATS)}")
    return _as_table(diff, top=top, show_same=show_same)


def _as_table(diff: RunDiff, *, top: int | None, show_same: bool) -> str:
    wall_change = (diff.new_wall_time / diff.base_wall_time - 1) if diff.base_wall_time > 0 else None
    counts = {status: sum(1 for c in diff.changes if c.status == status)
              for status in ("slower", "faster", "new", "gone", "same")}
    lines = [
        f"wall time {format_seconds(diff.base_wall_time)} -> {format_seconds(diff.new_wall_time)} "
        f"({format_percent(wall_change, signed=True)})",
        f"per call beyond +/-{diff.threshold_percent:g}%: {counts['slower']} slower, "
        f"{counts['faster']} faster; {counts['new']} new, {counts['gone']} gone",
    ]
    shown = [change for change in diff.changes if show_same or change.status != "same"]
    if top is not None:
        shown = shown[:top]
    if not shown:
        lines.append("no block changed beyond the threshold")
        return "\n".join(lines)
    headers = ("total +/-", "(%)", "base/call", "new/call", "per call", "status")
    widths = (10, 8, 10, 10, 8, 6)
    name_width = TABLE_WIDTH - sum(widths) - len(widths) - 1
    lines.append(" ".join(h.rjust(w) for h, w in zip(headers, widths)) + "  block")
    for change in shown:
        cells = (
            signed_seconds(change.total_change),
            format_percent(change.total_change_share, signed=True),
            format_seconds(change.base.avg) if change.base else "-",
            format_seconds(change.new.avg) if change.new else "-",
            format_percent(change.per_call_change_share, signed=True),
            change.status,
        )
        row = " ".join(cell.rjust(width) for cell, width in zip(cells, widths))
        lines.append(f"{row}  {fit_left(change.block, name_width)}")
    hidden = len(diff.changes) - len(shown)
    if hidden:
        lines.append(f"({hidden} more blocks not shown: within the threshold, or beyond --top)")
    return "\n".join(lines)


def _as_document(diff: RunDiff) -> dict[str, Any]:
    return {
        "base_wall_time": diff.base_wall_time,
        "new_wall_time": diff.new_wall_time,
        "threshold_percent": diff.threshold_percent,
        "regressions": [change.block for change in diff.regressions],
        "blocks": [_change_dict(change) for change in diff.changes],
    }


def _change_dict(change: BlockChange) -> dict[str, Any]:
    per_call = change.per_call_change_share
    return {
        "block": change.block,
        "status": change.status,
        "total_change": change.total_change,
        "total_change_share": change.total_change_share,
        "per_call_change_share": None if per_call is None or math.isinf(per_call) else per_call,
        "base": None if change.base is None else _side(change.base),
        "new": None if change.new is None else _side(change.new),
    }


def _side(row: BlockStat) -> dict[str, Any]:
    return {"total": row.total, "count": row.count, "avg": row.avg}


def _as_csv(diff: RunDiff) -> str:
    header = ["block", "status", "total_change_s", "base_total_s", "new_total_s",
              "base_count", "new_count", "base_avg_s", "new_avg_s", "per_call_change_share"]
    rows = []
    for change in diff.changes:
        per_call = change.per_call_change_share
        rows.append([
            change.block, change.status, change.total_change,
            _field(change.base, "total"), _field(change.new, "total"),
            _field(change.base, "count"), _field(change.new, "count"),
            _field(change.base, "avg"), _field(change.new, "avg"),
            "" if per_call is None else per_call,
        ])
    return csv_text(header, rows)


def _field(row: BlockStat | None, name: str) -> object:
    """A figure of one side, or an empty cell for a block missing from that run."""
    return "" if row is None else getattr(row, name)

"""``rlprof analyze``: what a dumped run says, as one report — blocks, step time, workers.

The report has three sections, each answering one question without opening the JSON:

1. **Blocks** — the slowest blocks (or the same block summed across the tree with
   ``aggregate_by="name"``) and their share of the wall time (:mod:`profiler.analysis.block_stats`);
2. **Where the step time went** — the trainer's vectorized step split into env compute, waiting
   on the slowest worker, transport and the rest (:mod:`profiler.analysis.step_time`);
3. **Per worker** — each worker's mean and max step time, with the straggler named.

Sections 2 and 3 say in one line when the run has no such blocks (a single-process run). The
CSV format holds the block rows only, since the other sections are not tables of the same shape.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from profiler import strict_json
from profiler.analysis.block_stats import BlockStat, aggregate_by_name, block_rows, select_blocks
from profiler.analysis.block_table import blocks_as_csv, blocks_as_dicts, blocks_as_table
from profiler.analysis.step_time import (
    PEAK_INTERVAL_MEAN,
    StepBreakdown,
    WorkerReport,
    step_breakdowns,
    worker_report,
)
from profiler.analysis.text_format import TABLE_WIDTH, fit_left, format_percent, format_seconds

__all__ = ["ANALYZE_FORMATS", "ANALYZE_ORDER_KEYS", "AnalyzeOptions", "RunAnalysis", "analyze_run",
           "render_analysis"]

ANALYZE_FORMATS = ("table", "json", "csv")
ANALYZE_ORDER_KEYS = ("total", "self", "count", "avg")


@dataclass
class AnalyzeOptions:
    """What the user asked for; ``top=None`` keeps every block."""

    top: int | None = 20
    order_by: str = "total"
    aggregate_by: str | None = None
    min_time: float = 0.0
    pattern: re.Pattern[str] | None = None


@dataclass
class RunAnalysis:
    """Everything ``rlprof analyze`` prints, before it is turned into text."""

    wall_time: float
    blocks: list[BlockStat]
    blocks_matched: int
    blocks_in_run: int
    options: AnalyzeOptions
    breakdowns: list[StepBreakdown] = field(default_factory=list)
    workers: WorkerReport | None = None


def analyze_run(tree: dict[str, Any], options: AnalyzeOptions | None = None) -> RunAnalysis:
    """Analyse a normalized timer tree (see :func:`profiler.load_timing_tree`)."""
    options = options or AnalyzeOptions()
    rows = block_rows(tree)
    if options.aggregate_by == "name":
        rows = aggregate_by_name(rows)
    elif options.aggregate_by is not None:
        raise ValueError(f"cannot aggregate by {options.aggregate_by!r}; only 'name' is supported")
    matched = select_blocks(rows, order_by=options.order_by, min_time=options.min_time,
                            pattern=options.pattern)
    return RunAnalysis(
        wall_time=tree["total"],
        blocks=matched if options.top is None else matched[: options.top],
        blocks_matched=len(matched),
        blocks_in_run=len(rows),
        options=options,
        breakdowns=step_breakdowns(tree),
        workers=worker_report(tree),
    )


def render_analysis(analysis: RunAnalysis, format_name: str = "table", *, title: str = "run") -> str:
    """The analysis as ``table`` (terminal text), ``json`` or ``csv`` (block rows only)."""
    if format_name == "json":
        return strict_json.dumps(_as_document(analysis), indent=2)
    if format_name == "csv":
        return blocks_as_csv(analysis.blocks, analysis.wall_time)
    if format_name != "table":
        raise ValueError(f"unknown format {format_name!r}; choose one of {', '.join(ANALYZE_FORMATS)}")
    sections = [_blocks_text(analysis, title), _breakdowns_text(analysis), _workers_text(analysis)]
    return "\n\n".join(sections)


def _blocks_text(analysis: RunAnalysis, title: str) -> str:
    options = analysis.options
    kind = "block names, summed across the tree" if options.aggregate_by else "blocks"
    shown = f"{len(analysis.blocks)} of {analysis.blocks_matched}"
    if analysis.blocks_matched != analysis.blocks_in_run:
        shown += f" matching (of {analysis.blocks_in_run})"
    header = (f"{fit_left(title, TABLE_WIDTH - 35)}: wall time {format_seconds(analysis.wall_time)}\n"
              f"{shown} {kind}, by {options.order_by}")
    if not analysis.blocks:
        return f"{header}\n(no block matches)"
    return f"{header}\n{blocks_as_table(analysis.blocks, analysis.wall_time)}"


def _breakdowns_text(analysis: RunAnalysis) -> str:
    if not analysis.breakdowns:
        return ("Where the step time went: no env_manager.step or vector.step block "
                "(not a vectorized-env run).")
    return "\n\n".join(_breakdown_text(breakdown, analysis.wall_time)
                       for breakdown in analysis.breakdowns)


def _breakdown_text(breakdown: StepBreakdown, wall_time: float) -> str:
    share = format_percent(breakdown.total / wall_time if wall_time > 0 else None)
    lines = [
        f"Where the {breakdown.block} time went: {_plural(breakdown.calls, 'call')}, "
        f"{format_seconds(breakdown.total)} ({share} of wall time), "
        f"{format_seconds(breakdown.total / breakdown.calls)} per call",
        f"{'per call':>10} {'total':>10} {'share':>7}  part",
    ]
    for part in breakdown.parts:
        lines.append(f"{format_seconds(breakdown.per_call(part)):>10} "
                     f"{format_seconds(part.seconds):>10} "
                     f"{format_percent(breakdown.share(part)):>7}  {part.label}")
    if breakdown.worker_calls:
        workers = _plural(breakdown.workers, "worker")
        lines.append(f"merged worker time ({' + '.join(breakdown.worker_blocks)}, parallel): "
                     f"{format_seconds(breakdown.worker_time)} over {workers}, "
                     f"{breakdown.worker_calls} calls")
    lines.append(f"=> {breakdown.verdict}")
    return "\n".join(lines)


def _workers_text(analysis: RunAnalysis) -> str:
    report = analysis.workers
    if report is None:
        return "Per worker: no per-worker trees in this run (no 'workers' section)."
    if not report.workers:
        return f"Per worker: no worker ran {report.block}."
    any_max = any(worker.max_time is not None for worker in report.workers)
    lines = [f"Per worker ({report.block}): mean {format_seconds(report.mean)} per step "
             f"over {_plural(len(report.workers), 'worker')}",
             f"{'steps':>10} {'mean':>10} {'max':>10} {'vs mean':>8}  worker"]
    for worker in report.workers:
        against = worker.mean / report.mean - 1 if report.mean > 0 else None
        maximum = format_seconds(worker.max_time) if worker.max_time is not None else "-"
        lines.append(f"{worker.steps:>10} {format_seconds(worker.mean):>10} {maximum:>10} "
                     f"{format_percent(against, signed=True):>8}  {worker.label}")
    kinds = {worker.max_kind for worker in report.workers if worker.max_kind}
    if not any_max:
        lines.append("(max per step: not recorded in this file)")
    elif PEAK_INTERVAL_MEAN in kinds:
        lines.append("(max: mean of the slowest flush interval; "
                     "the slowest single step when flushing every step)")
    straggler = report.straggler
    if straggler is not None:
        gap = (f"{format_seconds(report.straggler_gap)} per step "
               f"({format_percent(report.straggler_gap_share, signed=True)}) above the mean")
        if report.balanced:
            lines.append(f"=> workers are balanced: the slowest, {straggler.label}, is {gap}")
        else:
            lines.append(f"=> straggler: {straggler.label}, {gap}")
    return "\n".join(lines)


def _plural(number: int, noun: str) -> str:
    return f"{number} {noun}" if number == 1 else f"{number} {noun}s"


def _as_document(analysis: RunAnalysis) -> dict[str, Any]:
    report = analysis.workers
    return {
        "wall_time": analysis.wall_time,
        "order_by": analysis.options.order_by,
        "aggregate_by": analysis.options.aggregate_by,
        "blocks_matched": analysis.blocks_matched,
        "blocks_in_run": analysis.blocks_in_run,
        "blocks": blocks_as_dicts(analysis.blocks, analysis.wall_time),
        "step_breakdowns": [
            {
                "block": breakdown.block,
                "calls": breakdown.calls,
                "total": breakdown.total,
                "parts": [
                    {"part": part.label, "total": part.seconds, "per_call": breakdown.per_call(part),
                     "share": breakdown.share(part)}
                    for part in breakdown.parts
                ],
                "worker_blocks": list(breakdown.worker_blocks),
                "worker_time": breakdown.worker_time,
                "worker_calls": breakdown.worker_calls,
                "workers": breakdown.workers,
                "verdict": breakdown.verdict,
            }
            for breakdown in analysis.breakdowns
        ],
        "workers": None if report is None else {
            "block": report.block,
            "mean": report.mean,
            "workers": [
                {"worker": worker.label, "worker_id": worker.worker_id, "steps": worker.steps,
                 "total": worker.total, "mean": worker.mean, "max": worker.max_time,
                 "max_kind": worker.max_kind}
                for worker in report.workers
            ],
            "straggler": None if report.straggler is None else {
                "worker": report.straggler.label,
                "worker_id": report.straggler.worker_id,
                "gap": report.straggler_gap,
                "gap_share": report.straggler_gap_share,
            },
        },
    }

"""``rlprof analyze``: what a dumped run says, as one report — verdicts, blocks, step time, workers.

The report opens with the verdicts and then shows the figures behind them, each section answering
one question without opening the JSON:

1. **Verdicts** — what limits the run, what it costs, the evidence and what to change, costliest
   first (:mod:`profiler.analysis.verdicts`, the one source every output prints);
2. **Blocks** — the slowest blocks and their share of the wall time, with a running total, and
   the time outside any block (:mod:`profiler.analysis.block_stats`); or the blocks grouped by
   name, worker or process (:mod:`profiler.analysis.block_groups`). The options are those of
   MegEngine's ``profile_analyze`` where it has them (see :class:`AnalyzeOptions`);
3. **Where the step time went** — the trainer's vectorized step split into env compute, waiting
   on the last worker, transport and the rest, adding up to the step's total
   (:mod:`profiler.analysis.step_time`);
4. **Per worker** — each worker's mean and max step time, how often the step waited on it and its
   env CPU share (:mod:`profiler.analysis.worker_report`), and the steps a worker took that no
   timer payload reported (it died, hung or was cut off before shipping them), since the figures
   lack their time;
5. **Memory** — each process's peak, growth and samples, and the blocks that allocate most,
   when the run sampled its memory (:mod:`profiler.analysis.memory_report`).

Sections 3, 4 and 5 say in one line when the run has no such figures (a single-process run). The
CSV format holds the block rows only, since the other sections are not tables of the same shape.
"""

from __future__ import annotations

import re
from dataclasses import field
from typing import TYPE_CHECKING, Any

from profiler.records import Record
from profiler.tree import strict_json
from profiler.analysis.block_groups import aggregate_blocks, rows_to_aggregate
from profiler.analysis.block_stats import BlockStat, block_rows, has_allocations, matches_type, select_blocks
from profiler.analysis.block_table import blocks_as_csv, blocks_as_dicts, blocks_as_table
from profiler.analysis.frames import FrameStat, frame_stats, frames_as_text
from profiler.analysis.machine_figures import WaitsInBlock, read_machine_figures
from profiler.analysis.memory_advice import allocations_advice, made_by_rlprof_run
from profiler.analysis.resident_gauges import ResidentGauge, resident_gauges, resident_gauges_text
from profiler.analysis.device_report import device_document, device_text
from profiler.analysis.run_measurements import read_measurements
from profiler.analysis.step_time import StepBreakdown, ThreadBlocks, step_breakdowns, steps_in_threads
from profiler.analysis.text_format import (
    TABLE_WIDTH, counted, fit_left, format_percent, format_seconds, memory_not_sampled_text, wrap_text,
)
from profiler.analysis.training_phases import (
    TrainingPhases, policy_calls_in_threads, training_phases, training_phases_text,
)
from profiler.analysis.untimed_gaps import UntimedGaps, untimed_gaps, untimed_gaps_text
from profiler.analysis.untimed_places import (
    UntimedPlaces,
    WorkerUntimedPlaces,
    untimed_places,
    untimed_places_text,
    workers_untimed_places,
    workers_untimed_text,
)
from profiler.analysis.verdict_text import verdicts_as_text
from profiler.analysis.verdicts import RunVerdicts, judge_run
from profiler.analysis.worker_groups import OtherManager, other_managers
from profiler.analysis.worker_report import PEAK_INTERVAL_MEAN, WorkerReport, worker_report

if TYPE_CHECKING:  # the sections' modules are imported only for the runs that have the section
    from profiler.analysis.memory_report import MemoryReport
    from profiler.analysis.operator_report import OperatorReport

__all__ = ["ANALYZE_FORMATS", "ANALYZE_ORDER_KEYS", "AnalyzeOptions", "RunAnalysis", "analyze_run",
           "render_analysis"]

ANALYZE_FORMATS = ("table", "json", "csv")
ANALYZE_ORDER_KEYS = ("total", "self", "count", "avg", "min", "max", "memory", "flops", "device")

OPERATOR_ONLY_ORDER_KEYS = ("flops", "device")
"""Keys only operators have (computation, device self time): the blocks stay ordered by total."""


class AnalyzeOptions(Record):
    """What the user asked for; ``top=None`` keeps every block.

    ``domain`` keeps the blocks of that MXNet-style domain (``profiler.Domain``: its tasks and
    frames) before grouping. ``types`` keeps the blocks of any of these types (``trainer``, ``worker`` or a block kind,
    see :func:`profiler.analysis.block_stats.matches_type`) before grouping. ``aggregate_by``
    groups the blocks (``name``, ``worker``, ``process``) and ``aggregate`` says how (``sum``,
    ``mean``, ``min``, ``max``, ``count``); an ``aggregate`` without ``aggregate_by`` folds every
    block into one row, as MegEngine's ``profile_analyze`` does. ``min_time`` and ``max_time``
    bound the totals shown. ``order_by=None`` orders by ``total``, and by the number of blocks
    of a group for ``aggregate="count"``.
    """

    top: int | None = 20
    order_by: str | None = None
    ascending: bool = False
    aggregate_by: str | None = None
    aggregate: str | None = None
    min_time: float = 0.0
    max_time: float | None = None
    pattern: re.Pattern[str] | None = None
    types: tuple[str, ...] = ()
    domain: str | None = None
    input_dtype: str | None = None
    """Keep the operators that had an input of this dtype (MegEngine's ``--input-dtype``)."""

    @property
    def grouped(self) -> bool:
        return self.aggregate_by is not None or self.aggregate is not None

    @property
    def ordered_by(self) -> str:
        """The order actually used (see ``order_by``)."""
        if self.order_by is not None:
            return self.order_by
        return "blocks" if self.aggregate == "count" else "total"

    @property
    def cumulative(self) -> str:
        """The time the cumulative column adds up: self time when ordered by it, else totals."""
        return "self" if self.ordered_by == "self" else "total"


class UnreportedWorker(Record):
    """A worker whose trainer saw ``steps`` steps answered that no timer payload reported."""

    label: str
    worker_id: int
    steps: int
    reason: str | None


class RunAnalysis(Record):
    """Everything ``rlprof analyze`` prints, before it is turned into text."""

    wall_time: float
    untimed: float
    blocks: list[BlockStat]
    blocks_matched: int
    blocks_in_run: int
    options: AnalyzeOptions
    verdicts: RunVerdicts
    breakdowns: list[StepBreakdown] = field(default_factory=list)
    waits_in_steps: dict[str, WaitsInBlock] = field(default_factory=dict)
    """The trainer's waits for a core and time on one inside the steps, by block, where read."""
    steps_in_threads: list[ThreadBlocks] = field(default_factory=list)
    """Vector steps of the trainer's other threads, which the breakdowns do not read."""
    policy_in_threads: list[ThreadBlocks] = field(default_factory=list)
    """The policy's inference calls in the trainer's other threads, which the phases do not read."""
    workers: WorkerReport | None = None
    unreported: list[UnreportedWorker] = field(default_factory=list)
    other_managers: list[OtherManager] = field(default_factory=list)
    frames: list[FrameStat] = field(default_factory=list)
    memory: MemoryReport | None = None
    rlprof_run: bool = False
    """Made by ``rlprof run``: its options, not the API, say how to measure more."""
    resident: list[ResidentGauge] = field(default_factory=list)
    """Each process's resident set as the trainer read it (shown where memory was not sampled)."""
    untimed_places: UntimedPlaces | None = None
    untimed_gaps: UntimedGaps | None = None
    workers_untimed: list[WorkerUntimedPlaces] = field(default_factory=list)
    phases: TrainingPhases | None = None
    operators: OperatorReport | None = None
    device: dict[str, Any] = field(default_factory=dict)
    device_text: str | None = None
    blocks_ordered_by: str | None = None
    """The blocks' order where it differs from the one asked for (an operator-only key)."""

    @property
    def untimed_share(self) -> float | None:
        """The share of the wall time outside any block (the root's self time)."""
        return self.untimed / self.wall_time if self.wall_time > 0 else None

    @property
    def unexplained_share(self) -> float | None:
        """The share of the wall time in no block that the stack sampler names no place for."""
        unexplained = self.untimed if self.untimed_places is None else self.untimed_places.unexplained_seconds
        return unexplained / self.wall_time if self.wall_time > 0 else None


def analyze_run(tree: dict[str, Any], options: AnalyzeOptions | None = None) -> RunAnalysis:
    """Analyse a normalized timer tree (see :func:`profiler.load_timing_tree`).

    Raises ``ValueError`` for an unknown grouping, aggregate or order.
    """
    options = options or AnalyzeOptions()
    if options.grouped:
        rows = rows_to_aggregate(tree, options.aggregate_by or "name")
    else:
        rows = block_rows(tree)
    if options.types:
        rows = [row for row in rows if any(matches_type(row, kind) for kind in options.types)]
    if options.domain is not None:
        rows = [row for row in rows if row.domain == options.domain]
    if options.grouped:
        rows = aggregate_blocks(rows, options.aggregate_by, options.aggregate or "sum")
    rlprof_run = made_by_rlprof_run(tree)
    order = blocks_order(rows, options, has_operators=bool(tree.get("operators")), rlprof_run=rlprof_run)
    matched = _selected(rows, options, order)
    measurements = read_measurements(tree)
    breakdowns = step_breakdowns(tree, measurements)
    machine = read_machine_figures(tree)
    return RunAnalysis(
        wall_time=tree["total"],
        untimed=tree.get("self", 0.0),
        blocks=matched if options.top is None else matched[: options.top],
        blocks_matched=len(matched),
        blocks_in_run=len(rows),
        options=options,
        verdicts=judge_run(tree, measurements, breakdowns, machine),
        breakdowns=breakdowns,
        waits_in_steps=machine.in_blocks,
        steps_in_threads=steps_in_threads(tree),
        policy_in_threads=policy_calls_in_threads(tree),
        workers=worker_report(tree, measurements=measurements),
        unreported=unreported_workers(tree),
        other_managers=other_managers(tree),
        frames=frame_stats(tree),
        memory=_memory_report(tree),
        rlprof_run=rlprof_run,
        resident=resident_gauges(tree),
        untimed_places=untimed_places(tree),
        untimed_gaps=untimed_gaps(tree),
        workers_untimed=workers_untimed_places(tree),
        phases=training_phases(tree),
        operators=_operator_report(tree, by_type=options.aggregate_by == "type", types=options.types,
                                  pattern=options.pattern, input_dtype=options.input_dtype,
                                  order_by=options.order_by,
                                  ascending=options.ascending, min_time=options.min_time,
                                  max_time=options.max_time, top=options.top),
        device=device_document(tree),
        device_text=device_text(tree),
        blocks_ordered_by=order if order != options.ordered_by else None,
    )


# The memory and operator sections' modules are imported only for the runs that have the
# section: importing them (their dataclasses) is much of what ``rlprof run`` adds at its exit.


def _memory_report(tree: dict[str, Any]) -> MemoryReport | None:
    if not tree.get("memory"):
        return None
    from profiler.analysis.memory_report import memory_report

    return memory_report(tree)


def _operator_report(tree: dict[str, Any], **filters: Any) -> OperatorReport | None:
    if not tree.get("operators"):
        return None
    from profiler.analysis.operator_report import operator_report

    return operator_report(tree, **filters)


def _memory_document(report: MemoryReport) -> dict[str, Any] | None:
    from profiler.analysis.memory_report import memory_document

    return memory_document(report)


def _operators_document(report: OperatorReport) -> dict[str, Any] | None:
    from profiler.analysis.operator_report import operators_document

    return operators_document(report)


def blocks_order(rows: list[BlockStat], options: AnalyzeOptions, has_operators: bool, rlprof_run: bool = False) -> str:
    """The order of the block table: the one asked for, or ``total`` for a key MegEngine orders
    its operators by that the blocks lack (FLOPs, device time, memory untracked), so that the
    command orders the operators instead of refusing. Refused, saying how to measure it in the
    run's own terms (``rlprof_run``: a dump ``rlprof run`` made), where nothing has the key."""
    order = options.ordered_by
    if order in OPERATOR_ONLY_ORDER_KEYS and not has_operators:
        raise ValueError(f"cannot order by {order!r}: only operators have it, and this run recorded none "
                         "(profile with Profiler(record_operators=True), or read an Nsight capture)")
    if order == "memory" and not has_operators and not has_allocations(rows):
        raise ValueError(f"cannot order by 'memory': this run did not track its blocks' allocations "
                         f"({allocations_advice(rlprof_run)})")
    if order in OPERATOR_ONLY_ORDER_KEYS or (order == "memory" and has_operators and not has_allocations(rows)):
        return "total"
    return order


def _selected(rows: list[BlockStat], options: AnalyzeOptions, order: str) -> list[BlockStat]:
    selected = select_blocks(rows, order_by="total" if order == "blocks" else order,
                             ascending=options.ascending, min_time=options.min_time,
                             max_time=options.max_time, pattern=options.pattern)
    if order == "blocks":
        selected.sort(key=lambda row: row.places, reverse=not options.ascending)
    return selected


def unreported_workers(tree: dict[str, Any]) -> list[UnreportedWorker]:
    """The workers whose entry counts ``unreported_steps`` (written by envmanager)."""
    unreported = []
    for index, worker in enumerate(tree.get("workers", [])):
        steps = worker.get("unreported_steps")
        if type(steps) is int and steps > 0:
            reason = worker.get("unreported_reason")
            worker_id = worker.get("worker_id", index)
            unreported.append(UnreportedWorker(
                label=str(worker.get("name") or f"worker {worker_id}"),
                worker_id=worker_id,
                steps=steps,
                reason=reason if isinstance(reason, str) else None,
            ))
    return unreported


def render_analysis(
    analysis: RunAnalysis, format_name: str = "table", *, title: str = "run", width: int = TABLE_WIDTH
) -> str:
    """The analysis as ``table`` (terminal text ``width`` columns wide), ``json`` or ``csv``
    (block rows only)."""
    cumulative = analysis.options.cumulative
    if format_name == "json":
        return strict_json.dumps(_as_document(analysis), indent=2)
    if format_name == "csv":
        return blocks_as_csv(analysis.blocks, analysis.wall_time, cumulative=cumulative)
    if format_name != "table":
        raise ValueError(f"unknown format {format_name!r}; choose one of {', '.join(ANALYZE_FORMATS)}")
    sections = [verdicts_as_text(analysis.verdicts, width=width), _blocks_text(analysis, title, width),
                _breakdowns_text(analysis, width), _workers_text(analysis)]
    if analysis.untimed_places is not None and analysis.untimed > 0:
        untimed_text = untimed_places_text(analysis.untimed_places, analysis.wall_time)
        if analysis.untimed_gaps is not None:
            untimed_text = f"{untimed_gaps_text(analysis.untimed_gaps)}\n{untimed_text}"
        sections.insert(2, untimed_text)
    if analysis.workers_untimed:  # workers timed in place sample their own stacks
        sections.append(workers_untimed_text(analysis.workers_untimed))
    if analysis.phases is not None:  # runs whose framework phases rlprof run timed
        sections.insert(2, training_phases_text(analysis.phases, analysis.wall_time, analysis.steps_in_threads,
                                                analysis.policy_in_threads))
    if analysis.frames:  # only runs that time frames (profiler.Frame) have this section
        sections.append(frames_as_text(analysis.frames))
    if analysis.memory is None:
        sections.append(memory_not_sampled_text(width, analysis.rlprof_run))
        if analysis.resident:
            sections[-1] += "\n" + resident_gauges_text(analysis.resident)
    else:
        from profiler.analysis.memory_report import memory_text

        sections.append(memory_text(analysis.memory, width=width))
    if analysis.operators is not None:  # only runs that recorded PyTorch's operators
        from profiler.analysis.operator_report import operators_text

        sections.append(operators_text(analysis.operators, width))
    if analysis.device_text is not None:  # only runs with device time, or operators without it
        sections.append(analysis.device_text)
    return "\n\n".join(sections)


def _blocks_text(analysis: RunAnalysis, title: str, width: int) -> str:
    options = analysis.options
    shown = f"{len(analysis.blocks)} of {analysis.blocks_matched}"
    if analysis.blocks_matched != analysis.blocks_in_run:
        shown += f" matching (of {analysis.blocks_in_run})"
    order = f"{analysis.blocks_ordered_by or options.ordered_by}, {'smallest' if options.ascending else 'largest'} first"
    if analysis.blocks_ordered_by:
        order += f" (blocks have no {options.ordered_by}: the operators below are ordered by it)"
    header = (f"{fit_left(title, width - 35)}: wall time {format_seconds(analysis.wall_time)}\n"
              f"untimed (outside any block): {format_seconds(analysis.untimed)} "
              f"({format_percent(analysis.untimed_share)} of wall time)\n"
              f"{shown} {_what_rows_are(options)}, by {order}")
    if options.types:
        header += f"\nof type {' or '.join(options.types)}"
    if options.domain is not None:
        header += f"\nof domain {options.domain}"
    if not analysis.blocks:
        return f"{header}\n(no block matches)"
    # Per-call extremes and allocations take columns from the block paths: shown when ordered by.
    table = blocks_as_table(analysis.blocks, analysis.wall_time, width=width,
                            extremes=options.ordered_by in ("min", "max"),
                            allocations=(analysis.blocks_ordered_by or options.ordered_by) == "memory",
                            cumulative=options.cumulative, groups=options.grouped)
    return f"{header}\n{table}"


def _what_rows_are(options: AnalyzeOptions) -> str:
    if not options.grouped:
        return "blocks"
    operation = options.aggregate or "sum"
    if options.aggregate_by is None:
        return f"rows: every block in one, by {operation}"
    groups = {"name": "block names", "worker": "workers", "process": "processes",
              "domain": "domains", "type": "block types"}[options.aggregate_by]
    return f"{groups}, their blocks' {operation}"


def _breakdowns_text(analysis: RunAnalysis, width: int) -> str:
    if not analysis.breakdowns and analysis.steps_in_threads:
        where = "; ".join(steps.as_text() for steps in analysis.steps_in_threads)
        return "\n".join(wrap_text(
            f"Where the step time went: the vector steps ran in other threads of the trainer's process "
            f"({where}), beside its main thread; the breakdown reads the main thread's steps only.",
            width, subsequent_indent="  "))
    if not analysis.breakdowns:
        return ("Where the step time went: no env_manager.step or vector.step block "
                "(not a vectorized-env run).")
    return "\n\n".join(_breakdown_text(breakdown, analysis.wall_time, width,
                                       analysis.waits_in_steps.get(breakdown.block))
                       for breakdown in analysis.breakdowns)


def _breakdown_text(breakdown: StepBreakdown, wall_time: float, width: int, waits: WaitsInBlock | None) -> str:
    share = format_percent(breakdown.total / wall_time if wall_time > 0 else None)
    lines = [
        f"Where the {breakdown.block} time went: {counted(breakdown.calls, 'call')}, "
        f"{format_seconds(breakdown.total)} ({share} of wall time), "
        f"{format_seconds(breakdown.total / breakdown.calls)} per call",
        f"{'per call':>10} {'total':>10} {'share':>7}  part",
    ]
    for part in breakdown.parts:
        lines.append(f"{format_seconds(breakdown.per_call(part)):>10} "
                     f"{format_seconds(part.seconds):>10} "
                     f"{format_percent(breakdown.share(part)):>7}  {part.label}")
    if breakdown.worker_calls:
        workers = counted(breakdown.workers, "worker")
        lines.append(fit_left(f"merged worker time ({' + '.join(breakdown.worker_blocks)}, parallel): "
                              f"{format_seconds(breakdown.worker_time)} over {workers}, "
                              f"{breakdown.worker_calls} calls", width))
    if waits is not None and waits.runs_read:
        on_core = waits.cpu_over(1)
        lines.extend(wrap_text(
            f"inside these steps the trainer waited {format_seconds(waits.over(1))} per call for a core"
            + (f" and ran {format_seconds(on_core)} per call on one" if on_core is not None else "")
            + f" (the kernel's count, {counted(waits.runs_read, 'step')} read), in any of the parts above",
            width, subsequent_indent="  "))
    for note in breakdown.notes:
        lines.extend(wrap_text(f"note: {note}", width, subsequent_indent="  "))
    return "\n".join(lines)


def _trainer_in_steps(waits: WaitsInBlock | None) -> dict[str, Any] | None:
    """The trainer's waits for a core and time on one per step, as read (None: not read)."""
    if waits is None or not waits.runs_read:
        return None
    return {"run_queue_per_call": waits.over(1), "cpu_per_call": waits.cpu_over(1), "steps_read": waits.runs_read}


def _workers_text(analysis: RunAnalysis) -> str:
    report = analysis.workers
    if report is None:
        return "Per worker: no per-worker trees in this run (no 'workers' section)."
    if not report.workers:
        return "\n".join([f"Per worker: no worker ran {report.block}.", *_left_out_lines(analysis)])
    any_max = any(worker.max_time is not None for worker in report.workers)
    lines = [f"Per worker ({report.block}): mean {format_seconds(report.mean)} per call "
             f"over {counted(len(report.workers), 'worker')}",
             f"{'calls':>10} {'mean':>10} {'max':>10} {'vs mean':>8} {'last':>7} "
             f"{'waited on':>10} {'env cpu':>8}  worker"]
    for worker in report.workers:
        against = worker.mean / report.mean - 1 if report.mean > 0 else None
        maximum = format_seconds(worker.max_time) if worker.max_time is not None else "-"
        waited = format_seconds(worker.wait_as_last) if worker.wait_as_last is not None else "-"
        lines.append(f"{worker.steps:>10} {format_seconds(worker.mean):>10} {maximum:>10} "
                     f"{format_percent(against, signed=True):>8} "
                     f"{format_percent(worker.last_share):>7} {waited:>10} "
                     f"{format_percent(worker.cpu_share):>8}  {worker.label}")
    kinds = {worker.max_kind for worker in report.workers if worker.max_kind}
    if not any_max:
        lines.append("(max per call: not recorded in this file)")
    elif PEAK_INTERVAL_MEAN in kinds:
        lines.append("(max: mean of the slowest flush interval; "
                     "the slowest single call when flushing every step)")
    if report.has_critical_path:
        lines.append("(last: share of vector steps whose last reply was this worker's;")
        lines.append(" waited on: the time those steps waited after the second-to-last reply)")
    elif not analysis.breakdowns and not analysis.steps_in_threads:
        lines.append("(last, waited on: no vector step in this run for a worker to be last in)")
    else:
        lines.append("(last, waited on: this file does not record the critical path)")
    if report.has_cpu_time:
        lines.append("(env cpu: CPU time of its env work over its wall time; the rest was off")
        lines.append(" the CPU, waiting for a core or sleeping)")
    else:
        lines.append("(env cpu: this file does not record the workers' CPU time)")
    lines.extend(_left_out_lines(analysis))
    return "\n".join(lines)


def _left_out_lines(analysis: RunAnalysis) -> list[str]:
    """What the per-worker figures do not cover: other vector envs' workers, unreported steps."""
    left_out = [f"{other.name} ({counted(other.workers, 'worker')})" for other in analysis.other_managers]
    lines = [f"(not compared with these: the workers of {', '.join(left_out)}, another vector env)"] if left_out else []
    return lines + [
        f"{worker.label}: {counted(worker.steps, 'step')} taken but never reported"
        + (f" ({worker.reason})" if worker.reason else "")
        + "; their time is missing from these figures"
        for worker in analysis.unreported
    ]


def _as_document(analysis: RunAnalysis) -> dict[str, Any]:
    report = analysis.workers
    return {
        "wall_time": analysis.wall_time,
        "untimed": {"seconds": analysis.untimed, "share": analysis.untimed_share,
                    "unexplained_share": analysis.unexplained_share,
                    "places": [] if analysis.untimed_places is None
                    else [place.as_dict() for place in analysis.untimed_places.places],
                    "gaps": None if analysis.untimed_gaps is None else analysis.untimed_gaps.as_dict(),
                    "workers": [worker.as_dict() for worker in analysis.workers_untimed]},
        "phases": None if analysis.phases is None else analysis.phases.as_dict(),
        "verdicts": [verdict.as_dict() for verdict in analysis.verdicts.verdicts],
        "cannot_tell": list(analysis.verdicts.cannot_tell),
        "order_by": analysis.options.ordered_by,
        "ascending": analysis.options.ascending,
        "aggregate_by": analysis.options.aggregate_by,
        "aggregate": analysis.options.aggregate,
        "types": list(analysis.options.types),
        "domain": analysis.options.domain,
        "blocks_matched": analysis.blocks_matched,
        "blocks_in_run": analysis.blocks_in_run,
        "blocks": blocks_as_dicts(analysis.blocks, analysis.wall_time,
                                  cumulative=analysis.options.cumulative),
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
                "notes": list(breakdown.notes),
                "trainer_in_steps": _trainer_in_steps(analysis.waits_in_steps.get(breakdown.block)),
            }
            for breakdown in analysis.breakdowns
        ],
        "steps_in_threads": [steps.as_dict() for steps in analysis.steps_in_threads],
        "policy_in_threads": [calls.as_dict() for calls in analysis.policy_in_threads],
        "memory": None if analysis.memory is None else _memory_document(analysis.memory),
        "workers": None if report is None else {
            "block": report.block,
            "mean": report.mean,
            "workers": [
                {"worker": worker.label, "worker_id": worker.worker_id, "steps": worker.steps,
                 "total": worker.total, "mean": worker.mean, "max": worker.max_time,
                 "max_kind": worker.max_kind, "last_share": worker.last_share,
                 "wait_as_last": worker.wait_as_last, "env_cpu_share": worker.cpu_share}
                for worker in report.workers
            ],
        },
        "unreported": [
            {"worker": worker.label, "worker_id": worker.worker_id, "steps": worker.steps,
             "reason": worker.reason}
            for worker in analysis.unreported
        ],
        "frames": [frame.as_dict() for frame in analysis.frames],
        "operators": None if analysis.operators is None else _operators_document(analysis.operators),
        "device": analysis.device,
    }

"""What a dump's ``memory`` section says, per process: peak, growth, its course, and the blocks
that allocate most — the memory section of ``rlprof analyze`` (:func:`memory_text`,
:func:`memory_document`).

The figures come from the samples each process took of itself (see :mod:`profiler.recording.memory`),
RSS unless said otherwise. Growth compares the median of the run's first quarter of samples with
the median of its last quarter, so a single spike at either end does not make or hide a trend;
the four quarter medians show whether memory grew all along (a leak) or once (a warm-up, a cache
filling). Whether that is a leak is the verdict engine's call (:mod:`profiler.analysis.verdicts`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from profiler.analysis.block_stats import median
from profiler.analysis.memory_advice import allocations_advice, made_by_rlprof_run
from profiler.analysis.text_format import TABLE_WIDTH, fit_left, format_bytes, memory_not_sampled_text

__all__ = [
    "TOP_ALLOCATIONS",
    "BlockAllocation",
    "MemoryReport",
    "ProcessMemoryFigures",
    "memory_document",
    "memory_report",
    "memory_text",
]

QUARTERS = 4
TOP_ALLOCATIONS = 5
"""Blocks listed under the largest allocations."""


@dataclass(frozen=True)
class BlockAllocation:
    """What one block allocated in one process (recorded with ``track_allocations``)."""

    process: str
    path: tuple[str, ...]
    calls: int
    net_bytes: int
    peak_bytes: int

    @property
    def label(self) -> str:
        return "/".join(self.path)


@dataclass(frozen=True)
class ProcessMemoryFigures:
    """One process's memory over the run."""

    name: str
    pid: int
    samples: int
    seconds: float
    """From its first sample to its last."""
    first_bytes: int
    last_bytes: int
    peak_bytes: int
    peak_uss_bytes: int | None
    quarter_medians: tuple[int, ...]
    """Median RSS of each quarter of its samples, in time order (empty with fewer than 4)."""
    quarter_times: tuple[float, ...]
    """Median time of each quarter of its samples, on the trainer's clock."""
    blocks: tuple[BlockAllocation, ...]

    @property
    def growth_bytes(self) -> int:
        """Median of the last quarter minus median of the first (last minus first sample with
        fewer than four samples)."""
        if self.quarter_medians:
            return self.quarter_medians[-1] - self.quarter_medians[0]
        return self.last_bytes - self.first_bytes

    @property
    def rise_bytes(self) -> int:
        """The last sample less the first, never below 0: the whole range the samples span, where
        :attr:`growth_bytes` leaves out the ends (what a replay buffer's fill is set against)."""
        return max(self.last_bytes - self.first_bytes, 0)

    @property
    def start_bytes(self) -> int:
        """Where growth is measured from: the first quarter's median (else the first sample)."""
        return self.quarter_medians[0] if self.quarter_medians else self.first_bytes

    @property
    def end_bytes(self) -> int:
        """Where growth is measured to: the last quarter's median (else the last sample)."""
        return self.quarter_medians[-1] if self.quarter_medians else self.last_bytes

    @property
    def bytes_per_minute(self) -> float | None:
        """Growth per minute, over the time from the first quarter's middle to the last's."""
        span = self.quarter_times[-1] - self.quarter_times[0] if self.quarter_times else self.seconds
        if span <= 0:
            return None
        return self.growth_bytes / span * 60.0


@dataclass(frozen=True)
class MemoryReport:
    processes: tuple[ProcessMemoryFigures, ...]
    rlprof_run: bool = False
    """Made by ``rlprof run``: its options, not the API, say how to measure more."""

    def largest_allocations(self, count: int) -> list[BlockAllocation]:
        """The ``count`` blocks, of any process, with the highest peak in one call."""
        blocks = [block for process in self.processes for block in process.blocks]
        blocks.sort(key=lambda block: (-block.peak_bytes, -block.net_bytes, block.process, block.path))
        return blocks[:count]

    @property
    def tracks_allocations(self) -> bool:
        return any(process.blocks for process in self.processes)


def memory_report(tree: dict[str, Any], during: tuple[float, float] | None = None) -> MemoryReport | None:
    """The memory figures of a normalized tree (see :func:`profiler.load_timing_tree`); None when
    it has no ``memory`` section. ``during``: only the samples taken from its start to its end (on
    the timeline's clock, as the samples are), the training loop's, say."""
    section = tree.get("memory")
    if not section:
        return None
    return MemoryReport(tuple(_process_figures(process, during) for process in section["processes"]),
                        rlprof_run=made_by_rlprof_run(tree))


def _process_figures(process: dict[str, Any], during: tuple[float, float] | None = None) -> ProcessMemoryFigures:
    samples = sorted(process.get("samples", []), key=lambda sample: sample[0])
    if during is not None:
        samples = [sample for sample in samples if during[0] <= sample[0] <= during[1]]
    resident = [sample[1] for sample in samples]
    unique = [sample[2] for sample in samples if sample[2] is not None]
    name = str(process["name"])
    blocks = tuple(
        BlockAllocation(name, tuple(block["path"]), block["calls"], block["net_bytes"], block["peak_bytes"])
        for block in process.get("blocks", [])
    )
    return ProcessMemoryFigures(
        name=name,
        pid=process["pid"],
        samples=len(samples),
        seconds=samples[-1][0] - samples[0][0] if samples else 0.0,
        first_bytes=resident[0] if resident else 0,
        last_bytes=resident[-1] if resident else 0,
        peak_bytes=max(resident, default=0),
        peak_uss_bytes=max(unique) if unique else None,
        quarter_medians=tuple(int(median) for median in _quarter_medians(resident)),
        quarter_times=_quarter_medians([sample[0] for sample in samples]),
        blocks=blocks,
    )


def _quarter_medians(values: list[float]) -> tuple[float, ...]:
    if len(values) < QUARTERS:
        return ()
    bounds = [round(len(values) * quarter / QUARTERS) for quarter in range(QUARTERS + 1)]
    return tuple(median(values[bounds[index]:bounds[index + 1]]) for index in range(QUARTERS))


def memory_text(report: MemoryReport | None, *, width: int = TABLE_WIDTH) -> str:
    """The memory section of ``rlprof analyze``: a row per process, then the largest allocations."""
    if report is None or not report.processes:
        return memory_not_sampled_text(width)
    lines = [f"Memory per process (resident set, sampled): {len(report.processes)} processes",
             f"{'peak':>10} {'start':>10} {'end':>10} {'growth':>11} {'per minute':>11} "
             f"{'samples':>7}  process"]
    for process in report.processes:
        rate = process.bytes_per_minute
        lines.append(f"{format_bytes(process.peak_bytes):>10} {format_bytes(process.start_bytes):>10} "
                     f"{format_bytes(process.end_bytes):>10} {_signed_bytes(process.growth_bytes):>11} "
                     f"{'-' if rate is None else _signed_bytes(rate):>11} {process.samples:>7}  "
                     f"{process.name}")
    lines.append("(start and end: medians of the first and last quarter of the samples)")
    if not report.tracks_allocations:
        lines.append(f"(allocations per block: not tracked; {allocations_advice(report.rlprof_run)})")
        return "\n".join(lines)
    lines.append("")
    lines.append("Largest Python allocations per block (most held at once in one call):")
    lines.append(f"{'peak':>10} {'kept':>11} {'calls':>8}  block")
    for block in report.largest_allocations(TOP_ALLOCATIONS):
        name = fit_left(f"{block.process}: {block.label}", max(16, width - 33))
        lines.append(f"{format_bytes(block.peak_bytes):>10} {_signed_bytes(block.net_bytes):>11} "
                     f"{block.calls:>8}  {name}")
    lines.append("(kept: allocated in the calls and still allocated when they returned, summed)")
    return "\n".join(lines)


def _signed_bytes(byte_count: float) -> str:
    text = format_bytes(byte_count)
    return text if text.startswith("-") or byte_count == 0 else f"+{text}"


def memory_document(report: MemoryReport | None) -> dict[str, Any] | None:
    """The memory section as ``rlprof analyze --format json`` prints it (None: not sampled)."""
    if report is None:
        return None
    return {
        "processes": [
            {"process": process.name, "pid": process.pid, "samples": process.samples,
             "sampled_seconds": process.seconds, "peak_bytes": process.peak_bytes,
             "peak_uss_bytes": process.peak_uss_bytes, "start_bytes": process.start_bytes,
             "end_bytes": process.end_bytes, "growth_bytes": process.growth_bytes,
             "growth_bytes_per_minute": process.bytes_per_minute,
             "quarter_median_bytes": list(process.quarter_medians)}
            for process in report.processes
        ],
        "largest_allocations": [
            {"process": block.process, "block": block.label, "calls": block.calls,
             "peak_bytes": block.peak_bytes, "net_bytes": block.net_bytes}
            for block in report.largest_allocations(TOP_ALLOCATIONS)
        ],
    }
